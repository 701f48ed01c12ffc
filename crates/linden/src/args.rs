//! The arguments of `linden serve` and `linden import`: what the command line may say about
//! the settings (`config` merges them with the file and the environment). Kept apart from the
//! command-line parser (`cli`) so that the configuration can name them without depending on
//! the commands.
//!
//! `serve`'s flags are not written here: `KeyFlags` makes one for every key declared in
//! `server::config::KEYS` (`--max-pdu-size BYTES` for `max_pdu_size`), with the key's
//! documentation, default and environment variable in its help.

use std::path::PathBuf;

use clap::{Arg, ArgAction, ArgMatches, Args, Command, FromArgMatches};
use server::config::{Key, KEYS};

#[derive(Debug, Default, Clone, Args)]
pub struct ServeArgs {
    /// Read settings from this TOML file. The environment (LINDEN_<KEY>) and flags given on
    /// the command line override it.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,

    #[command(flatten)]
    pub keys: KeyFlags,
}

/// The configuration keys given as flags, each with the text of every occurrence.
#[derive(Default, Clone)]
pub struct KeyFlags {
    pub given: Vec<(&'static Key, Vec<String>)>,
}

impl std::fmt::Debug for KeyFlags {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Values may be secrets (the administrator password): only the flags' names.
        f.debug_list()
            .entries(self.given.iter().map(|(k, _)| k.name))
            .finish()
    }
}

impl KeyFlags {
    /// Records `values` for the key `name` as if given on the command line.
    pub fn give(&mut self, name: &str, values: Vec<String>) {
        if let Some(k) = server::config::key(name) {
            self.given.retain(|(g, _)| g.name != k.name);
            self.given.push((k, values));
        }
    }
}

fn arg_of(k: &'static Key) -> Option<Arg> {
    let long = k.flag()?;
    let mut help = format!(
        "{} [default: {}] [env: {}] [key: {}]",
        k.doc(),
        k.default_shown(),
        k.env(),
        k.name
    );
    if k.reload == server::config::Reload::Live {
        help.push_str(" [reload: live]");
    }
    let arg = Arg::new(k.name).long(long).help(help);
    Some(if k.is_switch() {
        arg.action(ArgAction::SetTrue)
    } else {
        let arg = arg
            .value_name(k.value_name.unwrap_or("VALUE"))
            .allow_hyphen_values(true);
        if k.repeats() {
            arg.action(ArgAction::Append)
        } else {
            arg.action(ArgAction::Set)
        }
    })
}

/// The flags among `keys` that the command line gave.
fn given_of(
    m: &ArgMatches,
    keys: impl Iterator<Item = &'static Key>,
) -> Vec<(&'static Key, Vec<String>)> {
    let mut given = Vec::new();
    for k in keys.filter(|k| k.value_name.is_some()) {
        if k.is_switch() {
            if m.try_get_one::<bool>(k.name).ok().flatten() == Some(&true) {
                given.push((k, vec!["true".to_string()]));
            }
        } else if let Ok(Some(values)) = m.try_get_many::<String>(k.name) {
            given.push((k, values.cloned().collect()));
        }
    }
    given
}

impl FromArgMatches for KeyFlags {
    fn from_arg_matches(m: &ArgMatches) -> Result<Self, clap::Error> {
        Ok(KeyFlags {
            given: given_of(m, KEYS.iter()),
        })
    }

    fn update_from_arg_matches(&mut self, m: &ArgMatches) -> Result<(), clap::Error> {
        *self = KeyFlags::from_arg_matches(m)?;
        Ok(())
    }
}

impl Args for KeyFlags {
    fn augment_args(mut cmd: Command) -> Command {
        for k in KEYS {
            if let Some(arg) = arg_of(k) {
                cmd = cmd.next_help_heading(k.section).arg(arg);
            }
        }
        cmd.next_help_heading(None::<&str>)
    }

    fn augment_args_for_update(cmd: Command) -> Command {
        KeyFlags::augment_args(cmd)
    }
}

/// The settings of an s3:// archive (`archive_s3_*` keys) as flags of `linden archive list`
/// and `linden restore`: the same flags, environment variables and file keys as `serve`'s.
#[derive(Debug, Default, Clone)]
pub struct ArchiveS3Flags(pub KeyFlags);

fn is_archive_s3(k: &&'static Key) -> bool {
    k.name.starts_with("archive_s3_")
}

impl FromArgMatches for ArchiveS3Flags {
    fn from_arg_matches(m: &ArgMatches) -> Result<Self, clap::Error> {
        Ok(ArchiveS3Flags(KeyFlags {
            given: given_of(m, KEYS.iter().filter(is_archive_s3)),
        }))
    }

    fn update_from_arg_matches(&mut self, m: &ArgMatches) -> Result<(), clap::Error> {
        *self = ArchiveS3Flags::from_arg_matches(m)?;
        Ok(())
    }
}

impl Args for ArchiveS3Flags {
    fn augment_args(mut cmd: Command) -> Command {
        for k in KEYS.iter().filter(is_archive_s3) {
            if let Some(arg) = arg_of(k) {
                cmd = cmd.next_help_heading("S3 archive").arg(arg);
            }
        }
        cmd.next_help_heading(None::<&str>)
    }

    fn augment_args_for_update(cmd: Command) -> Command {
        ArchiveS3Flags::augment_args(cmd)
    }
}

#[derive(Debug, Args)]
pub struct ImportArgs {
    /// Take the settings that shape the stored data (password_hash and its cost keys, suffix,
    /// admin_dn, indexes, data) from this `linden serve` TOML file. Flags given here override
    /// it.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Data directory to create (it must hold no snapshot or log files). [default: ./linden-data]
    /// [key: data]
    #[arg(long, value_name = "DIR")]
    pub data: Option<PathBuf>,
    /// Naming context(s) of the data (repeatable). [default: dc=example,dc=com] [key: suffix]
    #[arg(long = "suffix", value_name = "DN")]
    pub suffixes: Vec<String>,
    /// Skip bad records and list them at the end, instead of stopping at the first.
    #[arg(long)]
    pub continue_on_error: bool,
    /// Threads that parse and check entries. [default: all cores]
    #[arg(long, value_name = "N")]
    pub threads: Option<usize>,
    /// The LDIF file (RFC 2849), e.g. from slapcat or `linden gen`.
    #[arg(value_name = "FILE.ldif")]
    pub file: PathBuf,
}
