//! Replicated changes, applied in the writer's job (design.md seam 2), with no sockets: what a
//! provider sent becomes a change of the local tree that keeps the provider's entryUUID,
//! entryCSN, creatorsName, createTimestamp, modifiersName and modifyTimestamp.
//!
//! - An entry (Sync State add or modify) is found by its entryUUID: absent, it is added (or,
//!   when an entry already has its DN, that entry is replaced and takes the provider's
//!   entryUUID); present under another DN, it is renamed (moved under its new parent) and its
//!   attributes replaced. An entry whose entryCSN is not newer than the local one's is left
//!   alone, so a change seen twice (a refresh after a restart) or an older change arriving
//!   after a newer one (several providers) changes nothing.
//! - The schema applies (types, syntaxes, object classes) but access control does not: the
//!   consumer writes as the server itself, as slapd's syncrepl writes as the database's rootdn.
//! - A delete names an entryUUID; the end of a present phase deletes every entry of the
//!   replicated area the provider did not mention (`delete_absent`). Multi-provider: not an
//!   entry holding a change the provider had not seen (`unseen_by_provider`).
//! - Multi-provider: an entry deleted here is not added back by a copy of a change its delete
//!   had seen (`deleted_after`, from the tombstone the delete left).
//! - The cookie is kept as the contextCSN values of the suffix entry (`store_cookie`), in the
//!   same writer job as the change it came with; multi-provider, the deletes of changes it
//!   now covers are asserted again (`reassert_covered_deletes`).
//!
//! Every function here runs on a `Txn` and returns what it applied (`Applied`); the caller runs
//! them inside the write path's door as replicated changes (`dit::write::write_job_as` with
//! `Origin::Replicated`; `delete_absent` passes each delete through it itself), so the overlay
//! chain and the change feed see replicated changes like any other, and the CSN clock moves to
//! at least every CSN applied or kept here (`store_cookie` moves it for the cookie's).

use std::collections::HashSet;

use dit::error::{LdapError, LdapResult};
use dit::overlays::Applied;
use dit::Dit;
use proto::ResultCode;
use schema::{AttrId, NormDn, Schema};
use store::{Attr, Entry, Scope, Txn, Version};

use super::spec::ConsumerSpec;
use proto::controls::sync::SyncCookie as Cookie;

/// Types a provider returns that are computed, never stored: dropped from incoming entries.
/// contextCSN is the replication state of the server holding it, kept by each server itself.
const NOT_STORED: [&str; 5] = [
    "entryDN",
    "hasSubordinates",
    "numSubordinates",
    "subschemaSubentry",
    "contextCSN",
];

/// The part of the local tree a consumer replicates, resolved against the schema once.
pub struct Area {
    /// The naming context holding the base: its entry keeps the cookie.
    pub suffix: NormDn,
    pub base: NormDn,
    pub scope: Scope,
    pub filter: store::Filter,
    /// Which local attributes an incoming entry replaces: all user attributes (`*`), all
    /// operational ones (`+`), and the types named.
    all_user: bool,
    all_operational: bool,
    named: Vec<AttrId>,
    context_csn: AttrId,
    not_stored: Vec<AttrId>,
    /// Multi-provider: conflicts are resolved by CSN (`ConsumerSpec::multi_provider`).
    pub multi: bool,
}

