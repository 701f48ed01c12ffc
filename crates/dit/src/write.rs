//! The write path's checks and stamps (design.md seam 2), shared by every change: access to
//! existing and new entries (checked again in the writer's job, on the version it changes),
//! the assertion control, schema and value checks with the named request limits, stamps
//! (modifiersName, modifyTimestamp, entryCSN), password hashing at rest, and the door every
//! change passes through, `write_job` (`write_job_as` for what the password policy records on
//! a bind and for replicated changes), which runs a change and then the overlay chain in one
//! transaction.

use std::sync::Arc;
use std::time::SystemTime;

use proto::ResultCode;
use schema::{AttrId, Schema};
use store::{Attr, Txn};

use crate::acl::Rights;
use crate::error::{LdapError, LdapResult};
use crate::overlays::{Applied, Origin};
use crate::values::ValueSet;
use crate::{Dit, Identity};

/// The refusal of an operation on an entry the requester can see but may not change.
/// Anonymous writers get slapd's strongerAuthRequired; everyone else insufficientAccessRights.
pub fn denied(who: &Identity, write: bool, what: &str) -> LdapError {
    if write && who.is_anonymous() {
        LdapError::new(
            ResultCode::StrongerAuthRequired,
            "modifications require authentication",
        )
    } else {
        LdapError::new(
            ResultCode::InsufficientAccessRights,
            format!("no {what} access"),
        )
    }
}

/// The write path's door: one change in the writer's job, applied by `f`, then the overlay
/// chain on what it applied; an error from either rolls the writer's job back. Every change
/// passes here — the protocol's writes (Password Modify and transactions included) and
/// start-up entries with this, what the password policy records on a bind and replicated
/// changes with `write_job_as` — and nothing else runs the chain (`overlays::run` is private
/// to this crate). The `Applied` it returns feeds the reply, the audit log and the change feed.
pub fn write_job(
    shared: &Dit,
    txn: &mut Txn,
    f: impl FnOnce(&mut Txn) -> LdapResult<Applied>,
) -> LdapResult<Applied> {
    let mut applied = f(txn)?;
    through(shared, txn, Origin::Request, &mut applied)?;
    Ok(applied)
}

/// `write_job` for a change of another `origin` than a client's request, which may turn out to
/// change nothing (`f` returns `None`: nothing runs). A `Replicated` change keeps the
/// provider's entryCSN and stamps (`f` applies them as sent, without the provider's access and
/// policy checks), and moves the CSN clock to at least its entryCSN, so that a change made
/// here after it sorts after it (`csn::Clock::follow`); the overlay chain runs on it as on any
/// change (which overlays run on a replica is the configuration's).
pub fn write_job_as(
    shared: &Dit,
    txn: &mut Txn,
    origin: Origin,
    f: impl FnOnce(&mut Txn) -> LdapResult<Option<Applied>>,
) -> LdapResult<Option<Applied>> {
    let Some(mut applied) = f(txn)? else {
        return Ok(None);
    };
    through(shared, txn, origin, &mut applied)?;
    Ok(Some(applied))
}

fn through(shared: &Dit, txn: &mut Txn, origin: Origin, applied: &mut Applied) -> LdapResult<()> {
    applied.origin = origin;
    if origin == Origin::Replicated {
        let csn = applied
            .after
            .as_ref()
            .and_then(|e| e.attr(shared.known.entry_csn))
            .and_then(|a| a.first())
            .and_then(|c| std::str::from_utf8(c).ok());
        if let Some(csn) = csn {
            shared.csn.follow(csn, SystemTime::now());
        }
    }
    crate::overlays::run(shared, txn, applied)
}

