//! `linden restore … --subtree DN --into ldap://HOST:PORT`: the undo of an accidental subtree
//! delete without downtime (docs/backup-and-restore.md). The archive's state at the point is
//! restored into a directory (`archive::restore`) and read with the store's own recovery; the
//! subtree is then put back into the running server as ordinary LDAP writes, as the bound
//! identity, so its access control, overlays (memberOf, refint), audit log and replication
//! treat them as any change:
//!
//! - each entry of the subtree the server lacks is added, parents first, with the Relax Rules
//!   control so it keeps its entryUUID and creation stamps (values the server computes, such
//!   as memberOf, are not sent: the overlays compute them);
//! - group values (member, uniqueMember) that at the point named entries of the subtree, and
//!   that the groups lack now (refint took them away at the delete), are added back with a
//!   modify, so the restored entries get their memberOf back;
//! - entries the server has already are left as they are and reported.
//!
//! The LDAP client is `ldap3`, as `linden snapshot`'s.

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use ldap3::controls::RawControl;
use ldap3::{LdapConn, LdapConnSettings, LdapResult, Mod, Scope, SearchEntry};
use schema::{AttrId, Schema};
use store::persist::{Recovered, StoredEntry};

/// The Relax Rules control (draft-zeilenga-ldap-relax), sent critical: a server without it
/// refuses the add rather than giving the entry a new entryUUID.
const RELAX_RULES: &str = "1.3.6.1.4.1.4203.666.5.12";
/// The attributes whose values name group members.
const MEMBER_ATTRS: [&str; 2] = ["member", "uniqueMember"];
/// How long connecting to the server may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
/// How long one operation may take.
const OP_TIMEOUT: Duration = Duration::from_secs(120);

/// What to put back, where, as whom.
pub struct Undo<'a> {
    pub subtree: &'a str,
    pub into: &'a str,
    pub bind_dn: &'a str,
    pub password_file: &'a Path,
    pub dry_run: bool,
}

/// The counts of a run.
#[derive(Default)]
struct Tally {
    added: usize,
    present: usize,
    relinked: usize,
    values: usize,
    skipped: usize,
    refused: usize,
}

/// An entry of the subtree at the point, and what became of it.
struct Item {
    stored: StoredEntry,
    ndn: String,
    uuid: Option<String>,
}

/// Reads the password of `--password-file` (one line; a trailing newline is not part of it).
fn read_password(path: &Path) -> anyhow::Result<String> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("--password-file {}: cannot read it", path.display()))?;
    let pw = text
        .strip_suffix('\n')
        .map(|s| s.strip_suffix('\r').unwrap_or(s))
        .unwrap_or(&text);
    if pw.is_empty() {
        bail!(
            "--password-file {}: the file is empty (it holds the bind password, on one line)",
            path.display()
        );
    }
    Ok(pw.to_string())
}

/// `rc (name): message` of a result.
fn refusal(r: &LdapResult) -> String {
    let name = proto::ResultCode::from_u32(r.rc).map_or("unknown result code", |c| c.name());
    if r.text.is_empty() {
        format!("{name} ({})", r.rc)
    } else {
        format!("{name} ({}): {}", r.rc, r.text)
    }
}

/// The DN a member value names, from its equality form: uniqueMember values may end with an
/// optional UID (`dn#'0101'B`).
fn named_dn(norm: &str) -> &str {
    if norm.ends_with("'B") {
        if let Some(i) = norm.rfind("#'") {
            return &norm[..i];
        }
    }
    norm
}

/// Whether the normalized DN `dn` is `base` or below it.
fn within(dn: &str, base: &str) -> bool {
    dn == base || schema::norm_is_descendant(dn, base)
}

/// The attribute type of a stored attribute name (`cn;lang-en` → cn).
fn type_of(schema: &Schema, name: &str) -> Option<AttrId> {
    schema.attr_by_name(name.split(';').next().unwrap_or(name))
}

