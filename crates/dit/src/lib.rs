//! The directory itself, with no sockets (design.md, "Crates and seams"): who an operation
//! acts for (`identity`), access control (`acl`), filter compilation (`filter`), the write
//! path's checks and stamps (`write`) and its overlay chain (`overlays`), what each kind of
//! change does in the writer's job (`add`, which also builds entries, `delete`, `modify`,
//! `modrdn`), bulk import and export (`bulk`), entryCSN values and time stamps (`csn`), the
//! server-held virtual entries (`entries`: the root DSE, cn=Subschema; `monitor`: the
//! cn=Monitor tree and the registry others add figures and readiness gates to), attribute
//! selection (`select`), aliases and referral objects (`standin`), EXTERNAL identity mapping (`authz`), password policy (`ppolicy`), values in
//! linear time (`values`) and the error every operation returns (`error`).
//!
//! A change is prepared from a request (`modify::prepare`, `modrdn::prepare`, `add::build`),
//! then applied in the writer's job by the `apply` of its kind, inside `write::write_job`,
//! which runs the overlay chain on what was applied. Every `apply` checks access for the
//! identity it is given on the version it changes, so the protocol layer, start-up entries
//! (`add::add_now`) and Password Modify share one path; what the password policy records on a
//! bind (`ppolicy::Ppolicy::record_bind_change`) and replicated changes (crate `repl`) pass the
//! same door as `write::write_job_as`. The door is the only way to the overlay chain: it is
//! private to this crate (`overlays::run`, `Dit::overlays`), and so is stamping an entryCSN
//! (`write::stamp_modified`).
//!
//! The CSN clock (`csn::Clock`, `Dit::csn`) is seeded by `Dit::new` with the newest CSN the
//! store holds, so that no CSN issued afterwards sorts before a stored one, whatever the
//! system clock says.
//!
//! [`Dit`] is the directory state every operation shares: the store (whose versions hold the
//! entries, indexes and schema), the naming contexts, the administrator, the compiled access
//! rules, the overlay chain and the CSN clock. It is immutable after start; all mutable
//! directory state lives in the store's versions. The server wraps it with what belongs to
//! sockets (listeners, TLS, connection limits, logs) and derefs to it.
//!
//! Everything here can be tested without a socket: build a `Dit` with `Dit::new`, write with
//! `store.write_blocking(|txn| write::write_job(&dit, txn, ...))`, read with `store.read()`.

pub mod acl;
pub mod add;
pub mod authz;
pub mod bulk;
pub mod csn;
pub mod delete;
pub mod entries;
pub mod error;
pub mod filter;
pub mod identity;
pub mod modify;
pub mod modrdn;
pub mod monitor;
pub mod overlays;
pub mod ppolicy;
pub mod select;
pub mod standin;
pub mod values;
pub mod write;

use std::sync::Arc;

use proto::ResultCode;
use schema::{AttrId, Dn, NormDn, Schema};
use store::{Entry, Store};

use crate::error::{LdapError, LdapResult};
pub use crate::identity::Identity;

/// Attribute ids the server itself uses, resolved once.
pub struct Known {
    pub object_class: AttrId,
    pub user_password: AttrId,
    pub create_timestamp: AttrId,
    pub modify_timestamp: AttrId,
    pub creators_name: AttrId,
    pub modifiers_name: AttrId,
    pub entry_uuid: AttrId,
    pub entry_dn: AttrId,
    pub structural_object_class: AttrId,
    pub has_subordinates: AttrId,
    pub num_subordinates: AttrId,
    pub subschema_subentry: AttrId,
    pub entry_csn: AttrId,
    /// `ref` (RFC 3296) and `aliasedObjectName` (RFC 4512 §2.6): what stand-ins name.
    pub ref_: AttrId,
    pub aliased_object_name: AttrId,
    /// The equality forms of the object classes `alias` and `referral` (`standin`).
    pub alias_class: Vec<u8>,
    pub referral_class: Vec<u8>,
}