/// Checks that `who` holds, on the existing entry `ndn` in version `v`, each right of `needs`
/// (attribute, or `None` for the entry itself). An absent entry, or one the requester cannot
/// see, is noSuchObject with a matchedDN they may see; otherwise a refusal is `denied`.
pub fn authorize(
    shared: &Dit,
    v: &store::Version,
    who: &Identity,
    ndn: &schema::NormDn,
    needs: &[(Option<AttrId>, Rights)],
    write: bool,
    what: &str,
) -> LdapResult<()> {
    if who.is_admin {
        return Ok(());
    }
    if write && who.is_anonymous() {
        // As slapd: anonymous clients may not change anything, whatever the rules say; the
        // answer is the same for every entry, so it reveals nothing.
        return Err(denied(who, write, what));
    }
    let view = shared.acl.view(&shared.schema(), v, who);
    let Some(e) = v.lookup(ndn) else {
        return Err(shared.no_such_object_for(v, ndn, &view));
    };
    let access = view.entry(v.schema(), e);
    if needs.iter().all(|(ty, r)| access.can(*ty, *r)) {
        return Ok(());
    }
    if access.visible() {
        Err(denied(who, write, what))
    } else {
        Err(shared.no_such_object_for(v, ndn, &view))
    }
}

/// Checks that `who` may create `entry` (the `add` right on the new entry itself, evaluated
/// with its DN and attributes, as 389-ds does). Its parent must exist and be visible.
pub fn authorize_new(
    shared: &Dit,
    v: &store::Version,
    who: &Identity,
    entry: &store::Entry,
    what: &str,
) -> LdapResult<()> {
    if who.is_admin {
        return Ok(());
    }
    if who.is_anonymous() {
        return Err(denied(who, true, what));
    }
    let view = shared.acl.view(&shared.schema(), v, who);
    let parent_visible = schema::norm_parent(entry.ndn_str())
        .and_then(|p| v.lookup_norm(p))
        .is_some_and(|p| view.entry(&shared.schema(), p).visible());
    if !parent_visible {
        return Err(shared.no_such_object_for(v, &entry.ndn(v.schema()), &view));
    }
    if view.entry(&shared.schema(), entry).can(None, Rights::ADD) {
        Ok(())
    } else {
        Err(denied(who, true, what))
    }
}

/// An assertion control (RFC 4528) on its way to the entry it is checked against: in the
/// writer's job for changes (against the version being changed), inline for reads.
pub struct Assertion {
    who: Arc<Identity>,
    filter: proto::Filter<'static>,
}

impl Assertion {
    /// An assertion `filter` checked for `who`.
    pub fn new(who: Arc<Identity>, filter: proto::Filter<'static>) -> Assertion {
        Assertion { who, filter }
    }

    /// assertionFailed unless `e` matches the filter as a search by the requester would see
    /// it: attributes they may not search in `e` are Undefined, so the answer reveals nothing
    /// a search would not.
    pub fn check(&self, shared: &Dit, v: &store::Version, e: &store::Entry) -> LdapResult<()> {
        let schema = &*shared.schema();
        let filter = if self.who.is_admin {
            crate::filter::compile(schema, &mut |_| true, &self.filter)
        } else {
            let view = shared.acl.view(schema, v, &self.who);
            let access = view.entry(schema, e);
            crate::filter::compile(
                schema,
                &mut |ty| access.can(Some(ty), Rights::SEARCH),
                &self.filter,
            )
        };
        if filter.eval(schema, e) == store::Tri::True {
            Ok(())
        } else {
            Err(LdapError::new(
                ResultCode::AssertionFailed,
                "the entry does not match the assertion control's filter",
            ))
        }
    }
}

/// `Assertion::check` for an optional assertion.
pub fn check_assertion(
    a: Option<&Assertion>,
    shared: &Dit,
    v: &store::Version,
    e: &store::Entry,
) -> LdapResult<()> {
    a.map_or(Ok(()), |a| a.check(shared, v, e))
}

/// An entry not (yet) in the tree, for evaluating access rules against it.
pub fn detached(dn: String, ndn: schema::NormDn, attrs: Vec<Attr>) -> store::Entry {
    store::Entry::new(0, None, &dn, &ndn, &attrs)
}

pub use crate::csn::generalized_time;

/// Sets (replaces) a single-valued server-kept attribute.
pub fn set_operational(schema: &Schema, attrs: &mut Vec<Attr>, ty: AttrId, value: &[u8]) {
    attrs.retain(|a| a.ty != ty);
    if let Ok(a) = Attr::new(schema, ty, "", vec![value.into()]) {
        attrs.push(a);
    }
}

