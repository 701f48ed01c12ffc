//! Reads a slapd.d directory (the cn=config tree slapd-config(5) keeps as one LDIF file per
//! entry, each with its `# AUTO-GENERATED` and `# CRC32` comment lines) into the neutral
//! model: each `olc*` attribute becomes the slapd.conf directive it stands for (`olcSuffix` is
//! `suffix`, `olcDbIndex` is `index`, `olcMemberOfGroupOC` is `memberof-group-oc` …), with the
//! file and line of the attribute; an attribute with no slapd.conf name keeps its own, so the
//! report names it.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use base64::Engine;

use super::model::{Database, Directive, Loc, Overlay, Schema, SlapdConfig};

/// Files of a slapd.d tree are a few KB; a schema entry can be larger.
const MAX_FILE_BYTES: u64 = 16 << 20;

/// Attributes of cn=config entries that are not settings.
const SKIP: &[&str] = &[
    "objectclass",
    "cn",
    "olcdatabase",
    "olcoverlay",
    "structuralobjectclass",
    "entryuuid",
    "creatorsname",
    "createtimestamp",
    "entrycsn",
    "modifiersname",
    "modifytimestamp",
    "contextcsn",
];

/// `olc*` attribute (lower case) → slapd.conf keyword, and whether its value is a list of
/// words (`olcAccess: to * by * read`) rather than one value (`olcSuffix: dc=a b,dc=c`).
const NAMES: &[(&str, &str, bool)] = &[
    ("olcaccess", "access", true),
    ("olcsuffix", "suffix", false),
    ("olcrootdn", "rootdn", false),
    ("olcrootpw", "rootpw", false),
    ("olcdbindex", "index", true),
    ("olcsizelimit", "sizelimit", true),
    ("olctimelimit", "timelimit", true),
    ("olclimits", "limits", true),
    ("olcserverid", "serverid", true),
    ("olcsyncrepl", "syncrepl", true),
    ("olcmultiprovider", "multiprovider", false),
    ("olcmirrormode", "mirrormode", false),
    ("olcupdateref", "updateref", false),
    ("olcreferral", "referral", false),
    ("olctlscertificatefile", "tlscertificatefile", false),
    ("olctlscertificatekeyfile", "tlscertificatekeyfile", false),
    ("olctlscacertificatefile", "tlscacertificatefile", false),
    ("olctlscacertificatepath", "tlscacertificatepath", false),
    ("olctlsverifyclient", "tlsverifyclient", false),
    ("olctlsciphersuite", "tlsciphersuite", false),
    ("olctlsprotocolmin", "tlsprotocolmin", false),
    ("olctlscrlcheck", "tlscrlcheck", false),
    ("olctlsdhparamfile", "tlsdhparamfile", false),
    ("olctlsecname", "tlsecname", false),
    ("olcauthzregexp", "authz-regexp", true),
    ("olcauthzpolicy", "authz-policy", false),
    ("olcsecurity", "security", true),
    ("olcrequires", "require", true),
    ("olcallows", "allow", true),
    ("olcdisallows", "disallow", true),
    ("olcloglevel", "loglevel", true),
    ("olcidletimeout", "idletimeout", false),
    ("olcpidfile", "pidfile", false),
    ("olcargsfile", "argsfile", false),
    ("olctoolthreads", "tool-threads", false),
    ("olcthreads", "threads", false),
    ("olcmoduleload", "moduleload", false),
    ("olcmodulepath", "modulepath", false),
    ("olcdbdirectory", "directory", false),
    ("olcdbmaxsize", "maxsize", false),
    ("olcdbcheckpoint", "checkpoint", true),
    ("olclastmod", "lastmod", false),
    ("olcreadonly", "readonly", false),
    ("olcdbnosync", "dbnosync", false),
    ("olcpasswordhash", "password-hash", true),
    ("olcmonitoring", "monitoring", false),
    ("olcmemberofgroupoc", "memberof-group-oc", false),
    ("olcmemberofmemberad", "memberof-member-ad", false),
    ("olcmemberofmemberofad", "memberof-memberof-ad", false),
    ("olcmemberofrefint", "memberof-refint", false),
    ("olcmemberofdangling", "memberof-dangling", false),
    ("olcmemberofdanglingerror", "memberof-dangling-error", false),
    ("olcmemberofdn", "memberof-dn", false),
    ("olcrefintattribute", "refint_attributes", true),
    ("olcrefintnothing", "refint_nothing", false),
    ("olcrefintmodifiersname", "refint_modifiersname", false),
    ("olcuniqueuri", "unique_uri", false),
    ("olcuniquebase", "unique_base", false),
    ("olcuniqueattribute", "unique_attributes", true),
    ("olcuniqueignore", "unique_ignore", true),
    ("olcuniquestrict", "unique_strict", false),
    ("olcppolicydefault", "ppolicy_default", false),
    ("olcppolicyhashcleartext", "ppolicy_hash_cleartext", false),
    ("olcppolicyuselockout", "ppolicy_use_lockout", false),
    ("olcppolicyforwardupdates", "ppolicy_forward_updates", false),
    (
        "olcppolicysendnetscapecontrols",
        "ppolicy_send_netscape_controls",
        false,
    ),
    ("olcspsessionlog", "syncprov-sessionlog", false),
    ("olcspcheckpoint", "syncprov-checkpoint", true),
    ("olcspnopresent", "syncprov-nopresent", false),
    ("olcspreloadhint", "syncprov-reloadhint", false),
    ("olcdynlistattrset", "dynlist-attrset", true),
    ("olcauditlogfile", "auditlog", false),
    ("olcsssvlvmax", "sssvlv-max", false),
    ("olcsssvlvmaxkeys", "sssvlv-maxkeys", false),
    ("olcsssvlvmaxperconn", "sssvlv-maxperconn", false),
];

