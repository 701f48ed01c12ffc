//! Audit records: who changed what, when and from where, as a comment line and an LDIF change
//! record (the audit log, `logs`, writes them). A change's record is made from what it applied
//! (`applied_change`: adds, modifies — Password Modify is one, of userPassword — and deletes);
//! renames and schema changes from their request. userPassword values never appear.

use std::fmt::Write as _;
use std::io::Write as _;
use std::net::SocketAddr;
use std::time::SystemTime;

use crate::logs::{quote, timestamp};
use crate::ops::state::Audit;
use crate::reply::Conn;
use dit::identity::Identity;
use dit::overlays::Applied;

/// An audit record: a comment line (when, who, from where) and the LDIF change record.
pub fn audit_record(
    conn: u64,
    client: SocketAddr,
    who: &str,
    dn: &str,
    change: &ldif::ChangeRecord,
) -> Vec<u8> {
    let mut head = String::with_capacity(160);
    head.push_str("# ");
    timestamp(&mut head, SystemTime::now());
    let _ = write!(head, " conn={conn} client={client} by=");
    quote(&mut head, who.as_bytes());
    head.push('\n');
    let mut w = ldif::Writer::new(head.into_bytes());
    if w.write_change(dn, change, &[]).is_err() {
        // Only attribute names the schema accepted reach here; a name the writer refuses
        // still leaves a trace of the change.
        let mut v = w.into_inner();
        let _ = writeln!(v, "# (change to {dn:?} could not be written as LDIF)\n");
        return v;
    }
    w.into_inner()
}

/// Writes the audit records of a committed change: the one made from the request, or one per
/// entry it changed (a subtree delete's subordinates first).
pub(crate) fn write_audit(conn: &Conn, who: &Identity, audit: Audit, applied: &Applied) {
    let record = |a: &Applied| {
        applied_change(&conn.shared, a)
            .map(|(dn, change)| audit_record(conn.id, conn.peer, &who.dn, &dn, &change))
    };
    match audit {
        Audit::Off => {}
        Audit::Record(r) => conn.shared.audit_log.write(r),
        Audit::Applied => {
            for a in applied.also.iter().chain(std::iter::once(applied)) {
                if let Some(r) = record(a) {
                    conn.shared.audit_log.write(r);
                }
            }
        }
    }
}

/// userPassword values never reach the audit log: they are replaced by this marker.
pub const REDACTED: &[u8] = b"{REDACTED}";

/// Whether an attribute description names userPassword (whose values are never logged).
fn is_password(shared: &crate::state::Shared, desc: &[u8]) -> bool {
    dit::resolve_attr(&shared.schema(), desc)
        .is_ok_and(|(ty, _)| shared.schema().is_subtype(ty, shared.known.user_password))
}

