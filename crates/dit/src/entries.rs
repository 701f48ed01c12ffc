//! Virtual entries: entries the server holds in memory and builds from its own state: the
//! root DSE (from what the protocol layer says it supports, `Supported`) and cn=Subschema.

use schema::{Dn, NormDn, Schema};
use store::{Attr, Entry};

/// An attribute of a virtual entry (`None` when the schema lacks the type).
pub fn attr(schema: &Schema, name: &str, values: &[&[u8]]) -> Option<Attr> {
    let ty = schema.attr_by_name(name)?;
    Attr::new(
        schema,
        ty,
        "",
        values.iter().map(|v| Box::<[u8]>::from(*v)).collect(),
    )
    .ok()
}

/// An entry served from memory, not stored (root DSE, cn=Subschema).
pub fn virtual_entry(dn: &str, ndn: NormDn, attrs: Vec<Option<Attr>>) -> Entry {
    let attrs: Vec<Attr> = attrs.into_iter().flatten().collect();
    Entry::new(0, None, dn, &ndn, &attrs)
}

/// What the root DSE lists: the naming contexts and what the protocol layer supports.
pub struct Supported<'a> {
    pub naming_contexts: &'a [String],
    pub controls: &'a [&'a str],
    pub extensions: &'a [&'a str],
    pub sasl_mechanisms: &'a [&'a str],
    pub features: &'a [&'a str],
    /// `vendorVersion`.
    pub version: &'a str,
}

/// The root DSE (RFC 4512 §5.1) listing `supported`.
pub fn root_dse(schema: &Schema, supported: &Supported<'_>) -> Entry {
    let bytes = |v: &[&str]| -> Vec<Box<[u8]>> {
        v.iter().map(|s| Box::<[u8]>::from(s.as_bytes())).collect()
    };
    let list = |name: &str, values: Vec<Box<[u8]>>| -> Option<Attr> {
        let refs: Vec<&[u8]> = values.iter().map(|v| &**v).collect();
        attr(schema, name, &refs)
    };
    let contexts: Vec<&str> = supported
        .naming_contexts
        .iter()
        .map(String::as_str)
        .collect();
    virtual_entry(
        "",
        NormDn {
            norm: String::new(),
            rdns: Vec::new(),
        },
        vec![
            attr(schema, "objectClass", &[b"top"]),
            list("namingContexts", bytes(&contexts)),
            attr(schema, "supportedLDAPVersion", &[b"3"]),
            list("supportedControl", bytes(supported.controls)),
            list("supportedExtension", bytes(supported.extensions)),
            list("supportedSASLMechanisms", bytes(supported.sasl_mechanisms)),
            list("supportedFeatures", bytes(supported.features)),
            attr(schema, "subschemaSubentry", &[b"cn=Subschema"]),
            attr(schema, "vendorName", &[b"Linden"]),
            attr(schema, "vendorVersion", &[supported.version.as_bytes()]),
        ],
    )
}

/// The subschema subentry (`cn=Subschema`) publishing `schema`.
pub fn subschema_entry(schema: &Schema) -> Entry {
    let sub = schema.subschema();
    let bytes = |v: &Vec<String>| -> Vec<Box<[u8]>> {
        v.iter().map(|s| Box::<[u8]>::from(s.as_bytes())).collect()
    };
    let big = |name: &str, v: &Vec<String>| -> Option<Attr> {
        let ty = schema.attr_by_name(name)?;
        // Published as-is: these values are the schema's own definitions, not user input.
        let values = bytes(v);
        let norm = values.clone();
        Some(Attr {
            ty,
            options: "".into(),
            values,
            norm,
        })
    };
    let ndn = Dn::parse("cn=Subschema")
        .ok()
        .and_then(|d| d.normalize(schema).ok())
        .unwrap_or(NormDn {
            norm: "cn=subschema".into(),
            rdns: Vec::new(),
        });
    virtual_entry(
        "cn=Subschema",
        ndn,
        vec![
            attr(
                schema,
                "objectClass",
                &[b"top", b"subentry", b"subschema", b"extensibleObject"],
            )
            .or_else(|| attr(schema, "objectClass", &[b"top", b"subschema"])),
            attr(schema, "cn", &[b"Subschema"]),
            big("attributeTypes", &sub.attribute_types),
            big("objectClasses", &sub.object_classes),
            big("ldapSyntaxes", &sub.ldap_syntaxes),
            big("matchingRules", &sub.matching_rules),
            big("matchingRuleUse", &sub.matching_rule_uses),
        ],
    )
}