/// One attribute value of an LDIF entry and the line it starts on.
struct Value {
    attr: String,
    value: String,
    line: usize,
}

/// One entry of the tree.
struct Entry {
    file: String,
    dn: String,
    /// The RDNs of the directories it is in, innermost first (`olcDatabase={1}mdb`,
    /// `cn=config`): slapd.d files hold only their own RDN.
    parents: Vec<String>,
    values: Vec<Value>,
}

/// Reads the slapd.d directory `dir`.
pub fn read(dir: &Path) -> anyhow::Result<SlapdConfig> {
    let root = dir.join("cn=config.ldif");
    if !root.is_file() {
        bail!(
            "{}: not a slapd.d directory (it has no cn=config.ldif; give slapd's -F directory, \
             e.g. /etc/ldap/slapd.d)",
            dir.display()
        );
    }
    let mut files = vec![(root, Vec::new())];
    collect(
        &dir.join("cn=config"),
        &["cn=config".to_string()],
        &mut files,
    )?;
    let mut entries = Vec::new();
    for (f, parents) in &files {
        for mut e in read_ldif(f)? {
            e.parents = parents.clone();
            entries.push(e);
        }
    }
    let mut cfg = SlapdConfig::new(&dir.display().to_string());
    let mut dbs: Vec<(i64, String, Database)> = Vec::new();
    let mut overlays: Vec<(String, i64, Overlay)> = Vec::new();
    let mut schemas: Vec<(i64, Schema)> = Vec::new();
    for e in entries {
        let first = split_dn(&e.dn).first().cloned().unwrap_or_default();
        let mut rdns = vec![first.clone()];
        rdns.extend(e.parents.iter().cloned());
        let (attr, val) = first.split_once('=').unwrap_or(("", ""));
        let attr = attr.trim().to_ascii_lowercase();
        let loc = Loc {
            file: e.file.clone(),
            line: 1,
        };
        match (attr.as_str(), rdns.len()) {
            ("cn", 1) => cfg.global.extend(directives(&e)),
            ("cn", 2) if val.to_ascii_lowercase().starts_with("module") => {
                cfg.global.extend(directives(&e))
            }
            ("cn", 2) if val.eq_ignore_ascii_case("schema") => {}
            ("cn", 3) => {
                let (idx, name) = ordered(val);
                schemas.push((
                    idx,
                    Schema::Inline {
                        name: name.to_string(),
                        text: schema_text(&e),
                        loc,
                    },
                ));
            }
            ("olcdatabase", 2) => {
                let (idx, kind) = ordered(val);
                let mut db = Database::new(kind, loc);
                db.directives = directives(&e);
                dbs.push((idx, first.to_ascii_lowercase(), db));
            }
            ("olcoverlay", 3) => {
                let (idx, name) = ordered(val);
                overlays.push((
                    rdns[1].to_ascii_lowercase(),
                    idx,
                    Overlay {
                        name: name.to_ascii_lowercase(),
                        loc,
                        directives: directives(&e),
                    },
                ));
            }
            _ => {
                // Anything else (a backend entry, an unknown object) is listed as a whole.
                cfg.global.push(Directive {
                    name: format!("entry {}", e.dn),
                    args: Vec::new(),
                    loc,
                });
            }
        }
    }
    dbs.sort_by_key(|(i, _, _)| *i);
    overlays.sort_by_key(|(_, i, _)| *i);
    schemas.sort_by_key(|(i, _)| *i);
    for (db_rdn, _, o) in overlays {
        let Some((_, _, db)) = dbs.iter_mut().find(|(_, rdn, _)| *rdn == db_rdn) else {
            cfg.global.push(Directive {
                name: format!("overlay {} of an unknown database", o.name),
                args: Vec::new(),
                loc: o.loc,
            });
            continue;
        };
        db.overlays.push(o);
    }
    for (_, _, db) in dbs {
        if db.kind == "frontend" {
            cfg.frontend = db;
        } else {
            cfg.databases.push(db);
        }
    }
    cfg.schemas = schemas.into_iter().map(|(_, s)| s).collect();
    Ok(cfg)
}