impl Area {
    /// The area `spec` replicates on `dit`: its base must be within one of the suffixes.
    pub fn new(dit: &Dit, spec: &ConsumerSpec) -> Result<Area, String> {
        let schema = &*dit.schema();
        let (_, base) = dit
            .parse_dn(spec.search_base.as_bytes())
            .map_err(|e| format!("search_base '{}': {}", spec.search_base, e.message))?;
        let suffix = dit
            .suffix_of(&base.norm)
            .ok_or_else(|| {
                format!(
                    "search_base '{}' is not within a suffix of this server",
                    spec.search_base
                )
            })?
            .clone();
        let wire = proto::Filter::parse(&spec.filter)
            .map_err(|e| format!("filter '{}': {e}", spec.filter))?;
        let filter = dit::filter::compile(schema, &mut |_| true, &wire);
        let scope = match spec.scope {
            proto::Scope::Base => Scope::Base,
            proto::Scope::One => Scope::One,
            proto::Scope::Subtree => Scope::Subtree,
        };
        let (mut all_user, mut all_operational, mut named) = (false, false, Vec::new());
        for a in &spec.attrs {
            match a.as_str() {
                "*" => all_user = true,
                "+" => all_operational = true,
                n => named.push(
                    schema
                        .attr_by_name(n)
                        .ok_or_else(|| format!("attrs: unknown attribute type '{n}'"))?,
                ),
            }
        }
        let context_csn = schema
            .attr_by_name("contextCSN")
            .ok_or("the schema lacks contextCSN")?;
        let not_stored = NOT_STORED
            .iter()
            .filter_map(|n| schema.attr_by_name(n))
            .collect();
        Ok(Area {
            suffix,
            base,
            scope,
            filter,
            all_user,
            all_operational,
            named,
            context_csn,
            not_stored,
            multi: spec.multi_provider,
        })
    }

    /// Whether the provider's entries carry attributes of type `ty` (so a local attribute of
    /// that type missing from an incoming entry was removed at the provider).
    fn replicates(&self, schema: &Schema, ty: AttrId) -> bool {
        if ty == self.context_csn || self.not_stored.contains(&ty) {
            return false;
        }
        if schema.attr(ty).is_operational() {
            self.all_operational || self.named.contains(&ty)
        } else {
            self.all_user || self.named.contains(&ty)
        }
    }

    /// Whether entry `e` is within the replicated search (scope and filter).
    pub fn contains(&self, schema: &Schema, e: &Entry) -> bool {
        let n = e.ndn_str();
        let in_scope = match self.scope {
            Scope::Base => n == self.base.norm,
            Scope::One => schema::norm_parent(n) == Some(self.base.norm.as_str()),
            Scope::Subtree => n == self.base.norm || schema::norm_is_descendant(n, &self.base.norm),
        };
        in_scope && self.filter.eval(schema, e) == store::Tri::True
    }
}

/// An entry as a provider sent it (SearchResultEntry with a Sync State control).
#[derive(Debug, Clone)]
pub struct Incoming {
    pub dn: String,
    /// The entryUUID of the Sync State control, in its text form.
    pub uuid: String,
    pub attrs: Vec<(String, Vec<Vec<u8>>)>,
}

impl Incoming {
    /// How long ago the provider stamped this entry's change (its entryCSN), if it says; zero
    /// for a CSN from a clock ahead of this one.
    pub fn age(&self) -> Option<std::time::Duration> {
        let (_, values) = self
            .attrs
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case("entryCSN"))?;
        let csn = std::str::from_utf8(values.first()?).ok()?;
        let stamped = dit::monitor::csn_unix_secs(csn)?;
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .ok()?
            .as_secs_f64();
        Some(std::time::Duration::from_secs_f64((now - stamped).max(0.0)))
    }
}

/// What `apply_entry` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Added,
    /// An existing entry (same entryUUID, or same DN) got the provider's attributes.
    Replaced,
    /// Renamed or moved, and its attributes replaced.
    Renamed,
    /// The local entry is as new as this one (or newer): nothing changed.
    Unchanged,
    /// Its parent is not here (yet): the caller tries again after later entries.
    MissingParent,
}

/// The text form of an entryUUID from the 16 bytes of a Sync State control.
pub fn uuid_text(raw: &[u8]) -> Option<String> {
    uuid::Uuid::from_slice(raw)
        .ok()
        .map(|u| u.hyphenated().to_string())
}

/// The equality form of an entryUUID in text form.
pub fn uuid_norm(dit: &Dit, text: &str) -> Option<Box<[u8]>> {
    dit.schema()
        .normalize_eq(dit.known.entry_uuid, text.as_bytes())
        .ok()
        .map(Vec::into_boxed_slice)
}

pub use dit::add::find_by_uuid;

/// Whether the entry with entryUUID `norm` (equality form) was deleted here after its change
/// `csn` had been seen: its tombstone (`store::tombstone`) records an entryCSN at or after
/// `csn`. An incoming entry without entryCSN is as old as can be.
pub fn deleted_after(v: &Version, norm: &[u8], csn: Option<&[u8]>) -> bool {
    let Ok(key) = std::str::from_utf8(norm) else {
        return false;
    };
    v.tombstones()
        .get(key)
        .is_some_and(|t| csn.is_none_or(|c| c <= t.seen.as_bytes()))
}

