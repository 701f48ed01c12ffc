//! `linden schema list` and `linden schema show NAME`: the schema bundles shipped in the
//! binary (`schema::bundles()`), which the `schemas` configuration key enables by name.

use clap::{Args, Subcommand};

use crate::config::ConfigError;

#[derive(Debug, Args)]
pub struct SchemaArgs {
    #[command(subcommand)]
    pub command: SchemaCommand,
}

#[derive(Debug, Subcommand)]
pub enum SchemaCommand {
    /// List the bundles: name, what it holds, the bundles it cannot be enabled with.
    List,
    /// Print a bundle's definitions as an OpenLDAP .schema file (slapd's `include` reads it).
    Show {
        /// A name from `linden schema list`.
        name: String,
    },
}

pub fn run(args: &SchemaArgs) -> anyhow::Result<()> {
    let out = match &args.command {
        SchemaCommand::List => list(),
        SchemaCommand::Show { name } => show(name)?.to_string(),
    };
    print!("{out}");
    Ok(())
}

/// One line per bundle: name, description, then `(conflicts with: …)` when it has conflicts.
fn list() -> String {
    let width = schema::bundles()
        .iter()
        .map(|b| b.name.len())
        .max()
        .unwrap_or(0);
    let mut out = String::new();
    for b in schema::bundles() {
        out.push_str(&format!("{:<width$}  {}", b.name, b.description));
        if !b.conflicts.is_empty() {
            out.push_str(&format!(" (conflicts with: {})", b.conflicts.join(", ")));
        }
        out.push('\n');
    }
    out
}

fn show(name: &str) -> Result<&'static str, ConfigError> {
    schema::bundle(name).map(|b| b.text).ok_or_else(|| {
        let known: Vec<&str> = schema::bundles().iter().map(|b| b.name).collect();
        ConfigError(format!(
            "unknown schema bundle '{name}'; known bundles: {}",
            known.join(", ")
        ))
    })
}

#[cfg(test)]
#[allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed unwrap is a failed test"
)]
mod tests {
    use super::*;

    #[test]
    fn list_names_every_bundle_and_its_conflicts() {
        let out = list();
        assert_eq!(out.lines().count(), schema::bundles().len());
        let bis = out.lines().find(|l| l.starts_with("rfc2307bis ")).unwrap();
        assert!(bis.ends_with("(conflicts with: nis)"), "{bis}");
        assert!(out.lines().any(|l| l.starts_with("sudo ")));
    }

    #[test]
    fn show_prints_the_text_and_refuses_unknown_names() {
        assert!(show("sudo").unwrap().contains("NAME 'sudoRole'"));
        let e = show("sudoers").unwrap_err().to_string();
        assert!(e.contains("'sudoers'") && e.contains("openssh-lpk"), "{e}");
    }
}