/// `{3}mdb` → (3, "mdb"); without an index, after every indexed one of its kind.
fn ordered(v: &str) -> (i64, &str) {
    if let Some(rest) = v.strip_prefix('{') {
        if let Some((n, name)) = rest.split_once('}') {
            if let Ok(i) = n.parse() {
                return (i, name);
            }
        }
    }
    (i64::MAX / 2, v)
}

/// Every .ldif file under `dir` with the RDNs of its directories (innermost first), depth
/// first, sorted by name (a missing directory is empty).
fn collect(
    dir: &Path,
    parents: &[String],
    out: &mut Vec<(PathBuf, Vec<String>)>,
) -> anyhow::Result<()> {
    let rd = match std::fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", dir.display())),
    };
    let mut paths: Vec<PathBuf> = rd.filter_map(Result::ok).map(|e| e.path()).collect();
    paths.sort();
    for p in paths {
        if p.is_dir() {
            let mut inner = vec![p
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default()];
            inner.extend(parents.iter().cloned());
            collect(&p, &inner, out)?;
        } else if p.extension().is_some_and(|e| e == "ldif") {
            out.push((p, parents.to_vec()));
        }
    }
    Ok(())
}

/// The entries of one LDIF file, each value with its line.
fn read_ldif(path: &Path) -> anyhow::Result<Vec<Entry>> {
    let len = std::fs::metadata(path)
        .with_context(|| format!("cannot read {}", path.display()))?
        .len();
    if len > MAX_FILE_BYTES {
        bail!(
            "{}: {len} bytes, more than a cn=config file holds ({MAX_FILE_BYTES})",
            path.display()
        );
    }
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    parse_ldif(&path.display().to_string(), &text)
}

fn parse_ldif(file: &str, text: &str) -> anyhow::Result<Vec<Entry>> {
    // Unfold: a line starting with one space continues the one before.
    let mut lines: Vec<(usize, String)> = Vec::new();
    for (i, l) in text.lines().enumerate() {
        let l = l.trim_end_matches('\r');
        if let Some(rest) = l.strip_prefix(' ') {
            if let Some((_, last)) = lines.last_mut() {
                if !last.starts_with('#') {
                    last.push_str(rest);
                }
                continue;
            }
        }
        lines.push((i + 1, l.to_string()));
    }
    let mut entries = Vec::new();
    let mut cur: Option<Entry> = None;
    for (line, l) in lines {
        if l.starts_with('#') {
            continue;
        }
        if l.is_empty() {
            entries.extend(cur.take());
            continue;
        }
        let Some((attr, rest)) = l.split_once(':') else {
            bail!("{file}:{line}: not an LDIF line (expected 'attribute: value')");
        };
        let value = if let Some(b64) = rest.strip_prefix(':') {
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(b64.trim())
                .map_err(|e| anyhow::anyhow!("{file}:{line}: bad base64 value of {attr}: {e}"))?;
            String::from_utf8(bytes)
                .map_err(|_| anyhow::anyhow!("{file}:{line}: value of {attr} is not UTF-8"))?
        } else if rest.starts_with('<') {
            bail!("{file}:{line}: {attr}: values read from URLs are not supported here");
        } else {
            rest.trim_start().to_string()
        };
        if attr.eq_ignore_ascii_case("dn") {
            entries.extend(cur.take());
            cur = Some(Entry {
                file: file.to_string(),
                dn: value,
                parents: Vec::new(),
                values: Vec::new(),
            });
            continue;
        }
        match &mut cur {
            Some(e) => e.values.push(Value {
                attr: attr.to_string(),
                value,
                line,
            }),
            None => bail!("{file}:{line}: {attr} before any dn: line"),
        }
    }
    entries.extend(cur);
    Ok(entries)
}

/// The settings of an entry as directives.
fn directives(e: &Entry) -> Vec<Directive> {
    let mut out = Vec::new();
    for v in &e.values {
        let lower = v.attr.to_ascii_lowercase();
        if SKIP.contains(&lower.as_str()) {
            continue;
        }
        let value = strip_index(&v.value);
        let loc = Loc {
            file: e.file.clone(),
            line: v.line,
        };
        let (name, args) = match NAMES.iter().find(|(a, _, _)| *a == lower) {
            Some((_, name, true)) => (
                name.to_string(),
                super::slapd_conf::split_words(value).unwrap_or_else(|_| vec![value.to_string()]),
            ),
            Some((_, name, false)) => (name.to_string(), vec![value.to_string()]),
            None => (v.attr.clone(), vec![value.to_string()]),
        };
        out.push(Directive { name, args, loc });
    }
    out
}

