//! Adding an entry (RFC 4511 §4.7), without the protocol: `build` turns a DN and attribute
//! list into a schema-checked entry (used by the add operation, start-up entries and bulk
//! import); `apply` runs in the writer's job, checks what depends on the data (parent,
//! existence) and stamps the server-kept attributes.

use std::borrow::{Borrow, Cow};
use std::collections::HashMap;
use std::sync::Arc;

use proto::ResultCode;
use schema::{AttrId, NormDn};
use store::{Attr, EntryId, Txn};

use crate::error::{LdapError, LdapResult};
use crate::overlays::Applied;
use crate::values::ValueSet;
use crate::write::{
    authorize_new, check_attribute_count, check_entry, check_user_modifiable, detached,
    generalized_time, hash_passwords, join_rdn_value, push_checked, set_operational, write_job,
    Assertion,
};
use crate::{resolve_attr, Dit, Identity};

/// One attribute of an add request: description and values.
pub type InputAttr<'a> = (Cow<'a, [u8]>, Vec<Cow<'a, [u8]>>);

/// Groups `(description, value)` pairs (LDIF order) into attributes, joining repeated
/// descriptions case-insensitively. The attributes borrow the pairs' bytes.
pub fn group_values<N: AsRef<[u8]>, V: AsRef<[u8]>>(pairs: &[(N, V)]) -> Vec<InputAttr<'_>> {
    let mut out: Vec<InputAttr<'_>> = Vec::with_capacity(pairs.len());
    for (name, value) in pairs {
        let (name, value) = (name.as_ref(), value.as_ref());
        // Repeats are nearly always the previous description (objectClass lines together).
        match out
            .iter_mut()
            .rev()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
        {
            Some((_, vs)) => vs.push(Cow::Borrowed(value)),
            None => out.push((Cow::Borrowed(name), vec![Cow::Borrowed(value)])),
        }
    }
    out
}

/// A new entry, checked against the schema, not yet placed in the tree.
pub struct NewEntry {
    /// The DN in RFC 4514 form, whose first `rdn_len` bytes are its first RDN.
    pub dn: String,
    pub rdn_len: usize,
    pub ndn: NormDn,
    pub attrs: Vec<Attr>,
}

/// Builds the entry of an add request. `trusted` (import of server-written data) keeps
/// server-kept attributes the input carries instead of refusing them. Clear-text passwords are
/// hashed here, on the calling thread (the add operation calls it on the hashing threads when
/// there are any).
pub fn build(
    shared: &Dit,
    dn: &[u8],
    input: &[InputAttr<'_>],
    trusted: bool,
) -> LdapResult<NewEntry> {
    let trust = if trusted { Trust::Import } else { Trust::None };
    build_with(shared, dn, input, trust)
}

/// Which server-kept attributes an add may carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trust {
    /// None: a client's add.
    None,
    /// The Relax Rules control (draft-zeilenga-ldap-relax): the `RELAXABLE` ones, for the
    /// administrator (`admin`; anyone else is refused with insufficientAccessRights when the
    /// add carries one).
    Relax { admin: bool },
    /// All of them: an import of server-written data.
    Import,
}

/// The server-kept attributes the Relax Rules control lets the administrator set on an add,
/// as slapd does: what an entry put back from a backup must keep to be the same entry. Not
/// entryCSN (the change is stamped by the server that makes it, so consumers order it).
pub const RELAXABLE: [&str; 5] = [
    "entryUUID",
    "createTimestamp",
    "creatorsName",
    "modifyTimestamp",
    "modifiersName",
];

/// Whether `ty` is one of `RELAXABLE`.
pub fn is_relaxable(shared: &Dit, ty: AttrId) -> bool {
    let k = &shared.known;
    [
        k.entry_uuid,
        k.create_timestamp,
        k.creators_name,
        k.modify_timestamp,
        k.modifiers_name,
    ]
    .contains(&ty)
}