/// The attributes of `e` an add sends: what a client may write, and the server-kept ones the
/// Relax Rules control lets the administrator keep (`dit::add::RELAXABLE`); not what the
/// server computes (memberOf, entryCSN, structuralObjectClass …).
fn add_attrs(schema: &Schema, e: &StoredEntry) -> Vec<(Vec<u8>, HashSet<Vec<u8>>)> {
    let relaxable: Vec<AttrId> = dit::add::RELAXABLE
        .iter()
        .filter_map(|n| schema.attr_by_name(n))
        .collect();
    e.attrs
        .iter()
        .filter(|a| {
            type_of(schema, &a.name)
                .is_some_and(|ty| relaxable.contains(&ty) || !schema.attr(ty).no_user_modification)
        })
        .map(|a| {
            (
                a.name.as_bytes().to_vec(),
                a.values.iter().cloned().collect(),
            )
        })
        .collect()
}

fn first_text(e: &StoredEntry, schema: &Schema, ty: Option<AttrId>) -> Option<String> {
    e.attrs
        .iter()
        .find(|a| ty.is_some() && type_of(schema, &a.name) == ty)
        .and_then(|a| a.values.first())
        .map(|v| String::from_utf8_lossy(v).into_owned())
}

/// The equality form of an entryUUID (the server may spell it in another case).
fn uuid_norm(schema: &Schema, ty: Option<AttrId>, v: &str) -> String {
    ty.and_then(|t| schema.normalize_eq(t, v.as_bytes()).ok())
        .map_or_else(
            || v.to_ascii_lowercase(),
            |n| String::from_utf8_lossy(&n).into_owned(),
        )
}

fn connect(u: &Undo<'_>) -> anyhow::Result<LdapConn> {
    if !(u.into.starts_with("ldap://") || u.into.starts_with("ldaps://")) {
        bail!(
            "--into {}: not an ldap:// or ldaps:// URL (e.g. ldap://127.0.0.1:389)",
            u.into
        );
    }
    let password = read_password(u.password_file)?;
    let settings = LdapConnSettings::new().set_conn_timeout(CONNECT_TIMEOUT);
    let mut conn = LdapConn::with_settings(settings, u.into)
        .with_context(|| format!("--into {}: cannot connect", u.into))?;
    let r = conn
        .with_timeout(OP_TIMEOUT)
        .simple_bind(u.bind_dn, &password)
        .with_context(|| format!("--into {}: the bind request failed", u.into))?;
    if r.rc != 0 {
        bail!(
            "--into {}: the server refused the bind as {}: {}",
            u.into,
            u.bind_dn,
            refusal(&r)
        );
    }
    Ok(conn)
}

/// The server's entry at `dn`: its entryUUID (empty if it shows none), or `None` when it has
/// no entry there.
fn server_entry(conn: &mut LdapConn, dn: &str) -> anyhow::Result<Option<String>> {
    let ldap3::SearchResult(found, r) = conn
        .with_timeout(OP_TIMEOUT)
        .search(dn, Scope::Base, "(objectClass=*)", vec!["entryUUID"])
        .with_context(|| format!("reading {dn} from the server failed"))?;
    match r.rc {
        0 => Ok(found.into_iter().next().map(|e| {
            SearchEntry::construct(e)
                .attrs
                .into_iter()
                .find(|(k, _)| k.eq_ignore_ascii_case("entryUUID"))
                .and_then(|(_, v)| v.into_iter().next())
                .unwrap_or_default()
        })),
        32 => Ok(None),
        _ => bail!("reading {dn} from the server: {}", refusal(&r)),
    }
}

