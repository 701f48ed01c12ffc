//! Entries as a search returns them: a SearchResultEntry written in one pass over the entry
//! (`proto::EntryWriter`), with the attributes the selection asks for and the requester may
//! read, and the operational attributes the server computes; and the dereference control
//! (draft-masarati-ldap-deref) an entry may carry.

use schema::{AttrId, Schema};
use store::{Entry, Version};

use crate::state::Shared;
use dit::acl::{self, Rights};
use dit::select::Selection;

/// How the entries of one search (or one control value) are encoded: what stays the same
/// from entry to entry.
#[derive(Clone, Copy)]
pub(crate) struct Encoder<'a> {
    pub shared: &'a Shared,
    pub schema: &'a Schema,
    /// The version the entries are in, for the computed operational attributes (entryDN,
    /// hasSubordinates, numSubordinates, subschemaSubentry); `None` for entries that have
    /// none: the server-held ones, and those a sync search replicates (each server computes
    /// its own).
    pub v: Option<&'a Version>,
    pub sel: &'a Selection,
    /// The message id: each entry a whole PDU. `None`: the bare SearchResultEntry (the value
    /// of a pre/post-read response control, RFC 4527).
    pub id: Option<i32>,
}

impl Encoder<'_> {
    /// Appends entry `e` to `out`, with the attributes the selection and `access` (none:
    /// everything) let through, and response controls `controls` on its PDU (Entry Change
    /// Notification, Sync State, dereference).
    pub(crate) fn entry(
        &self,
        out: &mut Vec<u8>,
        e: &Entry,
        access: Option<&acl::EntryAccess<'_>>,
        controls: &[proto::Control<'_>],
    ) {
        let (schema, sel) = (self.schema, self.sel);
        let k = &self.shared.known;
        let readable = |ty: AttrId| access.is_none_or(|a| a.can(Some(ty), Rights::READ));
        // Values dynamic groups and lists add (`dynlist`), with the stored ones of their types.
        let mut extra = match self.v {
            Some(v) if !self.shared.dynlist.is_empty() => self.dynamic(v, e, access),
            _ => Vec::new(),
        };
        let mut w = proto::EntryWriter::start(out, self.id, e.dn_bytes());
        for a in e.attrs() {
            if !sel.wants_with(schema, a.ty, a.options) || !readable(a.ty) {
                continue;
            }
            if let Some(x) = extra
                .iter_mut()
                .find(|x| x.0 == a.ty && a.options.is_empty())
            {
                x.1.splice(0..0, a.values().map(<[u8]>::to_vec));
                continue;
            }
            let name = schema.attr(a.ty).name();
            if a.options.is_empty() {
                write_selected(&mut w, sel, schema, name.as_bytes(), a.ty, a.values());
            } else {
                let name = format!("{name}{}", a.options);
                write_selected(&mut w, sel, schema, name.as_bytes(), a.ty, a.values());
            }
        }
        for (ty, values) in &mut extra {
            let mut seen = std::collections::HashSet::new();
            values
                .retain(|v| seen.insert(schema.normalize_eq(*ty, v).unwrap_or_else(|_| v.clone())));
            if !values.is_empty() {
                let name = schema.attr(*ty).name().as_bytes();
                write_selected(
                    &mut w,
                    sel,
                    schema,
                    name,
                    *ty,
                    values.iter().map(Vec::as_slice),
                );
            }
        }
        if let Some(v) = self.v {
            let wanted = |ty: AttrId| sel.wants(schema, ty) && readable(ty);
            let mut computed = |ty: AttrId, value: &[u8]| {
                let name = schema.attr(ty).name().as_bytes();
                write_selected(&mut w, sel, schema, name, ty, std::iter::once(value));
            };
            if wanted(k.entry_dn) {
                computed(k.entry_dn, e.dn_bytes());
            }
            let (has, num) = (wanted(k.has_subordinates), wanted(k.num_subordinates));
            if has || num {
                // Children the requester cannot see are not counted: the count must not reveal
                // them.
                let kids = match access {
                    Some(a) => v.children(e.id).map_or(0, |ids| {
                        ids.iter()
                            .filter_map(|id| v.get(id))
                            .filter(|c| a.sees(c))
                            .count() as u64
                    }),
                    None => v.num_children(e.id),
                };
                if has {
                    computed(
                        k.has_subordinates,
                        if kids > 0 { b"TRUE" } else { b"FALSE" },
                    );
                }
                if num {
                    computed(k.num_subordinates, kids.to_string().as_bytes());
                }
            }
            if wanted(k.subschema_subentry) {
                computed(k.subschema_subentry, b"cn=Subschema");
            }
        }
        w.finish(controls);
    }
}