impl Known {
    fn resolve(schema: &Schema) -> Result<Known, String> {
        let get = |n: &str| {
            schema
                .attr_by_name(n)
                .ok_or_else(|| format!("built-in schema lacks attribute type '{n}'"))
        };
        let class = |n: &str| {
            let oc = get("objectClass")?;
            schema
                .normalize_eq(oc, n.as_bytes())
                .map_err(|e| format!("object class '{n}': {e}"))
        };
        Ok(Known {
            object_class: get("objectClass")?,
            user_password: get("userPassword")?,
            create_timestamp: get("createTimestamp")?,
            modify_timestamp: get("modifyTimestamp")?,
            creators_name: get("creatorsName")?,
            modifiers_name: get("modifiersName")?,
            entry_uuid: get("entryUUID")?,
            entry_dn: get("entryDN")?,
            structural_object_class: get("structuralObjectClass")?,
            has_subordinates: get("hasSubordinates")?,
            num_subordinates: get("numSubordinates")?,
            subschema_subentry: get("subschemaSubentry")?,
            entry_csn: get("entryCSN")?,
            ref_: get("ref")?,
            aliased_object_name: get("aliasedObjectName")?,
            alias_class: class("alias")?,
            referral_class: class("referral")?,
        })
    }
}

/// Limits the write path enforces on one request (named settings, adminLimitExceeded).
#[derive(Debug, Clone, Copy)]
pub struct WriteLimits {
    /// `max_values_per_attribute` (0 = none).
    pub max_values_per_attribute: usize,
    /// `max_attributes_per_request` (0 = none).
    pub max_attributes_per_request: usize,
    /// `max_subtree_delete`: entries one subtree delete may remove (0 = none).
    pub max_subtree_delete: usize,
}

/// What the write path reads of the configuration (see `Dit::reconfigure`).
#[derive(Debug, Clone, Copy)]
struct Tuning {
    limits: WriteLimits,
    password_hash: pwhash::Policy,
}

/// The directory every operation shares (see the crate documentation).
pub struct Dit {
    pub store: Store,
    pub known: Known,
    pub suffixes: Vec<NormDn>,
    pub admin: NormDn,
    /// The access rules in force (a reload replaces them: `Dit::reconfigure`).
    pub acl: acl::AclCell,
    /// The root DSE, served from memory, not stored.
    pub root_dse: Entry,
    /// `cn=Subschema` as last built, with the generation of the schema it shows: rebuilt by
    /// `subschema()` when the schema was extended since (design.md seam 4).
    pub subschema_cache: arc_swap::ArcSwap<(u64, Arc<Entry>)>,
    /// The overlays every change passes through, in order (`overlays`): run by the write
    /// path's door only (`write::write_job`), so private to this crate.
    pub(crate) overlays: Vec<Box<dyn overlays::Overlay>>,
    /// entryCSN values for changes.
    pub csn: csn::Clock,
    /// The write limits and how clear-text passwords are hashed at rest: set at start, replaced
    /// by a reload (`reconfigure`), read per write through `limits()` and `password_policy()`.
    tuning: arc_swap::ArcSwap<Tuning>,
    /// What others add to cn=Monitor, `/metrics` and readiness (`monitor`).
    pub monitor: monitor::Registry,
}

/// DNs parsed lately, by their bytes on the wire (`Dit::parse_dn_cached`): a few, replaced
/// in turn, so that a search need not parse and normalize its base again.
#[derive(Default)]
pub struct DnCache {
    slots: Vec<(Box<[u8]>, Arc<NormDn>)>,
    next: usize,
}

impl DnCache {
    const SLOTS: usize = 4;
}

/// The subschema subentry as `Dit::subschema` lends it.
pub struct SubschemaRef(arc_swap::Guard<Arc<(u64, Arc<Entry>)>>);

impl std::ops::Deref for SubschemaRef {
    type Target = Entry;

    fn deref(&self) -> &Entry {
        &self.0 .1
    }
}

impl Dit {
    /// The limits of one write request (`max_values_per_attribute`, …) in force now.
    pub fn limits(&self) -> WriteLimits {
        self.tuning.load().limits
    }

    /// How clear-text passwords are hashed at rest (`password_hash` and the cost keys).
    pub fn password_policy(&self) -> pwhash::Policy {
        self.tuning.load().password_hash
    }

    /// Takes what a reload changed: new access rules (if they changed), the password hashing
    /// and the write limits. Operations that started keep what they began with.
    pub fn reconfigure(
        &self,
        acl: Option<acl::Acl>,
        password_hash: pwhash::Policy,
        limits: WriteLimits,
    ) {
        if let Some(acl) = acl {
            self.acl.replace(acl);
        }
        self.tuning.store(std::sync::Arc::new(Tuning {
            limits,
            password_hash,
        }));
    }

