//! Schema bundles: sets of definitions shipped inside the binary and enabled by name
//! (`schemas = ["rfc2307bis", "sudo"]` in the configuration), written for Linden from the
//! public definitions (RFCs, drafts, the projects that own the OIDs). Each is OpenLDAP
//! `.schema` text, so `linden schema show NAME` output also loads into slapd.
//!
//! `nis` (RFC 2307) is part of the built-in schema and listed here so that it can be named,
//! shown and refused next to `rfc2307bis`, which defines the same OIDs differently and takes
//! its place. The others add to the built-in schema, in the order of `bundles()` whatever
//! order the configuration names them in, so that a schema never depends on that order.

use crate::{builtin, Schema, SchemaError};

/// One bundle.
#[derive(Debug)]
pub struct Bundle {
    /// The name the configuration uses.
    pub name: &'static str,
    /// One line for `linden schema list`.
    pub description: &'static str,
    /// Bundles that cannot be enabled together with this one.
    pub conflicts: &'static [&'static str],
    /// Part of the built-in schema: present unless a bundle that replaces it is enabled.
    pub builtin: bool,
    /// The `.schema` text.
    pub text: &'static str,
    /// The built-in file (origin in `builtin::FILES`) this bundle takes the place of.
    replaces: Option<&'static str>,
}

const fn add(name: &'static str, description: &'static str, text: &'static str) -> Bundle {
    Bundle {
        name,
        description,
        conflicts: &[],
        builtin: false,
        text,
        replaces: None,
    }
}

/// In load order.
static BUNDLES: &[Bundle] = &[
    Bundle {
        name: "nis",
        description: "RFC 2307 NIS types (posixAccount, structural posixGroup); built in",
        conflicts: &["rfc2307bis"],
        builtin: true,
        text: include_str!("../builtin/nis.schema"),
        replaces: None,
    },
    Bundle {
        name: "rfc2307bis",
        description:
            "draft-howard-rfc2307bis-02 NIS types (auxiliary posixGroup, groupOfMembers), \
                      in place of nis",
        conflicts: &["nis"],
        builtin: false,
        text: include_str!("rfc2307bis.schema"),
        replaces: Some(builtin::NIS_FILE),
    },
    add(
        "openssh-lpk",
        "SSH public keys on accounts (ldapPublicKey, sshPublicKey)",
        include_str!("openssh-lpk.schema"),
    ),
    add(
        "sudo",
        "sudoers rules in the directory (sudoRole, sudoUser, sudoCommand...)",
        include_str!("sudo.schema"),
    ),
    add(
        "openldap",
        "OpenLDAP's openldap.schema (OpenLDAPperson, OpenLDAPorg, OpenLDAPou...)",
        include_str!("openldap.schema"),
    ),
    add(
        "ppolicy",
        "password policy types as OpenLDAP 2.5's ppolicy (pwdPolicy, pwdAttribute...)",
        include_str!("ppolicy.schema"),
    ),
    add(
        "dyngroup",
        "dynamic groups (groupOfURLs, memberURL) and dgIdentity",
        include_str!("dyngroup.schema"),
    ),
    add(
        "misc",
        "mail routing (inetLocalMailRecipient, mailRoutingAddress) and nisMailAlias",
        include_str!("misc.schema"),
    ),
    add(
        "duaconf",
        "RFC 4876 DUA configuration profiles (DUAConfigProfile)",
        include_str!("duaconf.schema"),
    ),
    add(
        "java",
        "RFC 2713 Java objects (javaContainer, javaSerializedObject...)",
        include_str!("java.schema"),
    ),
    add(
        "corba",
        "RFC 2714 CORBA object references (corbaContainer, corbaObjectReference)",
        include_str!("corba.schema"),
    ),
    add(
        "samba",
        "Samba accounts, groups and domains (sambaSamAccount, sambaGroupMapping...)",
        include_str!("samba.schema"),
    ),
];

/// Every bundle, in load order.
pub fn bundles() -> &'static [Bundle] {
    BUNDLES
}

/// The bundle named `name` (exactly, as the configuration spells it).
pub fn bundle(name: &str) -> Option<&'static Bundle> {
    BUNDLES.iter().find(|b| b.name == name)
}