fn csn_of(dit: &Dit, e: &Entry) -> Option<Vec<u8>> {
    e.attr(dit.known.entry_csn)
        .and_then(|a| a.first().map(<[u8]>::to_vec))
}

fn invalid(name: &str, why: impl std::fmt::Display) -> LdapError {
    LdapError::new(ResultCode::InvalidAttributeSyntax, format!("{name}: {why}"))
}

/// The attributes of an incoming entry, checked against the schema: every type known, every
/// value valid for its syntax, repeated values once; computed types dropped; the entryUUID of
/// the control. Server-kept types are kept as the provider sent them.
fn incoming_attrs(dit: &Dit, area: &Area, inc: &Incoming) -> LdapResult<Vec<Attr>> {
    let schema = &*dit.schema();
    let mut out: Vec<Attr> = Vec::with_capacity(inc.attrs.len() + 1);
    for (desc, values) in &inc.attrs {
        let (ty, options) = dit::resolve_attr(schema, desc.as_bytes())?;
        if area.not_stored.contains(&ty) || ty == area.context_csn || ty == dit.known.entry_uuid {
            continue;
        }
        let name = schema.attr(ty).name();
        let at = match out
            .iter()
            .position(|a| a.ty == ty && *a.options == *options)
        {
            Some(i) => i,
            None => {
                out.push(Attr {
                    ty,
                    options: options.as_str().into(),
                    values: Vec::new(),
                    norm: Vec::new(),
                });
                out.len() - 1
            }
        };
        for v in values {
            schema
                .validate(ty, v)
                .map_err(|_| invalid(name, "value invalid per syntax"))?;
            let n = schema.normalize_eq(ty, v).map_err(|e| invalid(name, e))?;
            let a = &mut out[at];
            if a.find(&n).is_none() {
                a.values.push(v.clone().into_boxed_slice());
                a.norm.push(n.into_boxed_slice());
            }
        }
    }
    out.retain(|a| !a.values.is_empty());
    let uuid = Attr::new(
        schema,
        dit.known.entry_uuid,
        "",
        vec![inc.uuid.as_bytes().into()],
    )
    .map_err(|e| invalid("entryUUID", e))?;
    out.push(uuid);
    Ok(out)
}

/// Checks a replicated entry as any entry is checked (object classes, required and allowed
/// types, RDN values) and gives it structuralObjectClass and entryCSN when the provider did
/// not send them.
fn check_and_complete(dit: &Dit, txn: &Txn, ndn: &NormDn, attrs: &mut Vec<Attr>) -> LdapResult<()> {
    let structural = dit::write::check_entry(dit, attrs)?;
    dit::write::rdn_values_present(dit, ndn, attrs)?;
    let schema = &*dit.schema();
    let k = &dit.known;
    if !attrs.iter().any(|a| a.ty == k.structural_object_class) {
        dit::write::set_operational(
            schema,
            attrs,
            k.structural_object_class,
            structural.as_bytes(),
        );
    }
    if !attrs.iter().any(|a| a.ty == k.entry_csn) {
        let csn = dit.csn.next(txn.now());
        dit::write::set_operational(schema, attrs, k.entry_csn, csn.as_bytes());
    }
    Ok(())
}

