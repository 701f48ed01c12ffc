//! Reads slapd.conf (slapd.conf(5)) into the neutral model: logical lines (a line that starts
//! with white space continues the one before), `#` comments, words split on white space with
//! double quotes grouping them, `include` followed (a `.schema` file is a schema, anything else
//! more configuration), and the sections: global, then `database` sections with their
//! `overlay`s.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};

use super::model::{Database, Directive, Loc, Overlay, Schema, SlapdConfig};

/// How deep `include`s may nest (slapd has no limit; a loop must end).
const MAX_INCLUDE_DEPTH: usize = 16;

/// Directives of the global section that belong to the frontend database.
const FRONTEND_DIRECTIVES: &[&str] = &["access", "sizelimit", "timelimit", "limits"];

/// Schema definitions written in slapd.conf itself.
const SCHEMA_DIRECTIVES: &[&str] = &[
    "attributetype",
    "objectclass",
    "objectidentifier",
    "ldapsyntax",
    "ditcontentrule",
];

/// Reads `path` and every file it includes.
pub fn read(path: &Path) -> anyhow::Result<SlapdConfig> {
    let mut cfg = SlapdConfig::new(&path.display().to_string());
    let mut state = State {
        current: None,
        inline_schema: String::new(),
        inline_loc: None,
    };
    read_file(path, &mut cfg, &mut state, 0)?;
    finish(&mut cfg, &mut state);
    if let Some(loc) = state.inline_loc.take() {
        cfg.schemas.push(Schema::Inline {
            name: "slapd-conf".into(),
            text: std::mem::take(&mut state.inline_schema),
            loc,
        });
    }
    Ok(cfg)
}

struct State {
    /// The database section being read (`None`: the global section).
    current: Option<Database>,
    inline_schema: String,
    inline_loc: Option<Loc>,
}

fn finish(cfg: &mut SlapdConfig, state: &mut State) {
    if let Some(db) = state.current.take() {
        if db.kind == "frontend" {
            let fe = &mut cfg.frontend;
            fe.directives.extend(db.directives);
            fe.overlays.extend(db.overlays);
        } else {
            cfg.databases.push(db);
        }
    }
}

fn read_file(
    path: &Path,
    cfg: &mut SlapdConfig,
    state: &mut State,
    depth: usize,
) -> anyhow::Result<()> {
    if depth > MAX_INCLUDE_DEPTH {
        bail!(
            "{}: includes nest deeper than {MAX_INCLUDE_DEPTH} (an include loop?)",
            path.display()
        );
    }
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let file = path.display().to_string();
    for (line, raw) in logical_lines(&text) {
        let loc = Loc {
            file: file.clone(),
            line,
        };
        let words = split_words(&raw).map_err(|e| anyhow::anyhow!("{loc}: {e}"))?;
        let Some((name, args)) = words.split_first() else {
            continue;
        };
        let name = name.to_ascii_lowercase();
        let d = Directive {
            name: name.clone(),
            args: args.to_vec(),
            loc: loc.clone(),
        };
        match name.as_str() {
            "include" => {
                let target = resolve(path, d.arg());
                if d.arg().is_empty() {
                    bail!("{loc}: include names no file");
                }
                if target.extension().is_some_and(|e| e == "schema") {
                    cfg.schemas.push(Schema::File { path: target, loc });
                } else {
                    read_file(&target, cfg, state, depth + 1)?;
                }
            }
            "database" => {
                finish(cfg, state);
                state.current = Some(Database::new(d.arg(), loc));
            }
            "overlay" => {
                let o = Overlay {
                    name: d.arg().to_ascii_lowercase(),
                    loc,
                    directives: Vec::new(),
                };
                match &mut state.current {
                    Some(db) => db.overlays.push(o),
                    None => cfg.frontend.overlays.push(o),
                }
            }
            n if SCHEMA_DIRECTIVES.contains(&n) => {
                state.inline_schema.push_str(raw.trim());
                state.inline_schema.push('\n');
                state.inline_loc.get_or_insert(loc);
            }
            _ => match &mut state.current {
                Some(db) => match db.overlays.last_mut() {
                    // Directives after `overlay` configure it until the next one; the
                    // database's own directives come before its overlays in slapd.conf.
                    Some(o) if belongs_to_overlay(&o.name, &name) => o.directives.push(d),
                    _ => db.directives.push(d),
                },
                None => match cfg.frontend.overlays.last_mut() {
                    Some(o) if belongs_to_overlay(&o.name, &name) => o.directives.push(d),
                    _ if FRONTEND_DIRECTIVES.contains(&name.as_str()) => {
                        cfg.frontend.directives.push(d)
                    }
                    _ => cfg.global.push(d),
                },
            },
        }
    }
    Ok(())
}

/// Whether `directive` is one of `overlay`'s own (slapd.conf lists an overlay's settings
/// after it; anything else after it is still the database's).
fn belongs_to_overlay(overlay: &str, directive: &str) -> bool {
    let prefix = match overlay {
        "memberof" => "memberof-",
        "refint" => "refint_",
        "unique" => "unique_",
        "ppolicy" => "ppolicy_",
        "syncprov" => "syncprov-",
        "dynlist" => "dynlist-",
        "auditlog" => "auditlog",
        "accesslog" => "log",
        "sssvlv" => "sssvlv-",
        "constraint" => "constraint_",
        _ => return !is_database_directive(directive),
    };
    directive.starts_with(prefix)
}