/// `build`, with the server-kept attributes `trust` allows.
pub fn build_with(
    shared: &Dit,
    dn: &[u8],
    input: &[InputAttr<'_>],
    trust: Trust,
) -> LdapResult<NewEntry> {
    let trusted = trust == Trust::Import;
    let schema = &*shared.schema();
    let schema::NewDn {
        text: dn,
        rdn_len,
        ndn,
    } = shared.parse_new_dn(dn)?;
    if ndn.rdns.is_empty() {
        return Err(root_exists());
    }
    if !trusted {
        check_attribute_count(shared, "attributes", input.len())?;
    }
    // Values of one type listed more than once join (and must still be distinct): the sets
    // are found by (type, options) through a map, so repeats cost no scan of earlier ones.
    let mut sets: Vec<(AttrId, String, ValueSet)> = Vec::with_capacity(input.len());
    let mut at: HashMap<(AttrId, String), usize> = HashMap::with_capacity(input.len());
    for (desc, values) in input {
        let (ty, options) = resolve_attr(schema, desc)?;
        let name = schema.attr(ty).name();
        match trust {
            Trust::Import => {}
            Trust::Relax { admin } if is_relaxable(shared, ty) => {
                if !admin {
                    return Err(LdapError::new(
                        ResultCode::InsufficientAccessRights,
                        format!("{name}: the Relax Rules control lets only an identity with manage access (the administrator) set it"),
                    ));
                }
            }
            _ => check_user_modifiable(schema, ty, name)?,
        }
        if values.is_empty() {
            return Err(LdapError::new(
                ResultCode::ProtocolError,
                format!("{name}: no values for attribute type"),
            ));
        }
        let i = *at.entry((ty, options)).or_insert_with_key(|(ty, options)| {
            sets.push((*ty, options.clone(), ValueSet::default()));
            sets.len() - 1
        });
        push_checked(shared, &mut sets[i].2, ty, name, values, "")?;
    }
    let mut attrs: Vec<Attr> = Vec::with_capacity(sets.len() + 6);
    for (ty, options, set) in sets {
        let (mut vals, norm) = set.into_parts();
        let a = if ty == shared.known.user_password {
            // Hashing changes the values: normalize what is stored.
            hash_passwords(&shared.password_policy(), &mut vals);
            Attr::new(schema, ty, &options, vals)
                .map_err(|e| LdapError::new(ResultCode::InvalidAttributeSyntax, e.to_string()))?
        } else {
            Attr {
                ty,
                options: options.as_str().into(),
                values: vals,
                norm,
            }
        };
        attrs.push(a);
    }
    // RFC 4511 §4.7: RDN values the client left out join the entry.
    if let Some(rdn) = ndn.rdns.first() {
        for (ty, raw) in rdn {
            join_rdn_value(schema, &mut attrs, *ty, raw)?;
        }
    }
    let structural = check_entry(shared, &attrs)?;
    if !attrs
        .iter()
        .any(|a| a.ty == shared.known.structural_object_class)
    {
        set_operational(
            schema,
            &mut attrs,
            shared.known.structural_object_class,
            structural.as_bytes(),
        );
    }
    Ok(NewEntry {
        dn,
        rdn_len,
        ndn,
        attrs,
    })
}

/// What placing a new entry needs to know of the tree it joins: the running store's version
/// (`apply`) or the DN table of a bulk import (bulk import).
pub trait Tree {
    /// The id and stored DN of the entry with this normalized DN (`NormDn::norm`).
    fn find(&self, ndn: &str) -> Option<(EntryId, &str)>;
    /// The answer when the parent of the normalized DN `norm` does not exist (noSuchObject,
    /// with matchedDN where the tree knows it).
    fn missing_parent(&self, shared: &Dit, norm: &str) -> LdapError;
}

impl Tree for store::Version {
    fn find(&self, ndn: &str) -> Option<(EntryId, &str)> {
        self.lookup_norm(ndn).map(|e| (e.id, e.dn()))
    }

    fn missing_parent(&self, shared: &Dit, norm: &str) -> LdapError {
        shared.no_such_object_norm(self, norm)
    }
}

/// Where a new entry goes in the tree.
pub enum Site<'t> {
    /// It is a naming context.
    Root,
    /// Under this parent, whose stored DN is given.
    Under(EntryId, &'t str),
}

/// Checks where a new entry goes (`norm`: its normalized DN): it must not exist, and its parent
/// must, unless it is a naming context.
pub fn locate<'t>(shared: &Dit, tree: &'t impl Tree, norm: &str) -> LdapResult<Site<'t>> {
    if tree.find(norm).is_some() {
        return Err(LdapError::new(
            ResultCode::EntryAlreadyExists,
            "entry already exists",
        ));
    }
    if shared.is_suffix(norm) {
        return Ok(Site::Root);
    }
    if shared.suffix_of(norm).is_none() {
        let served: Vec<&str> = shared.suffixes.iter().map(|s| s.norm.as_str()).collect();
        return Err(LdapError::new(
            ResultCode::UnwillingToPerform,
            format!(
                "no global superior knowledge: the entry is under none of the naming contexts served ({})",
                served.join("; ")
            ),
        ));
    }
    match schema::norm_parent(norm).and_then(|p| tree.find(p)) {
        Some((pid, pdn)) => Ok(Site::Under(pid, pdn)),
        None => Err(tree.missing_parent(shared, norm)),
    }
}