/// Applies one entry the provider sent (Sync State add or modify): see the module
/// documentation. Returns what it did and, unless nothing changed, what it applied.
pub fn apply_entry(
    dit: &Dit,
    txn: &mut Txn,
    area: &Area,
    inc: &Incoming,
) -> LdapResult<(Outcome, Option<Applied>)> {
    let schema::NewDn { text, rdn_len, ndn } = dit.parse_new_dn(inc.dn.as_bytes())?;
    if ndn.rdns.is_empty() {
        return Err(LdapError::new(
            ResultCode::UnwillingToPerform,
            "a provider cannot replicate the root DSE",
        ));
    }
    let norm = uuid_norm(dit, &inc.uuid)
        .ok_or_else(|| invalid("entryUUID", format!("'{}' is not a UUID", inc.uuid)))?;
    let mut attrs = incoming_attrs(dit, area, inc)?;
    let incoming_csn = attrs
        .iter()
        .find(|a| a.ty == dit.known.entry_csn)
        .and_then(|a| a.values.first().map(|v| v.to_vec()));
    let v = txn.version();
    let by_uuid = find_by_uuid(dit, v, &norm).cloned();
    let at_dn = v.lookup(&ndn).cloned();
    if let (Some(local), Some(csn)) = (&by_uuid, &incoming_csn) {
        if csn_of(dit, local).is_some_and(|l| l >= *csn) {
            return Ok((Outcome::Unchanged, None));
        }
    }
    // Multi-provider: deleted here after this change (or a newer one) was seen here — an echo
    // of a change this server sent, or a peer that has not applied the delete yet. Refused:
    // an acknowledged delete stays deleted. A change the delete had not seen wins (below).
    if area.multi && by_uuid.is_none() && deleted_after(v, &norm, incoming_csn.as_deref()) {
        return Ok((Outcome::Unchanged, None));
    }
    // Multi-provider: two servers added the same DN (two entryUUIDs): the later entryCSN
    // keeps the DN on both, whichever arrives first.
    if area.multi && by_uuid.is_none() {
        if let (Some(other), Some(csn)) = (&at_dn, &incoming_csn) {
            if csn_of(dit, other).is_some_and(|l| l >= *csn) {
                return Ok((Outcome::Unchanged, None));
            }
        }
    }
    // Where the entry goes: its parent (unless it is a naming context).
    let root = dit.is_suffix(&ndn.norm);
    if !root && dit.suffix_of(&ndn.norm).is_none() {
        return Err(LdapError::new(
            ResultCode::UnwillingToPerform,
            format!("'{}' is not within a suffix of this server", inc.dn),
        ));
    }
    let parent = if root {
        None
    } else {
        match schema::norm_parent(&ndn.norm).and_then(|p| v.lookup_norm(p)) {
            Some(p) => Some(p.clone()),
            None => return Ok((Outcome::MissingParent, None)),
        }
    };
    let dn = match &parent {
        Some(p) => format!("{},{}", &text[..rdn_len], p.dn()),
        None => text,
    };
    check_and_complete(dit, txn, &ndn, &mut attrs)?;
    let existing = match (&by_uuid, &at_dn) {
        (Some(l), Some(other)) if l.id != other.id => {
            return Err(LdapError::new(
                ResultCode::EntryAlreadyExists,
                format!(
                    "'{}' (entryUUID {}) cannot be moved there: another entry has that DN",
                    inc.dn, inc.uuid
                ),
            ));
        }
        (Some(l), _) => Some(l.clone()),
        (None, Some(other)) => Some(other.clone()),
        (None, None) => None,
    };
    let Some(local) = existing else {
        let id = txn.add(dn, ndn, attrs, root)?;
        return Ok((
            Outcome::Added,
            Some(Applied {
                before: None,
                after: txn.version().get(id).cloned(),
                ..Default::default()
            }),
        ));
    };
    // What the provider does not send stays: types outside the replicated attributes, and
    // the local replication state.
    let schema = &*dit.schema();
    for a in local.attrs() {
        if !area.replicates(schema, a.ty) && !attrs.iter().any(|b| b.ty == a.ty) {
            attrs.push(a.to_attr());
        }
    }
    let outcome = if local.ndn_str() == ndn.norm {
        txn.replace_attrs(local.id, attrs)?;
        Outcome::Replaced
    } else {
        if dit.is_suffix(local.ndn_str()) || root {
            return Err(LdapError::new(
                ResultCode::UnwillingToPerform,
                "cannot rename a naming context",
            ));
        }
        let parent_id = parent.as_ref().map(|p| p.id);
        if parent
            .as_ref()
            .is_some_and(|p| schema::norm_is_descendant(p.ndn_str(), local.ndn_str()))
        {
            return Err(LdapError::new(
                ResultCode::UnwillingToPerform,
                "newSuperior is a subordinate of the entry",
            ));
        }
        txn.rename(local.id, dn, ndn, parent_id, attrs)?;
        Outcome::Renamed
    };
    Ok((
        outcome,
        Some(Applied {
            after: txn.version().get(local.id).cloned(),
            before: Some(local),
            ..Default::default()
        }),
    ))
}