/// Records who changed an entry and when (modifiersName, modifyTimestamp, entryCSN). Private
/// to this crate: an entryCSN is stamped only by changes that go through the write path's door
/// (a stamp without the overlay chain would leave contextCSN behind it).
pub(crate) fn stamp_modified(shared: &Dit, attrs: &mut Vec<Attr>, who: &str, now: SystemTime) {
    let schema = &*shared.schema();
    let (csn, time) = shared.csn.stamps(now);
    set_operational(schema, attrs, shared.known.entry_csn, csn.as_bytes());
    set_operational(schema, attrs, shared.known.modifiers_name, who.as_bytes());
    set_operational(
        schema,
        attrs,
        shared.known.modify_timestamp,
        time.as_bytes(),
    );
}

/// Stores cleartext userPassword values hashed (already-hashed values are kept as given, so
/// migrated data keeps working).
pub fn hash_passwords(policy: &pwhash::Policy, values: &mut [Box<[u8]>]) {
    for v in values.iter_mut() {
        if !pwhash::is_hashed(v) {
            *v = policy.hash(v).into_boxed_slice();
        }
    }
}

/// Builds the values of one attribute from a request: syntax-checked, no duplicates, each with
/// its equality-normalized form (computed to find repeats, and kept so that building the
/// attribute need not normalize again). `context` prefixes messages as slapd does (e.g.
/// "modify/add").
pub fn checked_values(
    shared: &Dit,
    ty: AttrId,
    name: &str,
    raw: &[std::borrow::Cow<'_, [u8]>],
    context: &str,
) -> LdapResult<crate::values::Parts> {
    let mut set = ValueSet::default();
    push_checked(shared, &mut set, ty, name, raw, context)?;
    Ok(set.into_parts())
}

/// Adds the values of `raw` to `set` as `checked_values` checks them; a value whose normalized
/// form is already in the set (from `raw` or from before) is attributeOrValueExists. Linear in
/// the number of values (`ValueSet`), and bounded by `max_values_per_attribute`.
pub fn push_checked(
    shared: &Dit,
    set: &mut ValueSet,
    ty: AttrId,
    name: &str,
    raw: &[std::borrow::Cow<'_, [u8]>],
    context: &str,
) -> LdapResult<()> {
    let schema = &*shared.schema();
    check_value_count(shared, name, set.len() + raw.len())?;
    for v in raw {
        let i = set.len();
        let invalid = || {
            LdapError::new(
                ResultCode::InvalidAttributeSyntax,
                format!("{context}{name}: value #{i} invalid per syntax"),
            )
        };
        schema.validate(ty, v).map_err(|_| invalid())?;
        // An objectClass value must name a class (slapd: invalid per syntax).
        if ty == shared.known.object_class
            && std::str::from_utf8(v)
                .ok()
                .and_then(|n| schema.class_by_name(n.trim()))
                .is_none()
        {
            return Err(invalid());
        }
        let n = schema
            .normalize_eq(ty, v)
            .map_err(|_| invalid())?
            .into_boxed_slice();
        // Stored in the form slapd stores (pretty DNs, objectClass names as the schema spells
        // them): here, where add, modify and import all take their values.
        let stored = match schema.pretty_value(ty, v) {
            Some(p) => p.into_boxed_slice(),
            None => v.as_ref().into(),
        };
        if !set.insert(stored, n) {
            return Err(LdapError::new(
                ResultCode::AttributeOrValueExists,
                format!("{context}{name}: value #{i} provided more than once"),
            ));
        }
    }
    Ok(())
}

/// `max_values_per_attribute`: the values one attribute of a request may carry.
pub fn check_value_count(shared: &Dit, name: &str, n: usize) -> LdapResult<()> {
    let max = shared.limits().max_values_per_attribute;
    if max > 0 && n > max {
        return Err(LdapError::new(
            ResultCode::AdminLimitExceeded,
            format!("{name}: {n} values, more than the server allows in one request ({max}, max_values_per_attribute)"),
        ));
    }
    Ok(())
}

/// `max_attributes_per_request`: the attributes of an add, or the changes of a modify.
pub fn check_attribute_count(shared: &Dit, what: &str, n: usize) -> LdapResult<()> {
    let max = shared.limits().max_attributes_per_request;
    if max > 0 && n > max {
        return Err(LdapError::new(
            ResultCode::AdminLimitExceeded,
            format!("{n} {what}, more than the server allows in one request ({max}, max_attributes_per_request)"),
        ));
    }
    Ok(())
}

/// Refuses changes to attributes the server keeps itself.
pub fn check_user_modifiable(schema: &Schema, ty: AttrId, name: &str) -> LdapResult<()> {
    if schema.attr(ty).no_user_modification {
        return Err(LdapError::new(
            ResultCode::ConstraintViolation,
            format!("{name}: no user modification allowed"),
        ));
    }
    Ok(())
}

/// Checks the whole entry against the schema and returns the structural object class name.
pub fn check_entry(shared: &Dit, attrs: &[Attr]) -> LdapResult<String> {
    check_entry_with(shared, attrs, &[])
}

/// `check_entry` for an entry that also has the attributes (type, value count) `more` (kept
/// as stored, not unpacked: never objectClass).
pub fn check_entry_with(
    shared: &Dit,
    attrs: &[Attr],
    more: &[(AttrId, usize)],
) -> LdapResult<String> {
    let schema = &*shared.schema();
    let oc: Vec<&[u8]> = attrs
        .iter()
        .filter(|a| a.ty == shared.known.object_class)
        .flat_map(|a| a.values.iter().map(|v| &**v))
        .collect();
    let counts: Vec<(AttrId, usize)> = attrs
        .iter()
        .map(|a| (a.ty, a.values.len()))
        .chain(more.iter().copied().filter(|(_, n)| *n > 0))
        .collect();
    let structural = schema.check_entry(&oc, &counts)?;
    Ok(schema
        .class(structural)
        .names
        .first()
        .cloned()
        .unwrap_or_else(|| schema.class(structural).oid.clone()))
}

/// Adds the RDN value `raw` of type `ty` to `attrs` unless the attribute (without options)
/// holds it already: what an add (values the client left out) and a rename (the new RDN) do.
pub fn join_rdn_value(
    schema: &Schema,
    attrs: &mut Vec<Attr>,
    ty: AttrId,
    raw: &[u8],
) -> LdapResult<()> {
    let norm = schema.normalize_eq(ty, raw).unwrap_or_default();
    match attrs
        .iter_mut()
        .find(|a| a.ty == ty && a.options.is_empty())
    {
        Some(a) => {
            if a.find(&norm).is_none() {
                a.values.push(raw.into());
                a.norm.push(norm.into_boxed_slice());
            }
        }
        None => attrs.push(
            Attr::new(schema, ty, "", vec![raw.into()])
                .map_err(|e| LdapError::new(ResultCode::InvalidAttributeSyntax, e.to_string()))?,
        ),
    }
    Ok(())
}

/// Every value of each RDN AVA must be in the entry (RFC 4512 §2.3).
pub fn rdn_values_present(shared: &Dit, ndn: &schema::NormDn, attrs: &[Attr]) -> LdapResult<()> {
    if let Some(rdn) = ndn.rdns.first() {
        for (ty, raw) in rdn {
            let norm = shared.schema().normalize_eq(*ty, raw).unwrap_or_default();
            let present = attrs
                .iter()
                .any(|a| a.ty == *ty && a.options.is_empty() && a.find(&norm).is_some());
            if !present {
                return Err(LdapError::new(
                    ResultCode::NamingViolation,
                    format!(
                        "value of naming attribute '{}' is not present in entry",
                        shared.schema().attr(*ty).name()
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// The structural object class an objectClass value set names: the most specific structural
/// class among them (the others must be its superclasses for the entry to be valid).
pub fn structural_of(shared: &Dit, attrs: &[Attr]) -> Option<schema::ClassId> {
    let schema = &*shared.schema();
    let ids: Vec<schema::ClassId> = attrs
        .iter()
        .filter(|a| a.ty == shared.known.object_class)
        .flat_map(|a| a.values.iter())
        .filter_map(|v| {
            std::str::from_utf8(v)
                .ok()
                .and_then(|n| schema.class_by_name(n.trim()))
        })
        .filter(|c| schema.class(*c).kind == schema::ClassKind::Structural)
        .collect();
    // The most specific: no other listed class has it among its superclasses.
    ids.iter().copied().find(|c| {
        !ids.iter()
            .any(|o| o != c && schema.class_closure(&[*o]).contains(c))
    })
}
