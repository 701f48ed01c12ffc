//! `linden gen` without the rest of the server: `cargo run --release -p bench --example gen --
//! --count 1000000 --output people.ldif`.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "developer tool: a failed step ends the run with its message"
)]

use clap::Parser;

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    args: bench::gen::GenArgs,
}

fn main() -> Result<(), bench::Error> {
    bench::gen::run(&Cli::parse().args)
}
