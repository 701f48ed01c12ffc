//! `linden gen` without the rest of the server: `cargo run --release -p bench --example gen --
//! --count 1000000 --output people.ldif`.

use clap::Parser;

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    args: bench::gen::GenArgs,
}

fn main() -> Result<(), bench::Error> {
    bench::gen::run(&Cli::parse().args)
}
