//! The built-in schema, written as OpenLDAP `.schema` text and loaded through the same parser
//! as `load_schema_text`, so the parser runs on every start.
//!
//! - `core.schema`: RFC 4512 operational attributes and classes, RFC 4519 user schema.
//! - `cosine.schema`: RFC 4524 (COSINE and Internet X.500 pilot).
//! - `inetorgperson.schema`: RFC 2798.
//! - `posixids.schema`: uidNumber and gidNumber, which stay when a bundle replaces `nis`.
//! - `nis.schema`: the other RFC 2307 types; the `rfc2307bis` bundle replaces it
//!   (`NIS_FILE`).
//! - `operational.schema`: the server's operational and root DSE attributes (RFC 3045,
//!   RFC 3296, RFC 4530, RFC 5020, numSubordinates).
//! - `openldap.schema`: OpenLDAP's entryCSN and contextCSN, which slapcat output carries. Last,
//!   so that adding it numbered no earlier type differently.
//! - `memberof.schema`: memberOf (as OpenLDAP's memberof overlay defines it).
//! - `monitor.schema`: the types and classes of cn=Monitor (back-monitor's, and Linden's own).

/// The origin of the built-in file a bundle may replace (see `crate::bundles`).
pub(crate) const NIS_FILE: &str = "nis.schema";

/// (origin, text) in load order: later files refer to names of earlier ones.
pub(crate) const FILES: &[(&str, &str)] = &[
    ("core.schema", include_str!("core.schema")),
    ("operational.schema", include_str!("operational.schema")),
    ("cosine.schema", include_str!("cosine.schema")),
    ("inetorgperson.schema", include_str!("inetorgperson.schema")),
    ("posixids.schema", include_str!("posixids.schema")),
    (NIS_FILE, include_str!("nis.schema")),
    ("openldap.schema", include_str!("openldap.schema")),
    ("memberof.schema", include_str!("memberof.schema")),
    ("monitor.schema", include_str!("monitor.schema")),
];