/// `{2}to * by * read` → `to * by * read` (the order prefix of X-ORDERED values).
fn strip_index(v: &str) -> &str {
    if let Some(rest) = v.strip_prefix('{') {
        if let Some((n, tail)) = rest.split_once('}') {
            if !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()) {
                return tail;
            }
        }
    }
    v
}

/// A cn=schema entry's definitions as .schema text.
fn schema_text(e: &Entry) -> String {
    let mut s = String::new();
    for v in &e.values {
        let kw = match v.attr.to_ascii_lowercase().as_str() {
            "olcobjectidentifier" => "objectidentifier",
            "olcattributetypes" => "attributetype",
            "olcobjectclasses" => "objectclass",
            "olcldapsyntaxes" => "ldapsyntax",
            "olcditcontentrules" => "ditcontentrule",
            _ => continue,
        };
        s.push_str(kw);
        s.push(' ');
        s.push_str(strip_index(&v.value));
        s.push('\n');
    }
    s
}

/// The RDNs of a DN (commas escaped with a backslash stay in their RDN).
pub fn split_dn(dn: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut esc = false;
    for c in dn.chars() {
        if esc {
            cur.push(c);
            esc = false;
        } else if c == '\\' {
            cur.push(c);
            esc = true;
        } else if c == ',' {
            out.push(std::mem::take(&mut cur).trim().to_string());
        } else {
            cur.push(c);
        }
    }
    if !cur.trim().is_empty() || !out.is_empty() {
        out.push(cur.trim().to_string());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const DB: &str = "# AUTO-GENERATED FILE - DO NOT EDIT!! Use ldapmodify.\n\
# CRC32 0f2c5b2a\n\
dn: olcDatabase={1}mdb\n\
objectClass: olcDatabaseConfig\n\
olcDatabase: {1}mdb\n\
olcSuffix: dc=example,dc=com\n\
olcRootPW:: e1NTSEF9YWJj\n\
olcAccess: {0}to attrs=userPassword by self write by anonymous auth by * no\n \
ne\n\
olcDbIndex: cn,uid eq\n\
olcUnknownThing: 1\n";

    #[test]
    fn ldif_values_lines_and_names() {
        let e = parse_ldif("db.ldif", DB).unwrap();
        assert_eq!(e.len(), 1);
        let d = directives(&e[0]);
        let names: Vec<&str> = d.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(
            names,
            vec!["suffix", "rootpw", "access", "index", "olcUnknownThing"]
        );
        assert_eq!(d[1].arg(), "{SSHA}abc");
        assert_eq!(d[2].args.last().map(String::as_str), Some("none"));
        assert_eq!(d[2].args[0], "to");
        assert_eq!(d[2].loc.line, 8);
        assert_eq!(d[3].args, vec!["cn,uid", "eq"]);
    }

    #[test]
    fn tree() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::write(
            d.join("cn=config.ldif"),
            "dn: cn=config\ncn: config\nolcLogLevel: stats sync\n",
        )
        .unwrap();
        std::fs::create_dir_all(d.join("cn=config/cn=schema")).unwrap();
        std::fs::create_dir_all(d.join("cn=config/olcDatabase={1}mdb")).unwrap();
        std::fs::write(
            d.join("cn=config/cn=schema/cn={1}cosine.ldif"),
            "dn: cn={1}cosine\nolcAttributeTypes: {0}( 0.9 NAME 'x' )\n",
        )
        .unwrap();
        std::fs::write(d.join("cn=config/olcDatabase={1}mdb.ldif"), DB).unwrap();
        std::fs::write(
            d.join("cn=config/olcDatabase={-1}frontend.ldif"),
            "dn: olcDatabase={-1}frontend\nolcDatabase: {-1}frontend\nolcSizeLimit: 500\n",
        )
        .unwrap();
        std::fs::write(
            d.join("cn=config/olcDatabase={1}mdb/olcOverlay={0}memberof.ldif"),
            "dn: olcOverlay={0}memberof\nolcOverlay: {0}memberof\nolcMemberOfRefInt: TRUE\n",
        )
        .unwrap();
        let c = read(d).unwrap();
        assert_eq!(c.global[0].args, vec!["stats", "sync"]);
        assert_eq!(c.frontend.directives[0].name, "sizelimit");
        assert_eq!(c.databases.len(), 1);
        assert_eq!(c.databases[0].overlays[0].name, "memberof");
        assert_eq!(
            c.databases[0].overlays[0].directives[0].name,
            "memberof-refint"
        );
        assert!(matches!(&c.schemas[0], Schema::Inline { name, text, .. }
            if name == "cosine" && text == "attributetype ( 0.9 NAME 'x' )\n"));
        assert!(read(&d.join("cn=config")).is_err());
    }
}
