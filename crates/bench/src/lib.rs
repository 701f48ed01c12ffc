//! `linden gen` and `linden bench`: the reference data and the load generator of
//! design.md "Reference workloads".
//!
//! Module map:
//! - [`gen`]: writes the reference LDIF (suffix, `ou=people`, N inetOrgPerson entries),
//!   deterministic for a seed.
//! - [`load`]: the load generator: C connections × D outstanding requests, closed loop or at a
//!   fixed rate, HdrHistogram latencies, per-interval lines and a summary (also as JSON).
//! - [`pace`]: open-loop pacing: the send schedule, the pacer thread that wakes connections
//!   when a request is due, and the latency / latency-from-send / pacing-lag split.
//! - `template` (private): request PDUs encoded once with `{rand}`-style placeholders, then
//!   re-emitted per request with the placeholders and the message id filled in, into a reused
//!   buffer (no per-request allocation).
//! - `response` (private): the minimal response decoder of the hot path (message id, op tag,
//!   result code, entry DN), borrowing from the read buffer.
//! - `stats` (private): per-connection recorders and the [`Summary`](load::Summary).
//! - [`sweep`]: `linden bench sweep`, latency against offered load (open-loop runs of `load`
//!   at stepped rates, several servers); [`plot`] draws its page (HTML with inline SVG).
//!
//! The binary (`linden`) owns argument parsing: it flattens [`gen::GenArgs`] and
//! [`BenchCommand`] into its subcommands and calls [`gen::run`], [`load::run`] and
//! [`sweep::run`].

pub mod gen;
pub mod load;
pub mod pace;
pub mod plot;
mod response;
mod stats;
pub mod sweep;
mod template;

/// `linden bench`: one run (`linden bench WORKLOAD [OPTIONS]`) or a sweep of offered loads
/// (`linden bench sweep [OPTIONS]`).
#[derive(Debug, Clone, clap::Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct BenchCommand {
    #[command(subcommand)]
    pub sub: Option<BenchSub>,
    #[command(flatten)]
    pub run: Option<load::BenchArgs>,
}

#[derive(Debug, Clone, clap::Subcommand)]
pub enum BenchSub {
    /// Latency under load: open-loop runs at stepped rates up to saturation, for several
    /// servers, drawn on one chart per workload (a self-contained HTML page).
    Sweep(sweep::SweepArgs),
}

impl BenchCommand {
    /// Runs what was asked (blocking).
    pub fn run(&self) -> Result<(), Error> {
        match (&self.sub, &self.run) {
            (Some(BenchSub::Sweep(a)), _) => sweep::run(a).map(|_| ()),
            (None, Some(a)) => load::run(a).map(|_| ()),
            (None, None) => Err(Error::Args(
                "name a workload (linden bench search ...) or `sweep`".into(),
            )),
        }
    }
}

use thiserror::Error;

/// Everything that can stop `gen` or `bench`.
#[derive(Debug, Error)]
pub enum Error {
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
    #[error("invalid argument: {0}")]
    Args(String),
    #[error("protocol error from the server: {0}")]
    Protocol(String),
    #[error("initial bind as {dn:?} failed: {code}")]
    Bind { dn: String, code: String },
    #[error("the run had {errors} failed operations (see the summary; --allow-errors to accept)")]
    OperationsFailed { errors: u64 },
    #[error("writing JSON to {path}: {source}")]
    Json {
        path: String,
        #[source]
        source: serde_json::Error,
    },
}

impl Error {
    pub(crate) fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        Error::Io {
            context: context.into(),
            source,
        }
    }
}

/// Appends the decimal form of `v` without going through `fmt` (hot path of both tools).
pub(crate) fn push_u64(out: &mut Vec<u8>, mut v: u64) {
    let mut tmp = [0u8; 20];
    let mut i = tmp.len();
    loop {
        i -= 1;
        tmp[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    out.extend_from_slice(&tmp[i..]);
}

#[cfg(test)]
mod tests {
    #[test]
    fn decimal() {
        for v in [0u64, 7, 10, 99, 12345, u64::MAX] {
            let mut out = Vec::new();
            super::push_u64(&mut out, v);
            assert_eq!(out, v.to_string().as_bytes());
        }
    }
}
