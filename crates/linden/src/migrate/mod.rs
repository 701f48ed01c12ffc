//! `linden migrate`: an OpenLDAP slapd configuration (slapd.conf or a slapd.d cn=config tree)
//! as a Linden configuration file, and a report of every directive not carried over as it
//! was (docs/migrating-from-openldap.md).
//!
//! - `model`: the neutral model both readers produce (slapd.conf directives with file:line).
//! - `slapd_conf`: slapd.conf, its continuation lines, quotes and includes.
//! - `slapd_d`: a slapd.d tree (LDIF, one entry per file; `olc*` attributes named as
//!   slapd.conf directives).
//! - `acl`: `access to` rules as `[[access]]` tables.
//! - `translate`: everything else, and the TOML text (values written by the toml crate).
//! - `report`: the report.

pub mod acl;
pub mod model;
pub mod report;
pub mod slapd_conf;
pub mod slapd_d;
pub mod translate;

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};

/// `linden migrate`'s arguments.
#[derive(Debug, clap::Args)]
pub struct MigrateArgs {
    /// slapd.conf, or a slapd.d directory (slapd's -F, e.g. /etc/ldap/slapd.d).
    #[arg(value_name = "SLAPD_CONF_OR_SLAPD_D")]
    pub source: PathBuf,
    /// The Linden configuration file to write (schemas carried as files go next to it).
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,
    /// Write the report here instead of stdout.
    #[arg(long, value_name = "FILE")]
    pub report: Option<PathBuf>,
    /// Then check the result as `linden check-config` does (exit status 2 when it would not
    /// start).
    #[arg(long)]
    pub check: bool,
    /// slapd's -h URLs (e.g. "ldap:/// ldaps:/// ldapi:///"), for listen, ldaps_listen and
    /// ldapi.
    #[arg(long, value_name = "URLS")]
    pub listen: Option<String>,
    /// Overwrite --out (and the schema files beside it) if it exists.
    #[arg(long)]
    pub force: bool,
}

/// What `run` produced, for the caller's exit status.
pub struct Outcome {
    /// Problems `--check` found (empty: none, or not asked).
    pub problems: Vec<String>,
}

/// Reads the slapd configuration at `source`.
pub fn read(source: &Path) -> anyhow::Result<model::SlapdConfig> {
    let meta =
        std::fs::metadata(source).with_context(|| format!("cannot read {}", source.display()))?;
    if meta.is_dir() {
        slapd_d::read(source)
    } else {
        slapd_conf::read(source)
    }
}

/// What `migrate` makes of a slapd configuration.
pub struct Migrated {
    /// The Linden configuration file.
    pub text: String,
    /// (file name, text) of schemas to write beside it.
    pub files: Vec<(String, String)>,
    pub report: report::Report,
}

/// The configuration text, the schema files to write beside it, and the report.
pub fn migrate(source: &Path, opts: &translate::Options) -> anyhow::Result<Migrated> {
    let cfg = read(source)?;
    let mut rep = report::Report::default();
    let mut out = translate::translate(&cfg, opts, &mut rep)?;
    out.header.insert(
        0,
        format!(
            "Linden configuration written by `linden migrate` from {}. Read the report before using it.",
            source.display()
        ),
    );
    Ok(Migrated {
        text: out.render(),
        files: out.files,
        report: rep,
    })
}

pub fn run(args: &MigrateArgs) -> anyhow::Result<Outcome> {
    let opts = translate::Options {
        listen: args.listen.clone(),
    };
    let Migrated {
        text,
        files,
        report: rep,
    } = migrate(&args.source, &opts)?;
    let dir = args
        .out
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
        .to_path_buf();
    let mut targets = vec![args.out.clone()];
    targets.extend(files.iter().map(|(n, _)| dir.join(n)));
    if !args.force {
        if let Some(t) = targets.iter().find(|t| t.exists()) {
            bail!(
                "{} exists; give --force to overwrite it, or another --out",
                t.display()
            );
        }
    }
    for (name, body) in &files {
        let p = dir.join(name);
        std::fs::write(&p, body).with_context(|| format!("cannot write {}", p.display()))?;
    }
    write_private(&args.out, &text)?;
    let rendered = rep.render(
        &args.source.display().to_string(),
        &args.out.display().to_string(),
    );
    match &args.report {
        Some(p) => {
            std::fs::write(p, &rendered).with_context(|| format!("cannot write {}", p.display()))?
        }
        None => print!("{rendered}"),
    }
    eprintln!(
        "linden migrate: wrote {}{}; {} directive{} in the report",
        args.out.display(),
        if files.is_empty() {
            String::new()
        } else {
            format!(" and {} schema file(s)", files.len())
        },
        rep.notes.len(),
        if rep.notes.len() == 1 { "" } else { "s" }
    );
    let problems = if args.check {
        let mut serve = crate::cli::ServeArgs {
            config: Some(args.out.clone()),
            ..Default::default()
        };
        serve.keys = crate::args::KeyFlags::default();
        crate::check_problems(&serve)
    } else {
        Vec::new()
    };
    Ok(Outcome { problems })
}

/// The output may hold the administrator's password (hash) and replication credentials:
/// written readable by its owner only, as slapd keeps slapd.d.
fn write_private(path: &Path, text: &str) -> anyhow::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("cannot write {}", path.display()))?;
    f.write_all(text.as_bytes())
        .with_context(|| format!("cannot write {}", path.display()))
}
