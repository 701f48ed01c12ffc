//! Virtual entries: entries the server holds in memory and builds from its own state
//! (cn=Subschema here; the root DSE is built by the protocol layer with these helpers, since
//! it lists what that layer supports).

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