/// Why a list of bundle names does not give a schema. Each message is one line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BundleError {
    #[error("unknown schema bundle '{name}'; known bundles: {known}")]
    Unknown { name: String, known: String },
    #[error(
        "schema bundles '{first}' and '{second}' cannot be enabled together: they define the \
         same types differently"
    )]
    Conflict { first: String, second: String },
    /// A bundle's text did not load on top of the others: a defect of the bundle, which the
    /// tests load in every combination that matters.
    #[error("schema bundle '{name}': {error}")]
    Load { name: String, error: SchemaError },
}

fn known() -> String {
    BUNDLES
        .iter()
        .map(|b| b.name)
        .collect::<Vec<_>>()
        .join(", ")
}

impl Schema {
    /// The built-in schema with the bundles named in `names` (in any order; repeats are
    /// ignored): a bundle that replaces part of the built-in schema (`rfc2307bis` for `nis`)
    /// takes its place, the others are added in the order of `bundles()`. `with_bundles(&[])`
    /// is `builtin()`. Refused: an unknown name, two bundles that conflict.
    pub fn with_bundles<S: AsRef<str>>(names: &[S]) -> Result<Schema, BundleError> {
        let mut wanted: Vec<&'static Bundle> = Vec::new();
        for name in names {
            let name = name.as_ref();
            let b = bundle(name).ok_or_else(|| BundleError::Unknown {
                name: name.to_string(),
                known: known(),
            })?;
            if !wanted.iter().any(|w| w.name == b.name) {
                wanted.push(b);
            }
        }
        for (i, a) in wanted.iter().enumerate() {
            if let Some(b) = wanted[i + 1..]
                .iter()
                .find(|b| a.conflicts.contains(&b.name))
            {
                return Err(BundleError::Conflict {
                    first: a.name.to_string(),
                    second: b.name.to_string(),
                });
            }
        }
        let replaced: Vec<&str> = wanted.iter().filter_map(|b| b.replaces).collect();
        let mut s = Schema::with_rules();
        for (origin, text) in builtin::FILES {
            if replaced.contains(origin) {
                continue;
            }
            if let Err(e) = s.load_inner(text, origin) {
                unreachable!("built-in schema does not load: {e}");
            }
        }
        for b in BUNDLES {
            if b.builtin || !wanted.iter().any(|w| w.name == b.name) {
                continue;
            }
            let origin = format!("{}.schema", b.name);
            s.load_inner(b.text, &origin)
                .map_err(|error| BundleError::Load {
                    name: b.name.to_string(),
                    error,
                })?;
        }
        s.finish();
        Ok(s)
    }
}

#[cfg(test)]
#[allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed unwrap is a failed test"
)]
mod tests {
    use super::*;
    use crate::ClassKind;

    /// The NAMEs (first name) and OIDs of the definitions in a bundle's text, found by
    /// reading the text independently of the parser.
    fn defined(text: &str) -> Vec<(String, String)> {
        let mut out = Vec::new();
        for line in text.lines() {
            let Some(rest) = line
                .strip_prefix("attributetype ( ")
                .or_else(|| line.strip_prefix("objectclass ( "))
            else {
                continue;
            };
            let mut words = rest.split_whitespace();
            let oid = words.next().unwrap().to_string();
            assert_eq!(words.next(), Some("NAME"), "{line}");
            let name = words.next().unwrap().trim_matches(['(', '\'']).to_string();
            out.push((name, oid));
        }
        out
    }

    #[test]
    fn each_bundle_loads_on_the_builtin_schema_with_its_definitions() {
        for b in bundles() {
            let s = Schema::with_bundles(&[b.name]).unwrap_or_else(|e| panic!("{e}"));
            let defs = defined(b.text);
            assert!(!defs.is_empty(), "{}", b.name);
            for (name, oid) in defs {
                let found = match (s.attr_by_name(&name), s.class_by_name(&name)) {
                    (Some(a), _) => s.attr(a).oid.clone(),
                    (None, Some(c)) => s.class(c).oid.clone(),
                    (None, None) => panic!("{}: {name} not defined", b.name),
                };
                // nis writes its OIDs with `objectidentifier` macros.
                if oid.starts_with(|c: char| c.is_ascii_digit()) {
                    assert_eq!(found, oid, "{}: {name}", b.name);
                }
            }
        }
    }