impl Encoder<'_> {
    /// What dynamic groups and lists add to entry `e` as the requester (`access`) reads it:
    /// the members of a group (its member attribute), the attributes of a list's entries, and
    /// the dynamic groups of a member (its memberOf attribute, asked for by name only, as
    /// slapd 2.6). Types the selection or the access rules leave out are not computed.
    fn dynamic(
        &self,
        v: &Version,
        e: &Entry,
        access: Option<&acl::EntryAccess<'_>>,
    ) -> Vec<(AttrId, Vec<Vec<u8>>)> {
        let (schema, sel, shared) = (self.schema, self.sel, self.shared);
        let dl = &shared.dynlist;
        let readable = |ty: AttrId| access.is_none_or(|a| a.can(Some(ty), Rights::READ));
        let sees = |t: &Entry| access.is_none_or(|a| a.sees(t));
        let mut extra: Vec<(AttrId, Vec<Vec<u8>>)> = Vec::new();
        let mut add = |ty: AttrId, value: &[u8]| match extra.iter_mut().find(|x| x.0 == ty) {
            Some(x) => x.1.push(value.to_vec()),
            None => extra.push((ty, vec![value.to_vec()])),
        };
        if let Some(rule) = dl.rule(schema, e) {
            match rule.member {
                Some(m) => {
                    if sel.wants(schema, m) && readable(m) {
                        for f in dl.expand(shared, v, rule, e, &sees) {
                            add(m, f.entry.dn_bytes());
                        }
                    }
                }
                None => {
                    for f in dl.expand(shared, v, rule, e, &sees) {
                        let theirs = access.map(|a| a.other(f.entry));
                        for a in f.entry.attrs() {
                            let listed = match &f.attrs {
                                Some(list) => list.iter().any(|&t| schema.is_subtype(a.ty, t)),
                                None => !schema.attr(a.ty).is_operational(),
                            };
                            if !listed
                                || !a.options.is_empty()
                                || !sel.wants(schema, a.ty)
                                || !theirs
                                    .as_ref()
                                    .is_none_or(|t| t.can(Some(a.ty), Rights::READ))
                            {
                                continue;
                            }
                            for value in a.values() {
                                add(a.ty, value);
                            }
                        }
                    }
                }
            }
        }
        for ty in dl.member_of_types() {
            let named = sel.named.iter().any(|(n, _)| *n == ty);
            if named && readable(ty) {
                for g in dl.groups_of(shared, v, ty, e, &sees) {
                    add(ty, &g);
                }
            }
        }
        extra
    }
}

/// Writes an attribute an entry returns, with the values the selection keeps (none for
/// typesOnly); left out when matched values leave it no value.
fn write_selected<'v>(
    w: &mut proto::EntryWriter<'_>,
    sel: &Selection,
    schema: &Schema,
    name: &[u8],
    ty: AttrId,
    mut values: impl Iterator<Item = &'v [u8]>,
) {
    match (sel.values.is_some(), sel.types_only) {
        (false, false) => w.attribute(name, values),
        (false, true) => w.attribute(name, []),
        (true, false) => {
            w.attribute_if_any(name, values.filter(|v| sel.keeps(schema, ty, v)));
        }
        (true, true) => {
            if values.any(|v| sel.keeps(schema, ty, v)) {
                w.attribute(name, []);
            }
        }
    }
}

/// The dereference response control (draft-masarati-ldap-deref) of entry `e` (in version `v`),
/// as slapd's deref overlay builds it: for each spec whose attribute `e` has and the requester
/// (`view`; `access` to `e`) may read, one DerefRes per value, with the requested attributes of
/// the entry the value names that the requester may read (none when it is absent or hidden).
/// No control when no spec applies.
pub(crate) fn deref_control(
    enc: &Encoder<'_>,
    v: &Version,
    view: &acl::View,
    specs: &[crate::controls::DerefSpec],
    e: &Entry,
    access: Option<&acl::EntryAccess<'_>>,
) -> Option<proto::Control<'static>> {
    let schema = enc.schema;
    let readable = |a: Option<&acl::EntryAccess<'_>>, ty: AttrId| {
        a.is_none_or(|a| a.can(Some(ty), Rights::READ))
    };
    // Attributes of exactly this type, without options (slapd's `attr_find`).
    fn plain(e: &Entry, ty: AttrId) -> Vec<&[u8]> {
        e.attrs()
            .filter(|a| a.ty == ty && a.options.is_empty())
            .flat_map(|a| a.values())
            .collect()
    }
    let mut res = Vec::new();
    for spec in specs {
        let values = plain(e, spec.attr);
        if values.is_empty() || !readable(access, spec.attr) {
            continue;
        }
        let attr_name = schema.attr(spec.attr).name().as_bytes();
        for value in values {
            let target = enc
                .shared
                .parse_dn(value)
                .ok()
                .and_then(|(_, ndn)| v.lookup(&ndn));
            let mut attrs = Vec::new();
            if let Some(t) = target {
                let t_access = view.reader(schema, t);
                if t_access.as_ref().is_none_or(|a| a.visible()) {
                    for &ty in &spec.attrs {
                        let vals = plain(t, ty);
                        if !vals.is_empty() && readable(t_access.as_ref(), ty) {
                            attrs.push((schema.attr(ty).name().as_bytes(), vals));
                        }
                    }
                }
            }
            res.push(proto::controls::deref::DerefRes {
                attr: attr_name,
                value,
                attrs,
            });
        }
    }
    if res.is_empty() {
        return None;
    }
    let mut value = Vec::with_capacity(256);
    proto::controls::deref::encode_response(&res, &mut value);
    Some(proto::Control {
        oid: proto::oids::DEREF.as_bytes().into(),
        critical: false,
        value: Some(value.into()),
    })
}