/// Puts the subtree `u.subtree` of the recovered state `rec` back into the server at
/// `u.into`, printing one line per action and a summary. Whether everything asked was done
/// (every entry of the subtree is there, every membership put back where its group exists).
pub fn put_back(rec: &Recovered, u: &Undo<'_>, started: Instant) -> anyhow::Result<bool> {
    let schema: &Arc<Schema> = &rec.schema;
    let base = schema
        .normalize_dn(u.subtree)
        .map_err(|e| anyhow::anyhow!("--subtree {}: not a DN: {e}", u.subtree))?
        .norm;
    let uuid_ty = schema.attr_by_name("entryUUID");
    let items: Vec<Item> = rec
        .entries
        .iter()
        .filter(|e| within(e.ndn_str(), &base))
        .map(|e| {
            let stored = StoredEntry::from_entry(e, schema);
            let uuid = first_text(&stored, schema, uuid_ty);
            Item {
                ndn: e.ndn_str().to_string(),
                stored,
                uuid,
            }
        })
        .collect();
    if !items.iter().any(|i| i.ndn == base) {
        bail!(
            "--subtree {}: no such entry at the point restored ({} entries there); check the DN and the point (`linden archive list`)",
            u.subtree,
            rec.entries.len()
        );
    }
    let mut conn = connect(u)?;
    let verb = |done: &'static str, would: &'static str| if u.dry_run { would } else { done };
    let mut tally = Tally::default();
    let writes = Instant::now();

    // 1. The entries, parents before children (the recovered order).
    let relax = RawControl {
        ctype: RELAX_RULES.into(),
        crit: true,
        val: None,
    };
    // Entries that are the point's entry at the server once this run is done (same
    // entryUUID): their memberships are put back. Entries that failed: their subordinates
    // are skipped.
    let mut linked: HashSet<String> = HashSet::new();
    let mut added: HashSet<String> = HashSet::new();
    let mut failed: Vec<String> = Vec::new();
    for it in &items {
        let dn = &it.stored.dn;
        if failed
            .iter()
            .any(|f| schema::norm_is_descendant(&it.ndn, f))
        {
            println!("skipped {dn}: its superior was not put back");
            tally.skipped += 1;
            failed.push(it.ndn.clone());
            continue;
        }
        match server_entry(&mut conn, dn)? {
            Some(now) => {
                tally.present += 1;
                let same = it.uuid.as_deref().is_some_and(|w| {
                    uuid_norm(schema, uuid_ty, w) == uuid_norm(schema, uuid_ty, &now)
                });
                if same {
                    linked.insert(it.ndn.clone());
                    println!("present {dn}: left as it is");
                } else {
                    println!(
                        "present {dn}: another entry now (entryUUID {now}, at the point {}): left as it is, its memberships not put back",
                        it.uuid.as_deref().unwrap_or("none")
                    );
                }
            }
            None if u.dry_run => {
                println!("would add {dn}");
                tally.added += 1;
                linked.insert(it.ndn.clone());
                added.insert(it.ndn.clone());
            }
            None => {
                let r = conn
                    .with_timeout(OP_TIMEOUT)
                    .with_controls(relax.clone())
                    .add(dn, add_attrs(schema, &it.stored))
                    .with_context(|| format!("adding {dn}: the request failed"))?;
                if r.rc == 0 {
                    println!(
                        "added {dn} (entryUUID {})",
                        it.uuid.as_deref().unwrap_or("new")
                    );
                    tally.added += 1;
                    linked.insert(it.ndn.clone());
                    added.insert(it.ndn.clone());
                } else {
                    println!("refused {dn}: {}", refusal(&r));
                    tally.refused += 1;
                    failed.push(it.ndn.clone());
                }
            }
        }
    }

    // 2. Memberships: the values that at the point named entries of the subtree now the
    //    point's, in every group this run did not add (an added group came with its members).
    let member_tys: Vec<AttrId> = MEMBER_ATTRS
        .iter()
        .filter_map(|n| schema.attr_by_name(n))
        .collect();
    for e in &rec.entries {
        if added.contains(e.ndn_str()) {
            continue;
        }
        // (attribute as stored, raw value, equality form) of the values to have.
        let mut want: Vec<(String, AttrId, Vec<u8>, Vec<u8>)> = Vec::new();
        for &ty in &member_tys {
            let Some(a) = e.attr(ty) else { continue };
            let name = schema.attr(ty).name().to_string();
            for (raw, norm) in a.values().zip(a.norm()) {
                let n = String::from_utf8_lossy(norm);
                if linked.contains(named_dn(&n)) {
                    want.push((name.clone(), ty, raw.to_vec(), norm.to_vec()));
                }
            }
        }
        if want.is_empty() {
            continue;
        }
        let gdn = e.dn();
        let mut names: Vec<&str> = want.iter().map(|w| w.0.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        let ldap3::SearchResult(found, r) = conn
            .with_timeout(OP_TIMEOUT)
            .search(gdn, Scope::Base, "(objectClass=*)", names)
            .with_context(|| format!("reading the group {gdn} from the server failed"))?;
        if r.rc == 32 {
            let vals: Vec<String> = want
                .iter()
                .map(|w| String::from_utf8_lossy(&w.2).into_owned())
                .collect();
            println!(
                "skipped group {gdn}: it no longer exists (it had {} {})",
                want[0].0,
                vals.join("; ")
            );
            tally.skipped += 1;
            continue;
        }
        if r.rc != 0 {
            println!("refused group {gdn}: {}", refusal(&r));
            tally.refused += 1;
            continue;
        }
        let mut have: HashSet<(AttrId, Vec<u8>)> = HashSet::new();
        if let Some(g) = found.into_iter().next() {
            let g = SearchEntry::construct(g);
            for (k, vs) in g.attrs {
                let Some(ty) = type_of(schema, &k) else {
                    continue;
                };
                for v in vs {
                    if let Ok(n) = schema.normalize_eq(ty, v.as_bytes()) {
                        have.insert((ty, n));
                    }
                }
            }
        }
        let mut by_attr: HashMap<String, HashSet<Vec<u8>>> = HashMap::new();
        for (name, ty, raw, norm) in want {
            if !have.contains(&(ty, norm)) {
                by_attr.entry(name).or_default().insert(raw);
            }
        }
        if by_attr.is_empty() {
            continue;
        }
        let mut what: Vec<String> = by_attr
            .iter()
            .map(|(k, vs)| {
                let mut v: Vec<String> = vs
                    .iter()
                    .map(|v| String::from_utf8_lossy(v).into_owned())
                    .collect();
                v.sort();
                format!("{k} += {}", v.join("; "))
            })
            .collect();
        what.sort();
        let n: usize = by_attr.values().map(HashSet::len).sum();
        if u.dry_run {
            println!("would re-link {gdn}: {}", what.join(", "));
        } else {
            let mods: Vec<Mod<Vec<u8>>> = by_attr
                .into_iter()
                .map(|(k, vs)| Mod::Add(k.into_bytes(), vs))
                .collect();
            let r = conn
                .with_timeout(OP_TIMEOUT)
                .modify(gdn, mods)
                .with_context(|| format!("modifying the group {gdn}: the request failed"))?;
            if r.rc != 0 {
                println!("refused group {gdn}: {}", refusal(&r));
                tally.refused += 1;
                continue;
            }
            println!("re-linked {gdn}: {}", what.join(", "));
        }
        tally.relinked += 1;
        tally.values += n;
    }
    let _ = conn.unbind();
    // A group that no longer exists is reported, not a failure: there is nothing to put the
    // values into.
    let all_done = tally.refused == 0 && failed.is_empty();
    println!(
        "{}{} {} entries, {} present, {} {} groups ({} values), {} skipped, {} refused; took {:.3} s ({:.3} s talking to the server)",
        if u.dry_run { "dry run, nothing written: " } else { "" },
        verb("added", "would add"),
        tally.added,
        tally.present,
        verb("re-linked", "would re-link"),
        tally.relinked,
        tally.values,
        tally.skipped,
        tally.refused,
        started.elapsed().as_secs_f64(),
        writes.elapsed().as_secs_f64()
    );
    Ok(all_done)
}
