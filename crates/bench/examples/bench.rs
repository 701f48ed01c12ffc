//! `linden bench` without the rest of the server: `cargo run --release -p bench --example bench
//! -- search --url ldap://127.0.0.1:3389 --connections 8 --depth 32`.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "developer tool: a failed step ends the run with its message"
)]

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
