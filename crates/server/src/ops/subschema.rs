//! Modify of the subschema subentry (`cn=Subschema`): the administrator extends the schema
//! with `add: attributeTypes` / `add: objectClasses` values in RFC 4512 syntax, as
//! `ldapmodify` sends them (design.md seam 4; `docs/schema.md`).
//!
//! slapd refuses every modify of its subschema subentry and takes schema changes through
//! `cn=config` instead; Linden has no `cn=config`, so it accepts the standard place (RFC 4512
//! §4.2 lets a server allow modifications there), deliberately, for the one kind of change that
//! keeps every stored entry valid: new definitions.
//!
//! Only the administrator; only `add` of these two attributes; only *compatible* extensions
//! (`Schema::extend`: a new OID and names, known superiors, matching rules and syntaxes).
//! The extension is applied by the writer (`Txn::extend_schema`), so it is logged as one
//! schema record, published with its version and usable by the next request; it survives
//! restarts through the log and the snapshots.
//!
//! Result codes: `insufficientAccessRights` (50) for a bound non-administrator and
//! `strongerAuthRequired` (8) for anonymous (as for any denied write); `unwillingToPerform` (53)
//! for delete, replace, increment, or any other attribute; `invalidAttributeSyntax` (21) for a
//! value that is not a well-formed description; `attributeOrValueExists` (20) for a definition
//! already present (the same apart from DESC); `constraintViolation` (19) for one that clashes
//! (its OID or a name taken) or refers to something undefined.

use std::sync::Arc;

use proto::{ModOp, ModifyRequest, ResultCode};
use schema::SchemaErrorKind;

use crate::ops::state::Change;
use crate::state::Shared;
use dit::error::{LdapError, LdapResult};
use dit::identity::Identity;
use dit::overlays::Applied;
use dit::split_description;
use dit::write::denied;

/// Most definitions one modify may add: each is parsed and the schema copied once per request.
pub const MAX_DEFINITIONS: usize = 1024;
/// Longest definition accepted, in bytes.
pub const MAX_DEFINITION_BYTES: usize = 16 * 1024;

/// Whether a request names the subschema subentry. Cheap for every other DN: only a DN
/// mentioning "subschema" (or holding an escape, which could spell it) is parsed.
pub(crate) fn targets(shared: &Shared, raw_dn: &[u8]) -> bool {
    let maybe = raw_dn
        .windows(9)
        .any(|w| w.eq_ignore_ascii_case(b"subschema"))
        || raw_dn.contains(&b'\\');
    maybe
        && shared
            .parse_dn(raw_dn)
            .is_ok_and(|(_, ndn)| ndn.norm == shared.subschema().ndn_str())
}

/// Runs a modify of the subschema subentry: checks it, then hands the extension to the writer.
pub(crate) fn modify(
    _shared: &Arc<Shared>,
    who: &Identity,
    req: &ModifyRequest<'_>,
) -> LdapResult<Change> {
    if !who.is_admin {
        return Err(denied(who, true, "write"));
    }
    let (text, labels) = statements(req)?;
    if text.is_empty() {
        return Ok(Box::new(|_: &mut store::Txn| Ok(Applied::default())));
    }
    Ok(Box::new(move |txn: &mut store::Txn| {
        txn.extend_schema(&text, "cn=Subschema")
            .map(|added| {
                tracing::info!(
                    "schema extended by the administrator: {}",
                    added.trim_end().replace('\n', "; ")
                );
                Applied::default()
            })
            .map_err(|e| {
                let what = labels
                    .get(e.line.saturating_sub(1))
                    .map_or("", String::as_str);
                let code = match e.kind {
                    SchemaErrorKind::Syntax => ResultCode::InvalidAttributeSyntax,
                    SchemaErrorKind::Exists => ResultCode::AttributeOrValueExists,
                    SchemaErrorKind::Conflict => ResultCode::ConstraintViolation,
                };
                LdapError::new(code, format!("{what}: {}", e.message))
            })
    }))
}

/// The request's definitions as `.schema` statements, one a line, and for each line the
/// words that name it in an error ("modify/add: attributeTypes value 2").
fn statements(req: &ModifyRequest<'_>) -> LdapResult<(String, Vec<String>)> {
    let unwilling = |m: String| LdapError::new(ResultCode::UnwillingToPerform, m);
    let mut text = String::new();
    let mut labels = Vec::new();
    for ch in &req.changes {
        let raw = String::from_utf8_lossy(&ch.attr.name);
        let (name, options) = split_description(&raw);
        let keyword = match name.to_ascii_lowercase().as_str() {
            "attributetypes" | "2.5.21.5" => "attributetype",
            "objectclasses" | "2.5.21.6" => "objectclass",
            _ => {
                return Err(unwilling(format!(
                "{raw}: only attributeTypes and objectClasses values can be added to cn=Subschema"
            )))
            }
        };
        if !options.is_empty() {
            return Err(unwilling(format!(
                "{raw}: attribute options are not allowed here"
            )));
        }
        if ch.op != ModOp::Add {
            return Err(unwilling(format!(
                "{name}: schema definitions can only be added; deleting or replacing one could invalidate stored entries"
            )));
        }
        if ch.attr.values.is_empty() {
            return Err(LdapError::new(
                ResultCode::ProtocolError,
                format!("modify/add: {name}: no values given"),
            ));
        }
        for (i, v) in ch.attr.values.iter().enumerate() {
            let label = format!("modify/add: {name} value {}", i + 1);
            if labels.len() >= MAX_DEFINITIONS {
                return Err(unwilling(format!(
                    "at most {MAX_DEFINITIONS} definitions can be added in one modify"
                )));
            }
            if v.len() > MAX_DEFINITION_BYTES {
                return Err(LdapError::new(
                    ResultCode::ConstraintViolation,
                    format!("{label}: longer than {MAX_DEFINITION_BYTES} bytes"),
                ));
            }
            let def = std::str::from_utf8(v)
                .ok()
                .filter(|s| !s.chars().any(char::is_control))
                .ok_or_else(|| {
                    LdapError::new(
                        ResultCode::InvalidAttributeSyntax,
                        format!("{label}: not a UTF-8 description without control characters"),
                    )
                })?;
            let def = def.trim();
            if !def.starts_with('(') {
                return Err(LdapError::new(
                    ResultCode::InvalidAttributeSyntax,
                    format!("{label}: a description starts with '('"),
                ));
            }
            text.push_str(keyword);
            text.push(' ');
            text.push_str(def);
            text.push('\n');
            labels.push(label);
        }
    }
    Ok((text, labels))
}