/// The DN an entry is stored under: as the client spelled its RDN (`rdn`), under the parent's
/// stored DN, so a subtree rename can swap the suffix of every descendant's DN.
pub fn stored_dn(rdn: &str, pdn: &str) -> String {
    format!("{rdn},{pdn}")
}

/// Gives a new entry the server-kept attributes it does not have yet: entryUUID, creatorsName,
/// createTimestamp, modifiersName, modifyTimestamp (the last four from `stamps`). `apply`
/// does this after `locate`; an import does it on its building threads.
pub fn stamp_new(shared: &Dit, attrs: &mut Vec<Attr>, stamps: &Stamps) {
    let k = &shared.known;
    if !attrs.iter().any(|a| a.ty == k.entry_uuid) {
        let uuid = uuid::Uuid::new_v4().to_string();
        set_operational(&shared.schema(), attrs, k.entry_uuid, uuid.as_bytes());
    }
    for a in stamps.attrs() {
        if !attrs.iter().any(|b| b.ty == a.ty) {
            attrs.push(a.clone());
        }
    }
}

/// The server-kept attributes every entry added by `who` in one change gets (creatorsName,
/// createTimestamp, modifiersName, modifyTimestamp, entryCSN), normalized once: an import,
/// which is one change, stamps a million entries with the same five.
pub struct Stamps(Vec<Attr>);

impl Stamps {
    pub fn new(shared: &Dit, who: &str, now: &str, csn: &str) -> Stamps {
        let k = &shared.known;
        let mut attrs = Vec::with_capacity(5);
        for (ty, value) in [
            (k.creators_name, who),
            (k.create_timestamp, now),
            (k.modifiers_name, who),
            (k.modify_timestamp, now),
            (k.entry_csn, csn),
        ] {
            set_operational(&shared.schema(), &mut attrs, ty, value.as_bytes());
        }
        Stamps(attrs)
    }

    /// The attributes, in the order `stamp_new` adds them.
    pub fn attrs(&self) -> &[Attr] {
        &self.0
    }
}

