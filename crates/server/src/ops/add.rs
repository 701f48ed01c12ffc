//! Add (RFC 4511 §4.7).
//!
//! `build` turns a DN and attribute list into a schema-checked entry (used by the protocol
//! operation, demo data and later bulk import); `apply` runs on the writer, checks what depends
//! on the data (parent, existence) and stamps the server-kept attributes.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;

use proto::{tags, AddRequest, ResultCode};
use schema::{AttrId, NormDn};
use store::{Attr, EntryId, Txn};

use crate::error::{LdapError, LdapResult};
use crate::op::{Next, Op};
use crate::ops::values::ValueSet;
use crate::ops::{
    authorize_new, check_attribute_count, check_entry, check_user_modifiable, detached,
    early_checks, generalized_time, hash_passwords, on_blocking_pool, push_checked, route_write,
    set_operational, Applied, Assertion, Change,
};
use crate::state::{resolve_attr, Identity, Shared};

/// One attribute of an add request: description and values.
pub(crate) type InputAttr<'a> = (Cow<'a, [u8]>, Vec<Cow<'a, [u8]>>);

/// Groups `(description, value)` pairs (LDIF order) into attributes, joining repeated
/// descriptions case-insensitively. The attributes borrow the pairs' bytes.
pub(crate) fn group_values<N: AsRef<[u8]>, V: AsRef<[u8]>>(pairs: &[(N, V)]) -> Vec<InputAttr<'_>> {
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
pub(crate) struct NewEntry {
    /// The DN in RFC 4514 form, whose first `rdn_len` bytes are its first RDN.
    pub dn: String,
    pub rdn_len: usize,
    pub ndn: NormDn,
    pub attrs: Vec<Attr>,
}

/// Builds the entry of an add request. `trusted` (import of server-written data) keeps
/// server-kept attributes the input carries instead of refusing them. Clear-text passwords are
/// hashed here, on the calling thread (`submit` calls it on the blocking pool when there are
/// any).
pub(crate) fn build(
    shared: &Shared,
    dn: &[u8],
    input: &[InputAttr<'_>],
    trusted: bool,
) -> LdapResult<NewEntry> {
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
        if !trusted {
            check_user_modifiable(schema, ty, name)?;
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
            hash_passwords(&shared.config.password_hash, &mut vals);
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
            let norm = schema.normalize_eq(*ty, raw).unwrap_or_default();
            match attrs
                .iter_mut()
                .find(|a| a.ty == *ty && a.options.is_empty())
            {
                Some(a) => {
                    if a.find(&norm).is_none() {
                        a.values.push(raw.clone().into_boxed_slice());
                        a.norm.push(norm.into_boxed_slice());
                    }
                }
                None => {
                    let a = Attr::new(schema, *ty, "", vec![raw.clone().into_boxed_slice()])
                        .map_err(|e| {
                            LdapError::new(ResultCode::InvalidAttributeSyntax, e.to_string())
                        })?;
                    attrs.push(a);
                }
            }
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
/// (`apply`) or the DN table of a bulk import (`crate::bulk`).
pub(crate) trait Tree {
    /// The id and stored DN of the entry with this normalized DN (`NormDn::norm`).
    fn find(&self, ndn: &str) -> Option<(EntryId, &str)>;
    /// The answer when the parent of the normalized DN `norm` does not exist (noSuchObject,
    /// with matchedDN where the tree knows it).
    fn missing_parent(&self, shared: &Shared, norm: &str) -> LdapError;
}

impl Tree for store::Version {
    fn find(&self, ndn: &str) -> Option<(EntryId, &str)> {
        self.lookup_norm(ndn).map(|e| (e.id, e.dn()))
    }

    fn missing_parent(&self, shared: &Shared, norm: &str) -> LdapError {
        shared.no_such_object_norm(self, norm)
    }
}

/// Where a new entry goes in the tree.
pub(crate) enum Site<'t> {
    /// It is a naming context.
    Root,
    /// Under this parent, whose stored DN is given.
    Under(EntryId, &'t str),
}

/// Checks where a new entry goes (`norm`: its normalized DN): it must not exist, and its parent
/// must, unless it is a naming context.
pub(crate) fn locate<'t>(shared: &Shared, tree: &'t impl Tree, norm: &str) -> LdapResult<Site<'t>> {
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
        return Err(LdapError::new(
            ResultCode::UnwillingToPerform,
            "no global superior knowledge",
        ));
    }
    match schema::norm_parent(norm).and_then(|p| tree.find(p)) {
        Some((pid, pdn)) => Ok(Site::Under(pid, pdn)),
        None => Err(tree.missing_parent(shared, norm)),
    }
}

/// The DN an entry is stored under: as the client spelled its RDN (`rdn`), under the parent's
/// stored DN, so a subtree rename can swap the suffix of every descendant's DN.
pub(crate) fn stored_dn(rdn: &str, pdn: &str) -> String {
    format!("{rdn},{pdn}")
}