/// Whether entry `e` holds a change the provider had not seen when it said what it holds:
/// its entryCSN is newer than the provider's CSN for the same server id in `heard` (the
/// cookies this session received from it). Multi-provider only: such an entry is not deleted
/// because the provider deleted it or lacks it — the provider will get the change and add the
/// entry back (a change concurrent with a delete wins; a delete after it was seen wins).
pub fn unseen_by_provider(dit: &Dit, area: &Area, heard: &[String], e: &Entry) -> bool {
    if !area.multi {
        return false;
    }
    let Some(csn) = csn_of(dit, e) else {
        return false;
    };
    let csn = String::from_utf8_lossy(&csn);
    let Some(sid) = proto::controls::sync::csn_sid(&csn) else {
        return false;
    };
    match heard
        .iter()
        .find(|c| proto::controls::sync::csn_sid(c) == Some(sid))
    {
        Some(c) => *csn > **c,
        None => true,
    }
}

/// Deletes the entry with this entryUUID (text form), if there is one. It must be a leaf: a
/// provider deletes the subordinates first. Multi-provider: an entry holding a change the
/// provider had not seen (`unseen_by_provider`, against `heard`) is kept.
pub fn apply_delete(
    dit: &Dit,
    txn: &mut Txn,
    area: &Area,
    heard: &[String],
    uuid: &str,
) -> LdapResult<Option<Applied>> {
    let Some(norm) = uuid_norm(dit, uuid) else {
        return Ok(None);
    };
    let Some(e) = find_by_uuid(dit, txn.version(), &norm) else {
        return Ok(None);
    };
    if unseen_by_provider(dit, area, heard, e) {
        tracing::info!(
            "replication: '{}' deleted at the provider before it saw the newer change here; kept",
            e.dn()
        );
        return Ok(None);
    }
    let id = e.id;
    let before = txn.delete(id)?;
    Ok(Some(Applied {
        before: Some(before),
        after: None,
        ..Default::default()
    }))
}

/// The end of a present phase: deletes every entry of the area whose entryUUID (equality
/// form) is not in `present`, deepest first, each run through the overlay chain. An entry
/// that still has subordinates the provider did mention is kept (and reported in the log).
/// Multi-provider: so is an entry holding a change the provider had not seen
/// (`unseen_by_provider`, against the provider's cookie `heard`): it was written here (or
/// came from another provider) and is on its way to the provider, not deleted there.
pub fn delete_absent(
    dit: &Dit,
    txn: &mut Txn,
    area: &Area,
    heard: &[String],
    present: &HashSet<Box<[u8]>>,
) -> LdapResult<Vec<Applied>> {
    let v = txn.version();
    let schema = v.schema().clone();
    let ty = dit.known.entry_uuid;
    let mut gone: Vec<(usize, store::EntryId)> = Vec::new();
    if let Some(base) = v.lookup(&area.base) {
        let _ = v.walk(base, &mut |e| {
            if area.contains(&schema, e) {
                let known = e
                    .attr(ty)
                    .and_then(|a| a.norm().next())
                    .is_some_and(|n| present.contains(n));
                if !known && !unseen_by_provider(dit, area, heard, e) {
                    gone.push((e.depth(), e.id));
                }
            }
            std::ops::ControlFlow::Continue(())
        });
    }
    gone.sort_by_key(|g| std::cmp::Reverse(g.0));
    let mut applied = Vec::with_capacity(gone.len());
    for (_, id) in gone {
        if txn.version().num_children(id) > 0 {
            if let Some(e) = txn.version().get(id) {
                tracing::warn!(
                    "replication: '{}' is gone at the provider but has subordinates here; kept",
                    e.dn()
                );
            }
            continue;
        }
        let a = dit::write::write_job_as(dit, txn, dit::overlays::Origin::Replicated, |txn| {
            Ok(Some(Applied {
                before: Some(txn.delete(id)?),
                after: None,
                ..Default::default()
            }))
        })?;
        applied.extend(a);
    }
    Ok(applied)
}