    /// A directory over `store`: `suffixes` and `admin` normalized, the rules and overlays
    /// compiled, `root_dse` built by the caller (`entries::root_dse`, with what the protocol
    /// layer supports). Passwords are hashed with the default policy until the caller sets
    /// `password_hash`.
    #[expect(
        clippy::too_many_arguments,
        reason = "each is a separate part the caller builds"
    )]
    pub fn new(
        store: Store,
        suffixes: Vec<NormDn>,
        admin: NormDn,
        acl: acl::Acl,
        root_dse: Entry,
        overlays: Vec<Box<dyn overlays::Overlay>>,
        server_id: u16,
        limits: WriteLimits,
    ) -> Result<Dit, String> {
        let schema = store.schema();
        let known = Known::resolve(&schema)?;
        let subschema_cache = arc_swap::ArcSwap::from_pointee((
            schema.generation(),
            Arc::new(entries::subschema_entry(&schema)),
        ));
        let clock = csn::Clock::new(server_id);
        seed_clock(&clock, &store, &known, &suffixes);
        Ok(Dit {
            store,
            known,
            suffixes,
            admin,
            acl: acl::AclCell::new(acl),
            root_dse,
            subschema_cache,
            overlays,
            csn: clock,
            tuning: arc_swap::ArcSwap::from_pointee(Tuning {
                limits,
                password_hash: pwhash::Policy::default(),
            }),
            monitor: monitor::Registry::default(),
        })
    }

    /// The schema of the newest published version. Code working on a version should prefer
    /// `version.schema()`; this one is never older than any version read before the call,
    /// and ids never change between schemas (only new ones are appended), so `Known` and
    /// attribute ids resolved earlier stay valid.
    pub fn schema(&self) -> store::SchemaGuard {
        self.store.current_schema()
    }

    /// The subschema subentry (`cn=Subschema`) of the current schema, served from memory and
    /// rebuilt only after the schema changed. Borrowed, like `schema()`: every search asks.
    pub fn subschema(&self) -> SubschemaRef {
        let cached = self.subschema_cache.load();
        if cached.0 == self.schema().generation() {
            return SubschemaRef(cached);
        }
        drop(cached);
        // Two sessions may rebuild at once; either result is the current schema's entry, and
        // a stale one stored last is rebuilt by the next call.
        let schema = self.store.schema();
        self.subschema_cache.store(Arc::new((
            schema.generation(),
            Arc::new(entries::subschema_entry(&schema)),
        )));
        SubschemaRef(self.subschema_cache.load())
    }

    /// Parses and normalizes a DN from the wire (invalidDNSyntax when it is not one).
    pub fn parse_dn(&self, raw: &[u8]) -> LdapResult<(Dn, NormDn)> {
        let s = std::str::from_utf8(raw)
            .map_err(|_| LdapError::new(ResultCode::InvalidDnSyntax, "invalid DN: not UTF-8"))?;
        let dn =
            Dn::parse(s).map_err(|e| LdapError::new(ResultCode::InvalidDnSyntax, e.to_string()))?;
        let ndn = dn
            .normalize(&self.schema())
            .map_err(|e| LdapError::new(ResultCode::InvalidDnSyntax, e.to_string()))?;
        Ok((dn, ndn))
    }

    /// `parse_dn`'s normalized DN alone, parsing only the first RDN when this thread met the
    /// parent lately (`Schema::normalize_dn`): the target of a write.
    pub fn parse_ndn(&self, raw: &[u8]) -> LdapResult<NormDn> {
        let s = std::str::from_utf8(raw)
            .map_err(|_| LdapError::new(ResultCode::InvalidDnSyntax, "invalid DN: not UTF-8"))?;
        self.schema()
            .normalize_dn(s)
            .map_err(|e| LdapError::new(ResultCode::InvalidDnSyntax, e.to_string()))
    }

    /// `parse_dn`'s normalized DN, from `cache` when the same bytes were parsed lately (a
    /// connection's search bases are nearly always the same few). A DN that parsed once
    /// normalizes the same under every later schema (extensions only add types), so entries
    /// never go stale.
    pub fn parse_dn_cached(&self, cache: &mut DnCache, raw: &[u8]) -> LdapResult<Arc<NormDn>> {
        if let Some((_, ndn)) = cache.slots.iter().find(|(r, _)| **r == *raw) {
            return Ok(ndn.clone());
        }
        let ndn = Arc::new(self.parse_dn(raw)?.1);
        let slot = (Box::<[u8]>::from(raw), ndn.clone());
        if cache.slots.len() < DnCache::SLOTS {
            cache.slots.push(slot);
        } else {
            cache.slots[cache.next] = slot;
            cache.next = (cache.next + 1) % DnCache::SLOTS;
        }
        Ok(ndn)
    }

    /// Parses the DN of a new entry (`Schema::parse_new_dn`), with `parse_dn`'s errors.
    pub fn parse_new_dn(&self, raw: &[u8]) -> LdapResult<schema::NewDn> {
        let s = std::str::from_utf8(raw)
            .map_err(|_| LdapError::new(ResultCode::InvalidDnSyntax, "invalid DN: not UTF-8"))?;
        self.schema()
            .parse_new_dn(s)
            .map_err(|e| LdapError::new(ResultCode::InvalidDnSyntax, e.to_string()))
    }

    /// The naming context holding the normalized DN `norm`, if any.
    pub fn suffix_of(&self, norm: &str) -> Option<&NormDn> {
        self.suffixes
            .iter()
            .find(|s| s.norm == norm || schema::norm_is_descendant(norm, &s.norm))
    }

    /// Whether the normalized DN `norm` is a naming context.
    pub fn is_suffix(&self, norm: &str) -> bool {
        self.suffixes.iter().any(|s| s.norm == norm)
    }

    /// noSuchObject for `ndn` as the requester of `view` may know it: matchedDN is the nearest
    /// ancestor they can see, so the answer never reveals a hidden entry.
    pub fn no_such_object_for(
        &self,
        v: &store::Version,
        ndn: &NormDn,
        view: &crate::acl::View,
    ) -> LdapError {
        if view.is_admin() {
            return self.no_such_object(v, ndn);
        }
        let mut at = v.matched(ndn);
        while let Some(e) = at {
            if view.entry(&self.schema(), e).visible() {
                break;
            }
            at = e.parent.and_then(|p| v.get(p));
        }
        let matched = at.map(|e| e.dn().to_string()).unwrap_or_default();
        LdapError::new(ResultCode::NoSuchObject, "no such object").with_matched(matched)
    }

    /// noSuchObject for `ndn`, with the nearest existing ancestor as matchedDN.
    pub fn no_such_object(&self, v: &store::Version, ndn: &NormDn) -> LdapError {
        self.no_such_object_norm(v, &ndn.norm)
    }

    /// `no_such_object` for a normalized DN string.
    pub fn no_such_object_norm(&self, v: &store::Version, norm: &str) -> LdapError {
        let matched = v
            .matched_norm(norm)
            .map(|e| e.dn().to_string())
            .unwrap_or_default();
        LdapError::new(ResultCode::NoSuchObject, "no such object").with_matched(matched)
    }
}