/// Gives a new entry the server-kept attributes it does not have yet: entryUUID, creatorsName,
/// createTimestamp, modifiersName, modifyTimestamp (the last four from `stamps`). `apply`
/// does this after `locate`; an import does it on its building threads.
pub(crate) fn stamp_new(shared: &Shared, attrs: &mut Vec<Attr>, stamps: &Stamps) {
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
pub(crate) struct Stamps(Vec<Attr>);

impl Stamps {
    pub(crate) fn new(shared: &Shared, who: &str, now: &str, csn: &str) -> Stamps {
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
    pub(crate) fn attrs(&self) -> &[Attr] {
        &self.0
    }
}

/// Places a built entry in the tree: under its parent, or as a naming context.
pub(crate) fn apply(
    shared: &Shared,
    txn: &mut Txn,
    who: &str,
    mut e: NewEntry,
    assertion: Option<&Assertion>,
) -> LdapResult<Applied> {
    if let Some(a) = assertion {
        // As slapd: an add's assertion is checked against the entry to be added.
        let probe = detached(e.dn.clone(), e.ndn.clone(), e.attrs.clone());
        a.check(shared, txn.version(), &probe)?;
    }
    let (dn, root) = match locate(shared, txn.version(), &e.ndn.norm)? {
        Site::Under(_, pdn) => (stored_dn(&e.dn[..e.rdn_len], pdn), false),
        Site::Root => (e.dn, true),
    };
    let stamps = Stamps::new(
        shared,
        who,
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

/// Whether `build` will hash a userPassword value of `input` (one not hashed already).
fn has_cleartext_password(shared: &Shared, input: &[InputAttr<'_>]) -> bool {
    input.iter().any(|(desc, values)| {
        resolve_attr(&shared.schema(), desc).is_ok_and(|(ty, _)| ty == shared.known.user_password)
            && values.iter().any(|v| !pwhash::is_hashed(v))
    })
}

/// Builds the entry and hands it to the writer. The read loop awaits this, so writes still
/// reach the writer in arrival order.
pub(crate) async fn handle(mut op: Op, req: &AddRequest<'_>) -> Next {
    let audit = op.audit_applied();
    let assertion = crate::ops::take_assertion(&mut op);
    let early = early_checks(&op);
    let change = match precheck(op.shared(), req).and_then(|()| op.may_write()) {
        Ok(()) => {
            let (sh, want) = (op.shared().clone(), op.controls.ppolicy);
            match crate::ppolicy::check_add(&sh, &op.who, req, want, &mut op.response) {
                Ok(()) => prepare(op.shared(), &op.who, req, assertion, early).await,
                Err(e) => Err(e),
            }
        }
        Err(e) => Err(e),
    };
    route_write(op, tags::ADD_RESPONSE, change, audit).await;
    Next::Continue
}

/// What slapd checks of an add before anything else, whoever asks: a request without
/// attributes is a protocolError (after an invalid DN's invalidDNSyntax), and the root DSE
/// exists already.
fn precheck(shared: &Shared, req: &AddRequest<'_>) -> LdapResult<()> {
    if req.attributes.is_empty() {
        shared.parse_dn(&req.dn)?;
        return Err(LdapError::new(
            ResultCode::ProtocolError,
            "no attributes provided",
        ));
    }
    if is_root_dn(&req.dn) {
        return Err(root_exists());
    }
    Ok(())
}

/// Whether a DN as sent names the root DSE (the empty DN, possibly written as spaces).
fn is_root_dn(dn: &[u8]) -> bool {
    dn.iter().all(|b| *b == b' ')
}

fn root_exists() -> LdapError {
    LdapError::new(ResultCode::EntryAlreadyExists, "root DSE already exists")
}

async fn prepare(
    shared: &Arc<Shared>,
    who: &Arc<Identity>,
    req: &AddRequest<'_>,
    assertion: Option<Assertion>,
    early: bool,
) -> LdapResult<Change> {
    let input: Vec<InputAttr<'_>> = req
        .attributes
        .iter()
        .map(|a| (a.name.clone(), a.values.clone()))
        .collect();
    let built = if has_cleartext_password(shared, &input) {
        // The whole build moves, not just the hashing: it then sees exactly what it would
        // see here, hashed values included.
        let input: Vec<InputAttr<'static>> = input
            .into_iter()
            .map(|(n, vs)| {
                let vs = vs.into_iter().map(|v| Cow::Owned(v.into_owned())).collect();
                (Cow::Owned(n.into_owned()), vs)
            })
            .collect();
        let (sh, dn) = (shared.clone(), req.dn.to_vec());
        on_blocking_pool(move || build(&sh, &dn, &input, false))
            .await
            .and_then(|r| r)
    } else {
        build(shared, &req.dn, &input, false)
    };
    let e = built?;
    if early && !who.is_admin {
        let probe = detached(e.dn.clone(), e.ndn.clone(), e.attrs.clone());
        authorize_new(shared, &shared.store.read(), who, &probe, "add")?;
    }
    let sh = shared.clone();
    let who = who.clone();
    Ok(Box::new(move |txn: &mut Txn| {
        // Checked again on the version the change applies to.
        if !who.is_admin {
            let probe = detached(e.dn.clone(), e.ndn.clone(), e.attrs.clone());
            authorize_new(&sh, txn.version(), &who, &probe, "add")?;
        }
        apply(&sh, txn, &who.dn, e, assertion.as_ref())
    }))
}