    #[test]
    fn all_bundles_but_nis_load_together_in_any_order() {
        let mut names: Vec<&str> = bundles()
            .iter()
            .filter(|b| b.name != "nis")
            .map(|b| b.name)
            .collect();
        let a = Schema::with_bundles(&names).unwrap();
        names.reverse();
        let b = Schema::with_bundles(&names).unwrap();
        assert_eq!(a.attr_count(), b.attr_count());
        for (id, at) in a.attrs() {
            assert_eq!(b.attr(id).oid, at.oid);
        }
        assert!(a.class_by_name("sambaSamAccount").is_some());
        assert!(a.class_by_name("groupOfMembers").is_some());
    }

    #[test]
    fn no_bundles_or_nis_is_the_builtin_schema() {
        let builtin = Schema::builtin();
        for names in [&[][..], &["nis"][..], &["nis", "nis"][..]] {
            let s = Schema::with_bundles(names).unwrap();
            assert_eq!(s.attr_count(), builtin.attr_count());
            for (id, at) in builtin.attrs() {
                assert_eq!(s.attr(id).definition, at.definition);
            }
        }
    }

    #[test]
    fn rfc2307bis_replaces_nis() {
        let nis = Schema::builtin();
        let bis = Schema::with_bundles(&["rfc2307bis"]).unwrap();
        let kind = |s: &Schema, c: &str| s.class(s.class_by_name(c).unwrap()).kind;
        assert_eq!(kind(&nis, "posixGroup"), ClassKind::Structural);
        assert_eq!(kind(&bis, "posixGroup"), ClassKind::Auxiliary);
        assert_eq!(kind(&bis, "groupOfMembers"), ClassKind::Structural);
        assert!(nis.class_by_name("groupOfMembers").is_none());
        // Kept from the built-in schema, as slapd keeps them.
        for a in ["uidNumber", "gidNumber"] {
            assert!(bis.attr_by_name(a).is_some(), "{a}");
        }
        // gecos is a Directory String in rfc2307bis, IA5 in RFC 2307.
        let syntax = |s: &Schema| {
            let a = s.attr(s.attr_by_name("gecos").unwrap());
            s.syntax(a.syntax.unwrap()).oid.clone()
        };
        assert_eq!(syntax(&nis), "1.3.6.1.4.1.1466.115.121.1.26");
        assert_eq!(syntax(&bis), "1.3.6.1.4.1.1466.115.121.1.15");
    }

    #[test]
    fn nis_and_rfc2307bis_are_refused_together() {
        for names in [["nis", "rfc2307bis"], ["rfc2307bis", "nis"]] {
            let e = Schema::with_bundles(&names).unwrap_err();
            let msg = e.to_string();
            assert!(matches!(e, BundleError::Conflict { .. }));
            assert!(
                msg.contains("'nis'") && msg.contains("'rfc2307bis'"),
                "{msg}"
            );
            assert!(!msg.contains('\n'));
        }
    }

    #[test]
    fn an_unknown_name_lists_the_known_bundles() {
        let e = Schema::with_bundles(&["sudo", "rfc2307"]).unwrap_err();
        let msg = e.to_string();
        assert!(msg.starts_with("unknown schema bundle 'rfc2307'; known bundles: nis, rfc2307bis"));
        for b in bundles() {
            assert!(msg.contains(b.name), "{msg}");
        }
        assert!(!msg.contains('\n'));
    }

    #[test]
    fn bundle_values_match_by_their_rules() {
        let s = Schema::with_bundles(&["sudo", "openssh-lpk", "ppolicy"]).unwrap();
        let eq = |a: &str, x: &str, y: &str| {
            let id = s.attr_by_name(a).unwrap();
            s.normalize_eq(id, x.as_bytes()).unwrap() == s.normalize_eq(id, y.as_bytes()).unwrap()
        };
        // caseExactIA5Match: sudo user names are case sensitive.
        assert!(!eq("sudoUser", "alice", "Alice"));
        assert!(eq("sudoUser", "alice", "alice"));
        assert!(eq("sudoOrder", "10", "10"));
        let ppolicy_time = s.attr(s.attr_by_name("pwdChangedTime").unwrap());
        assert!(ppolicy_time.is_operational());
        assert!(ppolicy_time.no_user_modification);
    }
}
