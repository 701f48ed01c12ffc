//! `linden archive list` (the restore points an archive holds) and `linden restore` (a new
//! data directory as of a moment), over the archive a server fills (`archive`;
//! docs/backup-and-restore.md).

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{bail, Context};
use clap::{Args, Subcommand};
use store::persist::archive::{self, Point};

use crate::args::ArchiveS3Flags;

#[derive(Debug, Args)]
pub struct ArchiveArgs {
    #[command(subcommand)]
    pub command: ArchiveCommand,
}

#[derive(Debug, Subcommand)]
pub enum ArchiveCommand {
    /// List what an archive holds: its snapshots, its log files (batches and times), and the
    /// range of moments it can restore.
    List(ListArgs),
}

#[derive(Debug, Args)]
pub struct ListArgs {
    /// The archive (file:///path or s3://bucket/prefix); by default the `archive` of --config.
    #[arg(long, value_name = "URL")]
    pub archive: Option<String>,
    /// A `linden serve` configuration file (its `archive` and `archive_s3_*` keys).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    #[command(flatten)]
    pub s3: ArchiveS3Flags,
}

#[derive(Debug, Args)]
pub struct RestoreArgs {
    /// The archive (file:///path or s3://bucket/prefix); by default the `archive` of
    /// --config.
    #[arg(long, value_name = "URL")]
    pub archive: Option<String>,
    /// The new data directory (absent or empty; never a running server's). With --subtree:
    /// where the point is restored before the subtree is read from it (kept afterwards);
    /// by default a temporary directory, removed at the end.
    #[arg(long = "data", value_name = "DIR", required_unless_present = "subtree")]
    pub data: Option<PathBuf>,
    /// Restore every batch committed at or before this time (RFC 3339, e.g.
    /// 2026-11-28T10:14:00Z).
    #[arg(long, value_name = "RFC3339", conflicts_with_all = ["to_csn", "to_batch"])]
    pub to: Option<String>,
    /// Restore up to the change stamped with this CSN (an entryCSN): that change and
    /// everything before it, nothing after.
    #[arg(long, value_name = "CSN", conflicts_with = "to_batch")]
    pub to_csn: Option<String>,
    /// Restore every batch up to and including this batch number.
    #[arg(long, value_name = "N")]
    pub to_batch: Option<u64>,
    /// The `linden serve` configuration file: its `schema_files` (for the check of the
    /// result) and, without --archive, its `archive`.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Keep the data's replication identity: consumers holding cookies from before the restore
    /// then refresh from their cookie instead of fully (only for a node whose peers hold
    /// nothing it lacks; see docs/backup-and-restore.md).
    #[arg(long)]
    pub keep_identity: bool,
    #[command(flatten)]
    pub s3: ArchiveS3Flags,
    /// Put this subtree (the entry and everything below it) back into a running server as it
    /// was at the point (--into): entries it lacks are added with their entryUUID, group
    /// memberships put back; entries it has are left as they are.
    #[arg(long, value_name = "DN", requires_all = ["into", "bind_dn", "password_file"])]
    pub subtree: Option<String>,
    /// The running server the subtree goes back into (ldap://HOST:PORT or ldaps://HOST:PORT).
    #[arg(long, value_name = "URL", requires = "subtree")]
    pub into: Option<String>,
    /// Who writes the subtree back: an identity with manage access (the administrator), which
    /// the Relax Rules control needs to keep entryUUIDs.
    #[arg(long, value_name = "DN", requires = "subtree")]
    pub bind_dn: Option<String>,
    /// A file holding the bind password (one line).
    #[arg(long, value_name = "FILE", requires = "subtree")]
    pub password_file: Option<PathBuf>,
    /// With --subtree: print what would be done, write nothing.
    #[arg(long, requires = "subtree")]
    pub dry_run: bool,
}

/// The archive of `--archive` (else the `archive` of `--config`), with its settings from the
/// flags, the environment and `--config`, in `serve`'s order of precedence: built the way the
/// server builds it (`server::archive::open_target`).
fn target(
    url: Option<&str>,
    config: Option<&std::path::Path>,
    s3: &ArchiveS3Flags,
) -> anyhow::Result<Box<dyn archive::ArchiveTarget>> {
    let mut flags = s3.0.clone();
    if let Some(u) = url {
        flags.give("archive", vec![u.to_string()]);
    }
    let c = crate::config::read(&crate::config::Sources {
        file: config,
        env: &crate::config::process_env,
        flags: &flags,
    })?;
    if c.archive.is_empty() {
        bail!("no archive given: pass --archive URL (or --config FILE with an `archive` key)");
    }
    Ok(server::archive::open_target(&c)?)
}

fn time(t: Option<u64>) -> String {
    t.map_or_else(|| "time unknown".to_string(), archive::rfc3339_micros)
}

