//! `linden verify --data DIR`: checks every file of a data directory without changing it.
//!
//! One line per file, then what a start-up would recover. Exit status: 0 when the directory
//! is usable (a torn last batch is normal after a crash: it was never acknowledged), 1 when a
//! file is corrupt or recovery would stop, 2 for a directory that cannot be checked at all.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use store::persist::{FileKind, FileReport, FileStatus, FsIo, PersistError, RecordKinds};

#[derive(Debug, Args)]
pub struct VerifyArgs {
    /// Data directory to check (the server may be running; nothing is written).
    #[arg(long = "data", value_name = "DIR")]
    pub data: PathBuf,
    /// The `linden serve` configuration file whose `schema_files` define attribute types the
    /// data uses (schema added over LDAP is kept in the data directory itself).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
}

pub fn run(args: &VerifyArgs) -> ExitCode {
    let dir = &args.data;
    // `verify` treats an absent directory as an empty store, which is right for a server
    // start but hides a mistyped path here.
    if !dir.is_dir() {
        eprintln!("linden: error: {}: no such data directory", dir.display());
        return ExitCode::from(2);
    }
    let schema = match crate::config::from_file(args.config.as_deref())
        .and_then(|c| crate::config::configured_schema(&c))
    {
        Ok(s) => s,
        Err(e) => {
            eprintln!("linden: error: {e}");
            return ExitCode::from(2);
        }
    };
    let report = match store::persist::verify(&FsIo, dir, &schema) {
        Ok(r) => r,
        Err(e @ PersistError::Io { .. }) => {
            eprintln!("linden: error: cannot read the data directory: {e}");
            return ExitCode::FAILURE;
        }
        Err(e) => {
            eprintln!("linden: error: {e}");
            return ExitCode::FAILURE;
        }
    };
    for f in &report.files {
        println!("{}", file_line(f));
    }
    if report.files.is_empty() {
        println!("(no data files: an empty directory)");
    }
    match &report.recovery {
        Ok((entries, last)) => {
            println!("recovery: {entries} entries after recovery, last batch {last}")
        }
        Err(e) => println!("recovery: FAILS: {e}"),
    }
    if report.is_ok() {
        println!("verify: ok");
        ExitCode::SUCCESS
    } else {
        println!("verify: CORRUPT — do not start a server on this directory before restoring it");
        ExitCode::FAILURE
    }
}

fn file_line(f: &FileReport) -> String {
    let kind = match f.kind {
        FileKind::Snapshot => "snapshot",
        FileKind::Log => "log",
        FileKind::Temporary => "temporary",
        FileKind::Other => "other",
    };
    let contents = match f.kind {
        FileKind::Snapshot => format!(
            "batch {}, {} entries",
            f.last_seq.unwrap_or_default(),
            f.records
        ),
        FileKind::Log => match (f.first_seq, f.last_seq) {
            (Some(a), Some(b)) => format!(
                "batches {a}..={b} ({} batches, {} records: {})",
                f.batches,
                f.records,
                kinds(&f.kinds)
            ),
            (Some(a), None) if f.batches == 0 => format!("from batch {a}"),
            _ => format!("{} batches, {} records", f.batches, f.records),
        },
        FileKind::Temporary | FileKind::Other => "-".to_string(),
    };
    let status = match &f.status {
        FileStatus::Ok => "ok".to_string(),
        FileStatus::TornTail { offset, reason } => {
            format!("torn tail at byte {offset} (normal after a crash): {reason}")
        }
        FileStatus::Corrupt(msg) => format!("CORRUPT{}", corrupt_detail(&f.name, msg)),
        FileStatus::Ignored => "ignored".to_string(),
    };
    format!("{}  {kind}  {contents}  {status}", f.name)
}

/// A log file's records by kind: `3 put, 8 patch, 1 delete` (kinds it has none of left out).
fn kinds(k: &RecordKinds) -> String {
    let all = [
        (k.puts, "put"),
        (k.patches, "patch"),
        (k.deletes, "delete"),
        (k.other, "other"),
    ];
    let some: Vec<String> = all
        .iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, what)| format!("{n} {what}"))
        .collect();
    if some.is_empty() {
        "none".to_string()
    } else {
        some.join(", ")
    }
}

/// Turns `"<file>: corrupt at byte N: reason; advice"` (the store's error text) into
/// `" at byte N: reason"`; other messages are kept whole after `": "`.
fn corrupt_detail(name: &str, msg: &str) -> String {
    let m = msg
        .strip_prefix(name)
        .and_then(|m| m.strip_prefix(": "))
        .unwrap_or(msg);
    let m = m.split("; nothing was changed on disk").next().unwrap_or(m);
    match m.strip_prefix("corrupt at byte ") {
        Some(rest) => format!(" at byte {rest}"),
        None => format!(": {m}"),
    }
}
