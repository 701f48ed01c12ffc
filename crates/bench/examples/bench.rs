//! `linden bench` without the rest of the server: `cargo run --release -p bench --example bench
//! -- search --url ldap://127.0.0.1:3389 --connections 8 --depth 32`.

use clap::Parser;
use std::process::ExitCode;

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    args: bench::load::BenchArgs,
}

fn main() -> ExitCode {
    match bench::load::run(&Cli::parse().args) {
        Ok(_) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("bench: {e}");
            ExitCode::FAILURE
        }
    }
}