/// Directives that configure a database rather than an overlay.
fn is_database_directive(d: &str) -> bool {
    matches!(
        d,
        "suffix"
            | "rootdn"
            | "rootpw"
            | "directory"
            | "index"
            | "access"
            | "limits"
            | "sizelimit"
            | "timelimit"
            | "syncrepl"
            | "updateref"
            | "mirrormode"
            | "multiprovider"
            | "multimaster"
            | "maxsize"
            | "checkpoint"
    )
}

/// A path an `include` names, relative to the including file's directory when it is not
/// found relative to the working directory (slapd uses the working directory).
fn resolve(from: &Path, name: &str) -> PathBuf {
    let p = PathBuf::from(name);
    if p.is_absolute() || p.exists() {
        return p;
    }
    from.parent().map(|d| d.join(&p)).unwrap_or(p)
}

/// The logical lines of slapd.conf text, each with the number of its first line: comments
/// and blank lines skipped, continuation lines (starting with white space) joined.
pub fn logical_lines(text: &str) -> Vec<(usize, String)> {
    let mut out: Vec<(usize, String)> = Vec::new();
    let mut continuing = false;
    for (i, line) in text.lines().enumerate() {
        let line = line.trim_end_matches('\r');
        if line.starts_with('#') {
            continue;
        }
        if line.trim().is_empty() {
            // A blank line ends a directive (slapd: a continuation needs text).
            continuing = false;
            continue;
        }
        if line.starts_with([' ', '\t']) {
            if continuing {
                if let Some((_, last)) = out.last_mut() {
                    last.push(' ');
                    last.push_str(line.trim());
                    continue;
                }
            }
            out.push((i + 1, line.trim().to_string()));
        } else {
            out.push((i + 1, line.to_string()));
        }
        continuing = true;
    }
    out
}

/// Splits a line into words: white space separates, double quotes group (and are removed;
/// `\"` inside them is a quote), other backslashes are kept for the directive to read.
pub fn split_words(line: &str) -> Result<Vec<String>, String> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    let mut quoted = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' => {
                quoted = !quoted;
                in_word = true;
            }
            '\\' if quoted && matches!(chars.peek(), Some('"')) => {
                cur.push('"');
                chars.next();
            }
            '\\' => {
                cur.push('\\');
                if let Some(n) = chars.next() {
                    cur.push(n);
                }
                in_word = true;
            }
            c if c.is_whitespace() && !quoted => {
                if in_word {
                    words.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            c => {
                cur.push(c);
                in_word = true;
            }
        }
    }
    if quoted {
        return Err(format!("unterminated quote in '{line}'"));
    }
    if in_word {
        words.push(cur);
    }
    Ok(words)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_and_quotes() {
        assert_eq!(
            split_words(r#"access to dn.subtree="ou=a b,dc=x" by * read"#).unwrap(),
            vec!["access", "to", "dn.subtree=ou=a b,dc=x", "by", "*", "read"]
        );
        assert_eq!(
            split_words(r#"rootpw "{SSHA}ab cd""#).unwrap(),
            vec!["rootpw", "{SSHA}ab cd"]
        );
        assert_eq!(
            split_words(r#"x "a\"b" c\,d"#).unwrap(),
            vec!["x", "a\"b", "c\\,d"]
        );
        assert!(split_words("x \"open").is_err());
    }

    #[test]
    fn continuation_and_comments() {
        let t = "# c\nsuffix dc=x\naccess to *\n  by self write\n\tby * read\n\n  stray\n";
        let l = logical_lines(t);
        assert_eq!(l[0], (2, "suffix dc=x".to_string()));
        assert_eq!(l[1], (3, "access to * by self write by * read".to_string()));
        assert_eq!(l[2], (7, "stray".to_string()));
    }

    #[test]
    fn sections_overlays_includes() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("more.conf"),
            "sizelimit 77\naccess to * by * read\n",
        )
        .unwrap();
        let conf = dir.path().join("slapd.conf");
        std::fs::write(
            &conf,
            "include /etc/ldap/schema/core.schema\ninclude more.conf\nloglevel stats\n\
             attributetype ( 1.2.3 NAME 'x' )\n\
             database mdb\nsuffix \"dc=example,dc=com\"\nrootdn cn=admin,dc=example,dc=com\n\
             overlay memberof\nmemberof-group-oc groupOfNames\nindex uid eq\n\
             overlay unique\nunique_uri ldap:///?uid?sub\n",
        )
        .unwrap();
        let c = read(&conf).unwrap();
        assert_eq!(c.schemas.len(), 2);
        assert!(
            matches!(&c.schemas[0], Schema::File { path, .. } if path.ends_with("core.schema"))
        );
        assert!(matches!(&c.schemas[1], Schema::Inline { text, .. } if text.contains("1.2.3")));
        assert_eq!(c.global.len(), 1);
        assert_eq!(c.global[0].name, "loglevel");
        assert_eq!(c.frontend.directives.len(), 2);
        assert!(c.frontend.directives[0].loc.file.ends_with("more.conf"));
        let db = &c.databases[0];
        assert_eq!(db.kind, "mdb");
        assert_eq!(db.suffixes(), vec!["dc=example,dc=com"]);
        assert_eq!(db.overlays.len(), 2);
        assert_eq!(db.overlays[0].directives[0].name, "memberof-group-oc");
        // index after an overlay is the database's
        assert!(db.all("index").next().is_some());
        assert_eq!(db.overlays[1].directives[0].arg(), "ldap:///?uid?sub");
        assert_eq!(db.overlays[1].directives[0].loc.line, 12);
    }
}
