//! `linden man --out DIR` (hidden): writes the manual pages, generated from the same
//! definitions as `--help`, as DIR/NAME.SECTION. The Debian package ships them
//! (packaging/build-deb.sh).
//!
//! Pages: linden(8), the commands, with the files and exit statuses; linden-COMMAND(8) for each
//! command (linden-serve(8), linden-import(8), …) with its options; linden.toml(5), the
//! configuration file, made from the key declarations (`server::config::KEYS`) like the
//! reference table of docs/configuration.md.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::CommandFactory;
use clap_mangen::roff::{bold, italic, roman, Roff};
use clap_mangen::Man;

#[derive(Debug, clap::Args)]
pub struct ManArgs {
    /// Directory to write the pages to (created if missing).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
}

/// The manual this project's pages belong to (the centre of the page footer).
const MANUAL: &str = "Linden Manual";

/// One manual page: its file name (`linden-serve.8`) and its roff text.
pub struct Page {
    pub file: String,
    pub text: Vec<u8>,
}

/// Every page, in the order they are written.
pub fn pages() -> std::io::Result<Vec<Page>> {
    let mut cmd = crate::cli::Cli::command().disable_help_subcommand(true);
    cmd.build();
    let mut pages = vec![linden_page(&cmd)?];
    command_pages(&cmd, &mut pages)?;
    pages.push(config_page()?);
    Ok(pages)
}

pub fn run(args: &ManArgs) -> anyhow::Result<()> {
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("cannot create {}", args.out.display()))?;
    for page in pages().context("rendering the manual pages")? {
        let path = args.out.join(&page.file);
        write(&path, &page.text).with_context(|| format!("cannot write {}", path.display()))?;
        println!("{}", path.display());
    }
    Ok(())
}

fn write(path: &Path, text: &[u8]) -> std::io::Result<()> {
    let mut f = std::fs::File::create(path)?;
    f.write_all(text)?;
    f.sync_all()
}

fn man(cmd: &clap::Command) -> Man {
    Man::new(cmd.clone())
        .section("8")
        .date(env!("LINDEN_GIT_DATE"))
        .source(format!("Linden {}", crate::VERSION))
        .manual(MANUAL)
}

/// linden(8): what `linden --help` says, then where things are and what the exit status means.
fn linden_page(cmd: &clap::Command) -> std::io::Result<Page> {
    let m = man(cmd);
    let mut text = Vec::new();
    m.render(&mut text)?;
    let mut roff = Roff::default();
    roff.control("SH", ["FILES"]);
    for (file, what) in [
        (
            "/etc/linden/linden.toml",
            "The configuration file of the packaged service (linden serve --config).",
        ),
        (
            "/var/lib/linden",
            "The data directory of the packaged service: snapshots, transaction logs, the \
             administrator password's hash and the generated TLS certificate.",
        ),
        (
            "/run/linden/ldapi",
            "The packaged service's ldapi:// socket; root binds over it with SASL EXTERNAL as \
             the administrator.",
        ),
        (
            "/var/log/linden",
            "Access and audit logs when the configuration writes them to files (rotated by \
             /etc/logrotate.d/linden); the server's own log goes to the journal.",
        ),
    ] {
        roff.control("TP", []);
        roff.text([bold(file)]);
        roff.text([roman(what)]);
    }
    roff.control("SH", ["EXIT STATUS"]);
    roff.text([roman(
        "0 after a clean shutdown, 2 for unusable settings (a bad flag, file or key, named in \
         the message), 1 for any other failure. linden verify: 1 when the data is corrupt, 2 \
         when there is no such directory.",
    )]);
    roff.control("SH", ["SEE ALSO"]);
    let mut see = Vec::new();
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        see.push(bold(format!("linden-{}", sub.get_name())));
        see.push(roman("(8), "));
    }
    see.push(bold("ldapsearch"));
    see.push(roman("(1), "));
    see.push(bold("systemd.service"));
    see.push(roman("(5). The documentation in "));
    see.push(italic("docs/"));
    see.push(roman(" of the source, operations.md first."));
    roff.text(see);
    roff.to_writer(&mut text)?;
    Ok(Page {
        file: m.get_filename(),
        text,
    })
}