fn values(
    shared: &crate::state::Shared,
    desc: &[u8],
    vals: &[std::borrow::Cow<'_, [u8]>],
) -> Vec<Vec<u8>> {
    if is_password(shared, desc) {
        vals.iter().map(|_| REDACTED.to_vec()).collect()
    } else {
        vals.iter().map(|v| v.to_vec()).collect()
    }
}

/// The change record of what a change applied (`overlays::Applied`): an add is the whole new
/// entry, server-kept attributes included; a modify replaces or deletes each attribute whose
/// values changed (modify-increment results, stamps), except that the attributes whose value
/// changes the modify listed (`Applied::values`: a group's members) get the values deleted
/// and added, not all their values again; a delete is a delete. `None` for a rename, whose
/// request says more than its result. The entry's DN comes with it.
pub fn applied_change(
    shared: &crate::state::Shared,
    applied: &dit::overlays::Applied,
) -> Option<(String, ldif::ChangeRecord)> {
    use std::collections::BTreeMap;
    let schema = shared.schema();
    let listed = applied.values.as_deref().unwrap_or_default();
    let secret = |ty: schema::AttrId| schema.is_subtype(ty, shared.known.user_password);
    let shown = |secret: bool, v: &[u8]| {
        if secret {
            REDACTED.to_vec()
        } else {
            v.to_vec()
        }
    };
    // Keyed (operational?, description): the client's attributes come first, the server's
    // stamps after them, as in slapd's audit log. Attributes listed are left out.
    let described = |e: &store::Entry| -> BTreeMap<(bool, String), Vec<Vec<u8>>> {
        let mut m = BTreeMap::new();
        for a in e.attrs() {
            if listed
                .iter()
                .any(|c| c.ty == a.ty && store::same_options(&c.options, a.options))
            {
                continue;
            }
            let ty = schema.attr(a.ty);
            let name = (ty.is_operational(), format!("{}{}", ty.name(), a.options));
            let secret = secret(a.ty);
            m.insert(name, a.values().map(|v| shown(secret, v)).collect());
        }
        m
    };
    match (&applied.before, &applied.after) {
        (None, Some(a)) => {
            let attrs = described(a)
                .into_iter()
                .flat_map(|((_, n), vs)| vs.into_iter().map(move |v| (n.clone(), v)))
                .collect();
            Some((a.dn().to_string(), ldif::ChangeRecord::Add(attrs)))
        }
        (Some(b), None) => Some((b.dn().to_string(), ldif::ChangeRecord::Delete)),
        (Some(b), Some(a)) if b.ndn_str() == a.ndn_str() => {
            let (old, new) = (described(b), described(a));
            let names: std::collections::BTreeSet<&(bool, String)> =
                old.keys().chain(new.keys()).collect();
            let mut mods = Vec::new();
            for c in listed {
                let secret = secret(c.ty);
                let attr = format!("{}{}", schema.attr(c.ty).name(), c.options);
                for (op, values) in [
                    (ldif::ModOp::Delete, &c.removed),
                    (ldif::ModOp::Add, &c.added),
                ] {
                    if !values.is_empty() {
                        mods.push(ldif::Mod {
                            op,
                            attr: attr.clone(),
                            values: values.iter().map(|(raw, _)| shown(secret, raw)).collect(),
                        });
                    }
                }
            }
            for name in names {
                let (op, values) = match (old.get(name), new.get(name)) {
                    (Some(_), None) => (ldif::ModOp::Delete, Vec::new()),
                    (None, Some(v)) => (ldif::ModOp::Add, v.clone()),
                    (Some(o), Some(v)) if o != v => (ldif::ModOp::Replace, v.clone()),
                    _ => continue,
                };
                mods.push(ldif::Mod {
                    op,
                    attr: name.1.clone(),
                    values,
                });
            }
            Some((a.dn().to_string(), ldif::ChangeRecord::Modify(mods)))
        }
        _ => None,
    }
}

/// The change record of a modify request.
pub fn modify_change(
    shared: &crate::state::Shared,
    req: &proto::ModifyRequest<'_>,
) -> ldif::ChangeRecord {
    ldif::ChangeRecord::Modify(
        req.changes
            .iter()
            .map(|c| ldif::Mod {
                op: match c.op {
                    proto::ModOp::Add => ldif::ModOp::Add,
                    proto::ModOp::Delete => ldif::ModOp::Delete,
                    proto::ModOp::Replace => ldif::ModOp::Replace,
                    proto::ModOp::Increment => ldif::ModOp::Increment,
                },
                attr: String::from_utf8_lossy(&c.attr.name).into_owned(),
                values: values(shared, &c.attr.name, &c.attr.values),
            })
            .collect(),
    )
}

/// The change record of a modify DN request.
pub fn modrdn_change(req: &proto::ModifyDnRequest<'_>) -> ldif::ChangeRecord {
    ldif::ChangeRecord::ModRdn {
        new_rdn: String::from_utf8_lossy(&req.new_rdn).into_owned(),
        delete_old_rdn: req.delete_old_rdn,
        new_superior: req
            .new_superior
            .as_ref()
            .map(|s| String::from_utf8_lossy(s).into_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn audit_record_is_ldif_with_a_comment() {
        let r = audit_record(
            7,
            "127.0.0.1:5000".parse().expect("addr"),
            "cn=admin,dc=example,dc=com",
            "uid=a,dc=example,dc=com",
            &ldif::ChangeRecord::Delete,
        );
        let s = String::from_utf8(r).expect("utf-8");
        let lines: Vec<&str> = s.lines().collect();
        assert!(lines[0].starts_with("# 20"), "{s}");
        assert!(
            lines[0].ends_with(r#"conn=7 client=127.0.0.1:5000 by="cn=admin,dc=example,dc=com""#),
            "{s}"
        );
        assert_eq!(
            &lines[1..],
            ["dn: uid=a,dc=example,dc=com", "changetype: delete", ""],
            "a record ends with an empty line"
        );
    }
}