/// Seeds the CSN clock with the newest CSN `store` holds (`csn::newest_stored`), so that every
/// CSN issued from now on sorts after every stored one, whatever the system clock says. The
/// pass over the entries runs beside the start (`csn::Clock::seed`). A system clock behind
/// that CSN is logged: the server goes on, its CSNs continue from the stored ones until the
/// clock catches up.
fn seed_clock(clock: &csn::Clock, store: &Store, known: &Known, suffixes: &[NormDn]) {
    let v = store.read();
    let entry_csn = known.entry_csn;
    let context_csn = v.schema().attr_by_name("contextCSN");
    let suffixes = suffixes.to_vec();
    clock.seed(move || {
        let t = std::time::Instant::now();
        let newest = csn::newest_stored(&v, entry_csn, context_csn, &suffixes)?;
        tracing::debug!(
            "CSN clock seeded with {newest}, the newest of {} entries ({:.3} s)",
            v.len(),
            t.elapsed().as_secs_f64()
        );
        let behind = csn::ahead_of(&newest, std::time::SystemTime::now());
        if !behind.is_zero() {
            tracing::warn!(
                "the system clock is {:.3} s behind the newest stored change (CSN {newest}); CSNs continue from it until the clock catches up (check NTP)",
                behind.as_secs_f64()
            );
        }
        Some(newest)
    });
}

pub use filter::split_description;

/// Resolves an attribute description from a request; undefinedAttributeType when unknown.
pub fn resolve_attr(schema: &Schema, raw: &[u8]) -> LdapResult<(AttrId, String)> {
    let s = std::str::from_utf8(raw).map_err(|_| {
        LdapError::new(
            ResultCode::UndefinedAttributeType,
            "attribute description is not UTF-8",
        )
    })?;
    let (name, options) = split_description(s);
    match schema.attr_by_name(name) {
        Some(id) => Ok((id, options)),
        None => Err(LdapError::new(
            ResultCode::UndefinedAttributeType,
            format!("{name}: attribute type undefined"),
        )),
    }
}