/// linden.toml(5): every key, by section, with its flag, environment variable, default and
/// reload class, from the declarations.
fn config_page() -> std::io::Result<Page> {
    let mut roff = Roff::default();
    roff.control(
        "TH",
        [
            "linden.toml",
            "5",
            env!("LINDEN_GIT_DATE"),
            &format!("Linden {}", crate::VERSION),
            MANUAL,
        ],
    );
    roff.control("SH", ["NAME"]);
    roff.text([roman(
        "linden.toml \\- configuration of the Linden LDAP server",
    )]);
    roff.control("SH", ["DESCRIPTION"]);
    roff.text([roman(
        "linden serve --config FILE reads a TOML file of keys. Each key may also be given as \
         the environment variable LINDEN_ and the key in capitals, and, unless it is a table, \
         as a flag: -- and the key with - for _. A flag beats the environment, which beats \
         the file, which beats the default. linden check-config --config FILE checks a file \
         as a start would. SIGHUP (or linden reload) applies the keys marked live to the \
         running server; the others need a restart.",
    )]);
    let mut section = "";
    for k in server::config::KEYS {
        if k.section != section {
            section = k.section;
            roff.control("SH", [section.to_uppercase().as_str()]);
        }
        roff.control("TP", []);
        let mut head = vec![bold(k.name)];
        if let Some(f) = k.flag() {
            head.push(roman(", "));
            head.push(bold(format!("--{f}")));
            if !k.is_switch() {
                head.push(roman(" "));
                head.push(italic(k.value_name.unwrap_or("VALUE")));
            }
        }
        head.push(roman(", "));
        head.push(bold(k.env()));
        roff.text(head);
        roff.text([roman(format!(
            "{} Default: {}. Reload: {}.",
            k.doc(),
            k.default_shown(),
            k.reload.name()
        ))]);
    }
    roff.control("SH", ["SEE ALSO"]);
    roff.text([
        bold("linden"),
        roman("(8), "),
        bold("linden-serve"),
        roman("(8); docs/configuration.md in the source."),
    ]);
    let mut text = Vec::new();
    roff.to_writer(&mut text)?;
    Ok(Page {
        file: "linden.toml.5".into(),
        text,
    })
}

/// linden-COMMAND(8) for each visible command, and for their commands in turn
/// (linden-bench-sweep(8)).
fn command_pages(cmd: &clap::Command, pages: &mut Vec<Page>) -> std::io::Result<()> {
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        let m = man(sub);
        let mut text = Vec::new();
        m.render(&mut text)?;
        let mut roff = Roff::default();
        roff.control("SH", ["SEE ALSO"]);
        roff.text([bold("linden"), roman("(8)")]);
        roff.to_writer(&mut text)?;
        pages.push(Page {
            file: m.get_filename(),
            text,
        });
        command_pages(sub, pages)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_page_per_command_each_naming_its_options() {
        let pages = pages().unwrap();
        let names: Vec<&str> = pages.iter().map(|p| p.file.as_str()).collect();
        assert_eq!(names[0], "linden.8");
        for want in ["linden-serve.8", "linden-import.8", "linden-verify.8"] {
            assert!(names.contains(&want), "{want} missing from {names:?}");
        }
        assert!(!names.iter().any(|n| n.contains("-man.")), "{names:?}");
        assert!(!names.iter().any(|n| n.contains("-help.")), "{names:?}");
        let serve = pages.iter().find(|p| p.file == "linden-serve.8").unwrap();
        let text = String::from_utf8_lossy(&serve.text);
        assert!(text.contains("\n.TH linden-serve 8 "), "{text}");
        assert!(text.contains("max\\-pdu\\-size"), "{text}");
        assert!(text.contains("LINDEN_ADMIN_PASSWORD"), "{text}");
        let linden = String::from_utf8_lossy(&pages[0].text);
        assert!(linden.contains("linden\\-serve(8)"), "{linden}");
        assert!(linden.contains("/etc/linden/linden.toml"), "{linden}");
        assert!(linden.contains(crate::VERSION), "{linden}");
        let toml = pages.iter().find(|p| p.file == "linden.toml.5").unwrap();
        let text = String::from_utf8_lossy(&toml.text);
        assert!(text.contains(".TH linden.toml 5"), "{text}");
        for k in server::config::KEYS {
            assert!(text.contains(&k.env()), "{} missing", k.name);
        }
    }
}