pub fn list(args: &ArchiveArgs) -> anyhow::Result<()> {
    let ArchiveCommand::List(a) = &args.command;
    let target = target(a.archive.as_deref(), a.config.as_deref(), &a.s3)?;
    let cat = archive::catalog(&*target)?;
    println!("archive {}", target.describe());
    for (seq, name, bytes) in &cat.snapshots {
        println!(
            "{name}  snapshot  batch {seq} ({})  {bytes} bytes",
            time(cat.time_of(*seq))
        );
    }
    for l in &cat.logs {
        match l.last_seq {
            Some(last) => println!(
                "{}  log  batches {}..={last} ({} batches)  {} .. {}{}",
                l.name,
                l.first_seq,
                l.batches,
                time(l.first_time),
                time(l.last_time),
                l.newest_csn
                    .as_deref()
                    .map(|c| format!("  newest CSN {c}"))
                    .unwrap_or_default()
            ),
            None => println!("{}  log  from batch {} (no batches)", l.name, l.first_seq),
        }
    }
    match (cat.first_point(), cat.last_point()) {
        (Some(a), Some(b)) => {
            let first_time = cat
                .logs
                .iter()
                .find(|l| l.last_seq.is_some_and(|s| s > a))
                .and_then(|l| l.first_time);
            println!(
                "restore points: batch {a} to batch {b}; times {} to {} ({} snapshots, {} log files)",
                time(first_time),
                time(cat.time_of(b).or(cat.logs.iter().rev().find_map(|l| l.last_time))),
                cat.snapshots.len(),
                cat.logs.len()
            );
        }
        _ => println!("restore points: none (no snapshot, and no log from batch 1)"),
    }
    Ok(())
}

pub fn restore(args: &RestoreArgs) -> anyhow::Result<()> {
    let t = Instant::now();
    let point = match (&args.to, &args.to_csn, args.to_batch) {
        (Some(s), _, _) => Point::Time(archive::parse_rfc3339(s).with_context(|| {
            format!("--to {s}: not an RFC 3339 time (e.g. 2026-11-28T10:14:00Z)")
        })?),
        (_, Some(c), _) => {
            if dit::csn::parse(c).is_none() {
                bail!("--to-csn {c}: not a CSN (e.g. 20261128101400.000000Z#000000#000#000000)");
            }
            Point::Csn(c.clone())
        }
        (_, _, Some(n)) => Point::Batch(n),
        _ => Point::Latest,
    };
    let target = target(args.archive.as_deref(), args.config.as_deref(), &args.s3)?;
    let schema = crate::config::from_file(args.config.as_deref())
        .and_then(|c| crate::config::configured_schema(&c))?;
    if let Some(subtree) = &args.subtree {
        return undo(args, subtree, &*target, &point, &schema, t);
    }
    let Some(data) = &args.data else {
        bail!("--data DIR is needed (the new data directory), or --subtree DN --into URL");
    };
    let opts = archive::RestoreOptions {
        new_identity: !args.keep_identity,
    };
    let rep = archive::restore(&*target, data, &point, &schema, &opts)?;
    println!(
        "restored {} from {} to {point}: {} and {} log batches, up to batch {} ({}); {} entries; verify: ok",
        data.display(),
        target.describe(),
        rep.snapshot
            .as_deref()
            .map_or("no snapshot (from an empty directory)".to_string(), |s| format!("snapshot {s}")),
        rep.batches,
        rep.last_seq,
        time(rep.last_time),
        rep.entries,
    );
    if let Some(marks) = &rep.marked {
        println!(
            "new replication identity: contextCSN and the tombstones' floor raised to {} (batch {}): consumers with older cookies refresh fully",
            marks.join(", "),
            rep.last_seq + 1
        );
    }
    println!(
        "restore took {:.3} s: {:.3} s fetching and writing, {:.3} s verifying",
        t.elapsed().as_secs_f64(),
        rep.fetch_seconds,
        rep.verify_seconds
    );
    Ok(())
}

/// Sent when the undo did not do everything asked (a refusal): the exit status is 1 and the
/// report has said what.
#[derive(Debug)]
pub struct Incomplete;

impl std::fmt::Display for Incomplete {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("not everything was put back: see the lines marked refused or skipped above")
    }
}

impl std::error::Error for Incomplete {}

/// `restore --subtree DN --into URL` (`crate::undo`): the point restored into --data or a
/// temporary directory, read back with the store's recovery, the subtree written back.
fn undo(
    args: &RestoreArgs,
    subtree: &str,
    target: &dyn archive::ArchiveTarget,
    point: &Point,
    schema: &schema::Schema,
    t: Instant,
) -> anyhow::Result<()> {
    let (Some(into), Some(bind_dn), Some(password_file)) =
        (&args.into, &args.bind_dn, &args.password_file)
    else {
        bail!("--subtree needs --into URL, --bind-dn DN and --password-file FILE");
    };
    let temp;
    let dir = match &args.data {
        Some(d) => d.as_path(),
        None => {
            temp = tempfile::Builder::new()
                .prefix("linden-undo-")
                .tempdir()
                .context("cannot create a temporary directory for the restored point (set TMPDIR, or give --data DIR)")?;
            temp.path()
        }
    };
    // The data is only read: its replication identity does not matter.
    let opts = archive::RestoreOptions {
        new_identity: false,
    };
    let rep = archive::restore(target, dir, point, schema, &opts)?;
    println!(
        "restored {point} from {} (up to batch {}, {}; {} entries) into {}",
        target.describe(),
        rep.last_seq,
        time(rep.last_time),
        rep.entries,
        dir.display()
    );
    let rec = store::persist::recover(&store::persist::FsIo, dir, schema)
        .with_context(|| format!("reading the restored point in {}", dir.display()))?;
    let u = crate::undo::Undo {
        subtree,
        into,
        bind_dn,
        password_file,
        dry_run: args.dry_run,
    };
    if crate::undo::put_back(&rec, &u, t)? {
        Ok(())
    } else {
        Err(Incomplete.into())
    }
}