/// Places a built entry in the tree for `who`: under its parent, or as a naming context,
/// after checking on the version it changes that `who` may add it.
pub fn apply(
    shared: &Dit,
    txn: &mut Txn,
    who: &Identity,
    mut e: NewEntry,
    assertion: Option<&Assertion>,
) -> LdapResult<Applied> {
    if !who.is_admin {
        let probe = detached(e.dn.clone(), e.ndn.clone(), e.attrs.clone());
        authorize_new(shared, txn.version(), who, &probe, "add")?;
    }
    if let Some(a) = assertion {
        // As slapd: an add's assertion is checked against the entry to be added.
        let probe = detached(e.dn.clone(), e.ndn.clone(), e.attrs.clone());
        a.check(shared, txn.version(), &probe)?;
    }
    let (dn, root) = match locate(shared, txn.version(), &e.ndn.norm)? {
        Site::Under(_, pdn) => (stored_dn(&e.dn[..e.rdn_len], pdn), false),
        Site::Root => (e.dn, true),
    };
    // An entryUUID given with the Relax Rules control (`build_with`) names one entry only.
    if let Some(uuid) = e.attrs.iter().find(|a| a.ty == shared.known.entry_uuid) {
        if let Some(norm) = uuid.norm.first() {
            if let Some(other) = find_by_uuid(shared, txn.version(), norm) {
                return Err(LdapError::new(
                    ResultCode::ConstraintViolation,
                    format!(
                        "entryUUID {}: already the entryUUID of '{}'",
                        String::from_utf8_lossy(uuid.values.first().map_or(&[][..], |v| v)),
                        other.dn()
                    ),
                ));
            }
        }
    }
    let stamps = Stamps::new(
        shared,
        &who.dn,
        &generalized_time(txn.now()),
        &shared.csn.next(txn.now()),
    );
    stamp_new(shared, &mut e.attrs, &stamps);
    let id = txn.add(dn, e.ndn, e.attrs, root)?;
    Ok(Applied {
        before: None,
        after: txn.version().get(id).cloned(),
        ..Default::default()
    })
}

/// The entry of `v` whose entryUUID has the equality form `norm`: through the equality index
/// on entryUUID when there is one (a replicating server has it), else by a scan.
pub fn find_by_uuid<'v>(
    shared: &Dit,
    v: &'v store::Version,
    norm: &[u8],
) -> Option<&'v Arc<store::Entry>> {
    let ty = shared.known.entry_uuid;
    let f = store::Filter::Equality {
        attr: ty,
        norm: norm.to_vec(),
    };
    match v.candidates(v.schema(), &f) {
        Some(ids) => ids
            .iter()
            .filter_map(|id| v.get(id))
            .find(|e| e.has_value(ty, norm)),
        None => v.iter().find(|e| e.has_value(ty, norm)),
    }
}

/// Whether `build` will hash a userPassword value of `input` (one not hashed already): the
/// caller then runs it where slow work belongs.
pub fn has_cleartext_password(shared: &Dit, input: &[InputAttr<'_>]) -> bool {
    input.iter().any(|(desc, values)| {
        resolve_attr(&shared.schema(), desc).is_ok_and(|(ty, _)| ty == shared.known.user_password)
            && values.iter().any(|v| !pwhash::is_hashed(v))
    })
}

/// The answer to an add of the root DSE.
pub fn root_exists() -> LdapError {
    LdapError::new(ResultCode::EntryAlreadyExists, "root DSE already exists")
}

/// Adds one entry now, for `who`, through the same checks as an add operation, and waits for
/// it to be committed: the write path of entries the server creates itself (naming contexts
/// and demo data at start). `dit` is the directory or what holds it (the server's state).
pub fn add_now<D>(dit: &Arc<D>, who: &Identity, dn: &str, input: &[InputAttr<'_>]) -> LdapResult<()>
where
    D: Borrow<Dit> + Send + Sync + 'static,
{
    let d: &Dit = (**dit).borrow();
    let e = build(d, dn.as_bytes(), input, false)?;
    let (holder, who) = (dit.clone(), who.clone());
    d.store
        .write_blocking(move |txn| {
            let d: &Dit = (*holder).borrow();
            write_job(d, txn, |txn| apply(d, txn, &who, e, None))
        })?
        .map(|_| ())
}