/// Multi-provider: the deletes made here of changes this server held before its contextCSN
/// covered them, which the cookie now stored covers (`before` → `after`, per server id).
/// Their tombstones are put again with a fresh CSN of this server (returned, to raise the
/// contextCSN with), so that the providers that consume from here are sent the delete again,
/// now with a cookie that says the change was seen.
///
/// Why: a consumer applies a delete only if the deleting server's cookie shows it had seen
/// the entry's latest change (a change the delete had not seen wins, `unseen_by_provider`).
/// contextCSN only covers what a provider's cookie vouches for, so a change applied in the
/// middle of a refresh (or of a provider's batch) is held here a little before it is covered;
/// a client that deleted it then made a delete whose cookie did not show it, and the peer
/// kept its copy. Sending the delete once more when the cookie covers it settles that, the
/// same way on every server, with no timing involved.
fn reassert_covered_deletes(
    dit: &Dit,
    txn: &mut Txn,
    before: &[String],
    after: &[String],
) -> Vec<String> {
    use proto::controls::sync::csn_sid;
    let mut again: Vec<store::Tombstone> = Vec::new();
    for new in after {
        let sid = csn_sid(new);
        let old = before
            .iter()
            .find(|c| csn_sid(c) == sid)
            .map_or("", String::as_str);
        if old >= new.as_str() {
            continue;
        }
        for t in txn.version().tombstones().seen_between(old, new) {
            if csn_sid(&t.seen) == sid {
                again.push((**t).clone());
            }
        }
    }
    let mut fresh = Vec::with_capacity(again.len());
    for mut t in again {
        let csn = dit.csn.next(txn.now());
        tracing::info!(
            "replication: the delete of '{}' covers a change this server now holds: sent again",
            t.dn
        );
        t.csn = csn.as_str().into();
        txn.put_tombstone(t);
        fresh.push(csn);
    }
    fresh
}

/// The cookie kept on the suffix entry: its contextCSN values.
pub fn stored_cookie(dit: &Dit, v: &Version, area: &Area) -> Cookie {
    let mut c = Cookie::default();
    if let Some(e) = v.lookup(&area.suffix) {
        if let Some(a) = e.attr(area.context_csn) {
            for csn in a.values() {
                c.csns.push(String::from_utf8_lossy(csn).into_owned());
            }
            c.normalize();
        }
    }
    let _ = dit;
    c
}

/// Merges `cookie`'s CSNs into the contextCSN values of the suffix entry. Not a change of
/// the directory's content: no stamps, no overlays. Without a suffix entry the cookie cannot
/// be kept (a warning; the next start refreshes in full).
pub fn store_cookie(dit: &Dit, txn: &mut Txn, area: &Area, cookie: &Cookie) -> LdapResult<()> {
    if cookie.csns.is_empty() {
        return Ok(());
    }
    let Some(e) = txn.version().lookup(&area.suffix).cloned() else {
        tracing::warn!(
            "replication: no suffix entry '{}' to keep the cookie on",
            area.suffix.norm
        );
        return Ok(());
    };
    // The cookie's CSNs are stored here: every CSN issued from now on must sort after them.
    let now = std::time::SystemTime::now();
    for c in &cookie.csns {
        dit.csn.follow(c, now);
    }
    let mut kept = stored_cookie(dit, txn.version(), area);
    let before = kept.csns.clone();
    kept.csns.extend(cookie.csns.iter().cloned());
    kept.normalize();
    if kept.csns == before {
        return Ok(());
    }
    if area.multi {
        let again = reassert_covered_deletes(dit, txn, &before, &kept.csns);
        if !again.is_empty() {
            kept.csns.extend(again);
            kept.normalize();
        }
    }
    let schema = &*dit.schema();
    let mut attrs = e.to_attrs();
    attrs.retain(|a| a.ty != area.context_csn);
    let values = kept.csns.iter().map(|c| c.as_bytes().into()).collect();
    let a =
        Attr::new(schema, area.context_csn, "", values).map_err(|e| invalid("contextCSN", e))?;
    attrs.push(a);
    txn.replace_attrs(e.id, attrs)?;
    Ok(())
}
