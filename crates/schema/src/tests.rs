//! Tests of the public API against the built-in schema.

use std::cmp::Ordering;
use std::time::Instant;

use crate::*;

fn s() -> Schema {
    Schema::builtin()
}

fn id(s: &Schema, name: &str) -> AttrId {
    s.attr_by_name(name)
        .unwrap_or_else(|| panic!("no attribute {name}"))
}

fn key(s: &Schema, attr: &str, v: &str) -> Vec<u8> {
    s.normalize_eq(id(s, attr), v.as_bytes())
        .unwrap_or_else(|e| panic!("{attr}={v}: {e}"))
}

#[test]
fn builtin_loads_fast_and_has_everything() {
    let start = Instant::now();
    let s = s();
    let took = start.elapsed();
    // Generous bound for an unoptimized test build on a shared machine.
    assert!(took.as_millis() < 200, "builtin took {took:?}");
    for a in [
        "objectClass",
        "cn",
        "commonName",
        "2.5.4.3",
        "CN",
        "sn",
        "uid",
        "mail",
        "dc",
        "userPassword",
        "uidNumber",
        "gidNumber",
        "homeDirectory",
        "loginShell",
        "memberUid",
        "createTimestamp",
        "modifyTimestamp",
        "creatorsName",
        "modifiersName",
        "structuralObjectClass",
        "subschemaSubentry",
        "entryDN",
        "entryUUID",
        "hasSubordinates",
        "numSubordinates",
        "namingContexts",
        "supportedLDAPVersion",
        "supportedControl",
        "supportedExtension",
        "supportedFeatures",
        "supportedSASLMechanisms",
        "vendorName",
        "vendorVersion",
        "ref",
        "objectClasses",
        "attributeTypes",
        "ldapSyntaxes",
        "matchingRules",
        "matchingRuleUse",
        "displayName",
        "jpegPhoto",
        "manager",
        "telephoneNumber",
        "member",
        "uniqueMember",
        "shadowLastChange",
    ] {
        assert!(s.attr_by_name(a).is_some(), "missing attribute {a}");
    }
    for c in [
        "top",
        "alias",
        "country",
        "locality",
        "organization",
        "organizationalUnit",
        "person",
        "organizationalPerson",
        "residentialPerson",
        "applicationProcess",
        "groupOfNames",
        "groupOfUniqueNames",
        "device",
        "extensibleObject",
        "subschema",
        "dcObject",
        "uidObject",
        "domain",
        "account",
        "document",
        "room",
        "friendlyCountry",
        "pilotPerson",
        "inetOrgPerson",
        "posixAccount",
        "posixGroup",
        "shadowAccount",
        "referral",
        "2.5.6.6",
        "PERSON",
    ] {
        assert!(s.class_by_name(c).is_some(), "missing class {c}");
    }
    let num = id(&s, "numSubordinates");
    assert_eq!(s.attr(num).oid, "1.3.6.1.4.1.453.16.2.103");
    assert_eq!(s.attr(id(&s, "entryDN")).oid, "1.3.6.1.1.20");
    assert!(s.attr(id(&s, "entryUUID")).is_operational());
    assert!(!s.attr(id(&s, "cn")).is_operational());
    assert_eq!(s.attr(id(&s, "commonName")).name(), "cn");
    // Macro expansion.
    assert_eq!(s.attr(id(&s, "uidNumber")).oid, "1.3.6.1.1.1.1.0");
    assert_eq!(s.attr(id(&s, "mail")).oid, "0.9.2342.19200300.100.1.3");
    assert_eq!(s.attr(id(&s, "mail")).syntax_len, Some(256));
    assert!(s.attr_by_name("nosuch").is_none());
    assert!(s.rule_by_name("caseIgnoreMatch").is_some());
    assert_eq!(
        s.rule_by_name("2.5.13.2"),
        s.rule_by_name("CASEIGNOREMATCH")
    );
}

#[test]
fn schema_is_shareable() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Schema>();
    assert_send_sync::<NormDn>();
    let a = NormDn {
        norm: "cn=a".into(),
        rdns: vec![],
    };
    let b = NormDn {
        norm: "cn=a".into(),
        rdns: vec![vec![(AttrId(1), b"A".to_vec())]],
    };
    let set: std::collections::HashSet<NormDn> = [a, b].into_iter().collect();
    assert_eq!(set.len(), 1);
}

#[test]
fn inheritance_from_sup() {
    let s = s();
    let cn = s.attr(id(&s, "cn"));
    let name = s.attr(id(&s, "name"));
    assert_eq!(cn.sup, Some(id(&s, "name")));
    assert_eq!(cn.equality, name.equality);
    assert_eq!(cn.substr, name.substr);
    assert_eq!(cn.syntax, name.syntax);
    let c = s.attr(id(&s, "c"));
    assert_ne!(c.syntax, name.syntax);
    assert!(c.single_value);
    let member = s.attr(id(&s, "member"));
    assert_eq!(member.equality, s.rule_by_name("distinguishedNameMatch"));
}

#[test]
fn every_builtin_definition_reparses() {
    let s = s();
    let sub = s.subschema();
    assert!(sub.attribute_types.len() > 150);
    assert!(sub.object_classes.len() > 40);
    assert!(sub
        .ldap_syntaxes
        .iter()
        .any(|d| d.contains("Directory String")));
    assert!(sub
        .matching_rules
        .iter()
        .any(|d| d == "( 2.5.13.2 NAME 'caseIgnoreMatch' SYNTAX 1.3.6.1.4.1.1466.115.121.1.15 )"));
    // Every published definition parses again as a bare description into a fresh schema that
    // has only the rules, in definition order.
    let mut fresh = Schema::with_rules();
    let text: String = sub
        .attribute_types
        .iter()
        .chain(sub.object_classes.iter())
        .map(|d| format!("{d}\n"))
        .collect();
    fresh
        .load_schema_text(&text, "published")
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(fresh.subschema().attribute_types, sub.attribute_types);
    assert_eq!(fresh.subschema().object_classes, sub.object_classes);
    let person = s.class(s.class_by_name("person").unwrap_or(ClassId(0)));
    assert_eq!(
        person.definition,
        "( 2.5.6.6 NAME 'person' SUP top STRUCTURAL MUST ( sn $ cn ) MAY ( userPassword $ telephoneNumber $ seeAlso $ description ) )"
    );
    let cn = s.attr(id(&s, "cn"));
    assert_eq!(
        cn.definition,
        "( 2.5.4.3 NAME ( 'cn' 'commonName' ) SUP name )"
    );
    let mail = s.attr(id(&s, "mail"));
    assert_eq!(
        mail.definition,
        "( 0.9.2342.19200300.100.1.3 NAME ( 'mail' 'rfc822Mailbox' ) EQUALITY caseIgnoreIA5Match SUBSTR caseIgnoreIA5SubstringsMatch SYNTAX 1.3.6.1.4.1.1466.115.121.1.26{256} )"
    );
}

#[test]
fn load_schema_text_openldap_form() {
    let mut s = s();
    let text = r#"# a comment
objectidentifier myOID 1.3.6.1.4.1.99999
objectidentifier myAttrs myOID:1

attributetype ( myAttrs:1 NAME 'fooAttr'
	DESC 'it\27s'
# comment inside
        EQUALITY caseIgnoreMatch
        SYNTAX 1.3.6.1.4.1.1466.115.121.1.15 X-ORIGIN 'test' )
attributetype ( myAttrs:2 NAME 'barAttr' SUP fooAttr )
objectclass ( myOID:2.1 NAME 'fooObject' SUP top AUXILIARY MAY ( fooAttr $ barAttr ) )
( 1.3.6.1.4.1.99999.3 NAME 'bareAttr' SYNTAX 1.3.6.1.4.1.1466.115.121.1.26 )
( 1.3.6.1.4.1.99999.4 NAME 'bareClass' SUP top STRUCTURAL MUST bareAttr )
ldapsyntax ( 1.3.6.1.4.1.99999.6 DESC 'a syntax of its own' )
attributetypes: ( 1.3.6.1.4.1.99999.5 NAME 'ownSyntaxAttr' SYNTAX 1.3.6.1.4.1.99999.6 )
attributetype ( 1.3.6.1.4.1.99999.7 NAME 'protoInfo' SYNTAX 1.3.6.1.4.1.1466.115.121.1.42 )
"#;
    s.load_schema_text(text, "test.schema")
        .unwrap_or_else(|e| panic!("{e}"));
    let foo = id(&s, "fooAttr");
    assert_eq!(s.attr(foo).oid, "1.3.6.1.4.1.99999.1.1");
    assert_eq!(s.attr(foo).desc.as_deref(), Some("it's"));
    let bar = id(&s, "barAttr");
    assert_eq!(s.attr(bar).equality, s.rule_by_name("caseIgnoreMatch"));
    assert!(s.is_subtype(bar, foo));
    assert_eq!(s.subtypes(foo), &[foo, bar]);
    let c = s.class_by_name("fooObject").unwrap_or(ClassId(0));
    assert_eq!(s.class(c).oid, "1.3.6.1.4.1.99999.2.1");
    assert_eq!(s.class(c).kind, ClassKind::Auxiliary);
    assert!(s.attr_by_name("bareAttr").is_some());
    assert_eq!(
        s.class(s.class_by_name("bareClass").unwrap_or(ClassId(0)))
            .kind,
        ClassKind::Structural
    );
    // A syntax defined by an `ldapsyntax` statement, and one of slapd's that Linden does not
    // check, accept any value.
    let u = id(&s, "ownSyntaxAttr");
    assert!(s.validate(u, b"\xff anything").is_ok());
    assert!(s.attr_by_name("protoInfo").is_some());
}

#[test]
fn load_errors_name_origin_and_line() {
    let mut s = s();
    let before = s.attrs().count();
    let text = "attributetype ( 1.2.3.4 NAME 'okAttr' SUP name )\n\n# c\nattributetype ( 1.2.3.5 NAME 'badAttr'\n  EQUALITY noSuchMatch\n  SYNTAX 1.3.6.1.4.1.1466.115.121.1.15 )\n";
    let e = s
        .load_schema_text(text, "my.schema")
        .err()
        .unwrap_or_else(|| panic!("should fail"));
    assert_eq!(e.origin, "my.schema");
    assert_eq!(e.line, 5, "{e}");
    assert!(e.message.contains("noSuchMatch"), "{e}");
    assert!(e.to_string().starts_with("my.schema:5: "));
    // All or nothing.
    assert_eq!(s.attrs().count(), before);
    assert!(s.attr_by_name("okAttr").is_none());

    let cases: &[(&str, usize)] = &[
        ("attributetype ( 1.2.3.4 NAME 'x' SUP name\n", 1),
        ("\nobjectclass ( 1.2.3.4 NAME 'x' MUST nosuch )", 2),
        ("attributetype ( 1.2.3.4 NAME 'cn' SUP name )", 1),
        ("attributetype ( foo:1 NAME 'x' SUP name )", 1),
        ("attributetype ( 1.2.3.4 NAME 'x' )", 1),
        ("attributetype ( 1.2.3.4 NAME 'x' SUP name BOGUS )", 1),
        ("frobnicate ( 1.2.3 )", 1),
        ("attributetype ( 1.2.3.4 NAME 'x\n SUP name )", 1),
        ("attributetype ( 1.2.3.4 NAME 'x' SUP name ) trailing", 1),
        ("attributetype ( 1.2.3.4 NAME 'x' SUP name USAGE nope )", 1),
        ("objectidentifier onlyname", 1),
        ("attributetype ( 1.2.3.4 NAME 'x' EQUALITY caseIgnoreSubstringsMatch SYNTAX 1.3.6.1.4.1.1466.115.121.1.15 )", 1),
        ("# x\n# y\n\nobjectclass ( 1.2.3.9 NAME 'y'\n\tSUP top\n\tMAY ( cn $ sn $\n\t\tnosuch ) )", 6),        // Strict as slapd: an unknown syntax, matching rule, superior type or class, or
        // MUST/MAY type stops the load at its line.
        ("# c\nattributetype ( 1.2.3.4 NAME 'x'\n\tSYNTAX 1.2.3.4.5 )", 3),
        ("attributetype ( 1.2.3.4 NAME 'x'\n\tSYNTAX 1.3.6.1.4.1.1466.115.121.1.15{32} )\nattributetype ( 1.2.3.5 NAME 'y' SYNTAX 1.3.6.1.4.1.1466.115.121.1.99{32} )", 3),
        ("attributetype ( 1.2.3.4 NAME 'x'\n\tSUP noSuchType )", 2),
        ("attributetype ( 1.2.3.4 NAME 'x'\n ORDERING noSuchOrderingMatch SYNTAX 1.3.6.1.4.1.1466.115.121.1.27 )", 2),
        ("objectclass ( 1.2.3.4 NAME 'x'\n SUP noSuchClass AUXILIARY )", 2),
    ];
    for (text, line) in cases {
        match s.load_schema_text(text, "t") {
            Ok(()) => panic!("{text:?} should fail"),
            Err(e) => assert_eq!(e.line, *line, "{text:?}: {e}"),
        }
    }
}

#[test]
fn subtypes_of_name() {
    let s = s();
    let name = id(&s, "name");
    let subs = s.subtypes(name);
    assert_eq!(subs.first(), Some(&name));
    for n in [
        "cn",
        "sn",
        "givenName",
        "ou",
        "o",
        "c",
        "l",
        "st",
        "title",
        "initials",
        "generationQualifier",
    ] {
        assert!(subs.contains(&id(&s, n)), "{n} is a subtype of name");
        assert!(s.is_subtype(id(&s, n), name));
    }
    assert!(!subs.contains(&id(&s, "description")));
    assert!(s.is_subtype(name, name));
    assert!(!s.is_subtype(name, id(&s, "cn")));
    assert_eq!(s.subtypes(id(&s, "description")), &[id(&s, "description")]);
    let dn = id(&s, "distinguishedName");
    assert!(s.subtypes(dn).contains(&id(&s, "member")));
}

#[test]
fn class_closure_includes_superclasses() {
    let s = s();
    let inet = s.class_by_name("inetOrgPerson").unwrap_or(ClassId(0));
    let closure = s.class_closure(&[inet]);
    let names: Vec<&str> = closure
        .iter()
        .map(|c| s.class(*c).names[0].as_str())
        .collect();
    assert_eq!(
        names,
        vec!["inetOrgPerson", "organizationalPerson", "person", "top"]
    );
}

#[test]
fn syntax_validation() {
    let s = s();
    let ok = |a: &str, v: &[u8]| s.validate(id(&s, a), v).is_ok();
    assert!(ok("cn", "Jöhn".as_bytes()));
    assert!(!ok("cn", b""));
    assert!(!ok("cn", b"\xff\xfe"));
    assert!(ok("mail", b"a@example.com"));
    assert!(!ok("mail", "ä@x".as_bytes()));
    assert!(ok("uidNumber", b"1000"));
    assert!(ok("uidNumber", b"-5"));
    assert!(!ok("uidNumber", b"abc"));
    assert!(!ok("uidNumber", b""));
    assert_eq!(
        s.validate(id(&s, "uidNumber"), b"x").err().map(|e| e.0),
        Some("uidNumber: value #0 invalid per syntax".to_string())
    );
    assert!(ok("hasSubordinates", b"TRUE"));
    assert!(ok("hasSubordinates", b"FALSE"));
    assert!(!ok("hasSubordinates", b"true"));
    assert!(ok("member", b"cn=a,dc=example,dc=com"));
    assert!(ok("member", b""));
    assert!(!ok("member", b"not a dn"));
    assert!(ok("uniqueMember", b"cn=a,dc=x#'0101'B"));
    assert!(ok("createTimestamp", b"20240101120000Z"));
    assert!(ok("createTimestamp", b"20240101120000.123+0130"));
    assert!(!ok("createTimestamp", b"2024-01-01"));
    assert!(ok("telephoneNumber", b"+1 555 123-4567"));
    assert!(!ok("telephoneNumber", b"555@"));
    assert!(ok("userPassword", b"\x00\xff"));
    assert!(ok("objectClass", b"person"));
    assert!(ok("objectClass", b"2.5.6.6"));
    assert!(!ok("objectClass", b"2..5"));
    assert!(!ok("objectClass", b"-x"));
    assert!(ok("c", b"DE"));
    assert!(!ok("c", b"DEU"));
    assert!(ok("x121Address", b"123 456"));
    assert!(!ok("x121Address", b"12a"));
    assert!(ok("postalAddress", b"1 Main St$Town"));
    assert!(!ok("postalAddress", b"a$$b"));
    assert!(ok("x500UniqueIdentifier", b"'0101'B"));
    assert!(!ok("x500UniqueIdentifier", b"'012'B"));
    assert!(ok("destinationIndicator", b"ABC 12"));
    assert!(!ok("destinationIndicator", b"a_b"));
    assert!(ok("entryUUID", b"597ae2f6-16a6-1027-98f4-abcdefABCDEF"));
    assert!(!ok("entryUUID", b"597ae2f6"));
    assert!(ok("jpegPhoto", b"\xff\xd8"));
    assert!(ok("nisNetgroupTriple", b"(host,user,domain)"));
    assert!(ok("attributeTypes", b"( 1.2.3 NAME 'x' )"));
}

#[test]
fn case_ignore_and_exact() {
    let s = s();
    assert_eq!(key(&s, "cn", "  John   SMITH "), b"john smith");
    assert_eq!(key(&s, "cn", "ÄÖÜ"), "äöü".as_bytes());
    assert_eq!(
        key(&s, "cn", "John Smith"),
        key(&s, "commonName", "john  smith")
    );
    assert_ne!(key(&s, "cn", "John Smith"), key(&s, "cn", "JohnSmith"));
    assert_eq!(key(&s, "labeledURI", "  http://X  y "), b"http://X y");
    assert!(s.normalize_eq(id(&s, "cn"), b"\xff").is_err());
    // IA5
    assert_eq!(key(&s, "mail", " Alice@Example.COM"), b"alice@example.com");
    assert_eq!(key(&s, "homeDirectory", "/home/Alice"), b"/home/Alice");
    assert!(s.normalize_eq(id(&s, "mail"), "ä".as_bytes()).is_err());
    assert_eq!(key(&s, "dc", "Example"), b"example");
    // Ignorable-only values keep a key that is itself a valid value.
    assert_eq!(key(&s, "cn", "\u{34F}"), b" ");
    let n = Dn::parse("cn=\u{34F}")
        .and_then(|d| d.normalize(&s))
        .map(|n| n.norm);
    assert_eq!(n.as_deref(), Ok("cn=\\ "));
    assert_eq!(
        Dn::parse("cn=\\ ")
            .and_then(|d| d.normalize(&s))
            .map(|n| n.norm)
            .as_deref(),
        Ok("cn=\\ ")
    );
}

#[test]
fn other_equality_rules() {
    let s = s();
    // integerMatch
    assert_eq!(key(&s, "uidNumber", "0042"), b"42");
    assert_eq!(key(&s, "uidNumber", "-0"), b"0");
    assert_eq!(key(&s, "uidNumber", "-17"), b"-17");
    assert!(s.normalize_eq(id(&s, "uidNumber"), b"4 2").is_err());
    // numericStringMatch
    assert_eq!(key(&s, "x121Address", "12 34 5"), b"12345");
    // telephoneNumberMatch
    assert_eq!(
        key(&s, "telephoneNumber", "+1 555-123 4567"),
        b"+15551234567"
    );
    assert_eq!(
        key(&s, "telephoneNumber", "+1 555 1234567"),
        key(&s, "telephoneNumber", "+1-555-1234567")
    );
    // octetStringMatch
    assert_eq!(key(&s, "userPassword", " Secret "), b" Secret ");
    // booleanMatch
    assert_eq!(key(&s, "hasSubordinates", "true"), b"TRUE");
    assert_eq!(key(&s, "hasSubordinates", "FALSE"), b"FALSE");
    assert!(s.normalize_eq(id(&s, "hasSubordinates"), b"yes").is_err());
    // objectIdentifierMatch: names and OIDs of classes give the same key.
    assert_eq!(
        key(&s, "objectClass", "Person"),
        key(&s, "objectClass", "2.5.6.6")
    );
    assert_eq!(key(&s, "objectClass", "person"), b"2.5.6.6");
    assert_eq!(
        key(&s, "objectClass", "inetorgperson"),
        key(&s, "objectClass", "inetOrgPerson")
    );
    assert_eq!(key(&s, "objectClass", "unknownThing"), b"unknownthing");
    assert_eq!(
        key(&s, "supportedFeatures", "1.3.6.1.4.1.4203.1.5.1"),
        b"1.3.6.1.4.1.4203.1.5.1"
    );
    assert!(s
        .normalize_eq(id(&s, "objectClass"), b"not valid!")
        .is_err());
    // distinguishedNameMatch
    assert_eq!(
        key(&s, "member", "UID=Alice , OU=People,dc=Example,DC=com"),
        b"uid=alice,ou=people,dc=example,dc=com"
    );
    assert!(s.normalize_eq(id(&s, "member"), b"nosuchattr=x").is_err());
    // uniqueMemberMatch
    assert_eq!(
        key(&s, "uniqueMember", "CN=A,DC=x#'01'B"),
        b"cn=a,dc=x#'01'B"
    );
    assert_eq!(key(&s, "uniqueMember", "CN=A,DC=x"), b"cn=a,dc=x");
    // generalizedTimeMatch
    assert_eq!(
        key(&s, "createTimestamp", "20240101133000+0130"),
        key(&s, "createTimestamp", "20240101120000Z")
    );
    assert_eq!(
        key(&s, "createTimestamp", "202401011200Z"),
        b"20240101120000Z"
    );
    // caseIgnoreListMatch
    assert_eq!(
        key(&s, "postalAddress", "1 Main  St$ TOWN "),
        b"1 main st$town"
    );
    // first component rules
    assert_eq!(
        key(&s, "objectClasses", "( 2.5.6.6 NAME 'person' )"),
        key(&s, "objectClasses", "2.5.6.6")
    );
    assert_eq!(key(&s, "dITStructureRules", "( 007 NAME 'x' )"), b"7");
    // UUID
    assert_eq!(
        key(&s, "entryUUID", "597AE2F6-16A6-1027-98F4-ABCDEF012345"),
        b"597ae2f6-16a6-1027-98f4-abcdef012345"
    );
    // no equality rule: raw bytes
    let fax = id(&s, "facsimileTelephoneNumber");
    assert_eq!(s.attr(fax).equality, None);
    assert_eq!(s.normalize_eq(fax, b" X ").ok(), Some(b" X ".to_vec()));
    // normalize_with
    let r = s.rule_by_name("caseIgnoreMatch").unwrap_or(RuleId(0));
    assert_eq!(s.normalize_with(r, b" A  B ").ok(), Some(b"a b".to_vec()));
}

#[test]
fn ordering_rules() {
    let s = s();
    let cmp = |a: &str, x: &str, y: &str| s.compare_ord(id(&s, a), x.as_bytes(), y.as_bytes());
    assert_eq!(cmp("uidNumber", "9", "10"), Some(Ordering::Less));
    assert_eq!(cmp("uidNumber", "-10", "-9"), Some(Ordering::Less));
    assert_eq!(cmp("uidNumber", "-1", "0"), Some(Ordering::Less));
    assert_eq!(cmp("uidNumber", "007", "7"), Some(Ordering::Equal));
    assert_eq!(
        cmp("uidNumber", "123456789012345678901234567890", "99"),
        Some(Ordering::Greater)
    );
    assert_eq!(cmp("uidNumber", "x", "1"), None);
    assert_eq!(
        cmp("createTimestamp", "20240101120000Z", "20240101130000+0200"),
        Some(Ordering::Greater)
    );
    assert_eq!(
        cmp("createTimestamp", "20240101120000Z", "20240101120000.1Z"),
        Some(Ordering::Less)
    );
    assert_eq!(cmp("dnQualifier", "ABC", "abd"), Some(Ordering::Less));
    assert_eq!(cmp("dnQualifier", "ABC", "abc"), Some(Ordering::Equal));
    assert_eq!(cmp("cn", "a", "b"), None, "cn has no ORDERING rule");
    assert_eq!(
        cmp(
            "entryUUID",
            "00000000-0000-0000-0000-00000000000A",
            "00000000-0000-0000-0000-00000000000b"
        ),
        Some(Ordering::Less)
    );
    let r = |n: &str| s.rule_by_name(n).unwrap_or(RuleId(0));
    assert_eq!(
        s.compare_with(r("caseExactOrderingMatch"), b"B", b"a"),
        Some(Ordering::Less)
    );
    assert_eq!(
        s.compare_with(r("numericStringOrderingMatch"), b"1 2", b"13"),
        Some(Ordering::Less)
    );
    assert_eq!(
        s.compare_with(r("octetStringOrderingMatch"), b"\x01", b"\x00\xff"),
        Some(Ordering::Greater)
    );
}

#[test]
fn substring_rules() {
    let s = s();
    let sub = |a: &str, v: &str, i: Option<&str>, any: &[&str], f: Option<&str>| {
        let any: Vec<&[u8]> = any.iter().map(|x| x.as_bytes()).collect();
        s.substrings_match(
            id(&s, a),
            v.as_bytes(),
            i.map(str::as_bytes),
            &any,
            f.map(str::as_bytes),
        )
    };
    assert_eq!(
        sub("cn", "John  Smith", Some("JOHN"), &[], None),
        Some(true)
    );
    assert_eq!(
        sub("cn", "John Smith", Some("john "), &[], Some("smith")),
        Some(true)
    );
    assert_eq!(sub("cn", "John Smith", None, &["n s"], None), Some(true));
    assert_eq!(
        sub("cn", "John Smith", Some("Smith"), &[], None),
        Some(false)
    );
    assert_eq!(
        sub("cn", "abcabc", Some("abc"), &["abc"], Some("abc")),
        Some(false)
    );
    assert_eq!(
        sub("cn", "abcXabcYabc", Some("abc"), &["abc"], Some("abc")),
        Some(true)
    );
    assert_eq!(sub("cn", "ab", Some("a"), &[], Some("b")), Some(true));
    assert_eq!(sub("cn", "a", Some("a"), &[], Some("a")), Some(false));
    assert_eq!(
        sub("mail", "Alice@Example.com", None, &["@EXAMPLE."], None),
        Some(true)
    );
    assert_eq!(
        sub("memberUid", "Alice", Some("al"), &[], None),
        Some(false)
    );
    assert_eq!(sub("memberUid", "Alice", Some("Al"), &[], None), Some(true));
    assert_eq!(
        sub("telephoneNumber", "+1 555-123", None, &["5551"], None),
        Some(true)
    );
    assert_eq!(sub("x121Address", "12 34", None, &["23"], None), Some(true));
    assert_eq!(
        sub(
            "postalAddress",
            "1 Main St$Town",
            None,
            &["main st$t"],
            None
        ),
        Some(true)
    );
    assert_eq!(
        sub("uidNumber", "12", Some("1"), &[], None),
        None,
        "no SUBSTR rule"
    );
    assert_eq!(sub("uid", "ÄBC", Some("ä"), &[], None), Some(true));
}

fn norm(s: &Schema, dn: &str) -> Result<NormDn, DnError> {
    Dn::parse(dn)?.normalize(s)
}

#[test]
fn dn_normalize() {
    let s = s();
    let a = norm(&s, "UID=Alice , OU=People,dc=Example,DC=com").unwrap_or_else(|e| panic!("{e}"));
    let b = norm(&s, "uid=alice,ou=people,dc=example,dc=com").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(a.norm, "uid=alice,ou=people,dc=example,dc=com");
    assert_eq!(a, b);
    assert_eq!(a.rdns[0], vec![(id(&s, "uid"), b"Alice".to_vec())]);
    // Names map to the canonical name, OIDs too.
    let c = norm(&s, "commonName=X,2.5.4.10=Org").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(c.norm, "cn=x,o=org");
    // Multi-valued RDNs are sorted.
    let m1 = norm(&s, "uid=b+cn=A,dc=x").unwrap_or_else(|e| panic!("{e}"));
    let m2 = norm(&s, "CN=a + UID=B,dc=x").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(m1.norm, "cn=a+uid=b,dc=x");
    assert_eq!(m1, m2);
    // Escaped characters survive normalization and stay escaped.
    let e = norm(&s, "cn=Smith\\, John,dc=x").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(e.norm, "cn=smith\\, john,dc=x");
    assert_eq!(e.parent().map(|p| p.norm), Some("dc=x".to_string()));
    // Hex-encoded values equal their string form.
    assert_eq!(norm(&s, "cn=#04024869").map(|n| n.norm), Ok("cn=hi".into()));
    // Errors.
    assert!(norm(&s, "nosuch=x").is_err());
    assert!(norm(&s, "uidNumber=abc").is_err());
    assert!(
        norm(&s, "cn=").is_err(),
        "Directory String values are not empty"
    );
    assert!(
        norm(&s, "c=DEU").is_err(),
        "Country String is two characters"
    );
    assert!(norm(&s, "jpegPhoto=x").is_err(), "no equality rule");
    assert!(norm(&s, "cn=a+cn=A").is_err());
    let root = norm(&s, "").unwrap_or_else(|e| panic!("{e}"));
    assert!(root.is_root());
    assert_eq!(root, NormDn::root());
}

#[test]
fn normdn_relations() {
    let s = s();
    let n = |d: &str| norm(&s, d).unwrap_or_else(|e| panic!("{e}"));
    let base = n("dc=example,dc=com");
    let people = n("ou=People,dc=example,dc=com");
    let alice = n("uid=alice,ou=people,dc=example,dc=com");
    let other = n("dc=com");
    assert!(alice.is_descendant_of(&base));
    assert!(alice.is_descendant_of(&people));
    assert!(people.is_descendant_of(&base));
    assert!(!base.is_descendant_of(&base));
    assert!(!base.is_descendant_of(&people));
    assert!(base.is_descendant_of(&other));
    assert!(base.is_descendant_of(&NormDn::root()));
    assert!(!NormDn::root().is_descendant_of(&NormDn::root()));
    assert_eq!(alice.parent(), Some(people.clone()));
    assert_eq!(other.parent(), Some(NormDn::root()));
    assert_eq!(NormDn::root().parent(), None);
    // An escaped comma is not an RDN boundary.
    let tricky = n("cn=x\\,dc=example,dc=com");
    assert!(!tricky.is_descendant_of(&base));
    assert!(tricky.is_descendant_of(&other));
    assert_eq!(tricky.parent(), Some(other.clone()));
    let tricky2 = n("cn=a\\,dc=com");
    assert!(!tricky2.is_descendant_of(&other));
    // Suffix match only at RDN boundaries.
    let xdc = n("dc=xcom");
    assert!(!xdc.is_descendant_of(&other));
}

fn oc_check(s: &Schema, ocs: &[&str], attrs: &[(&str, usize)]) -> Result<String, SchemaViolation> {
    let ocs: Vec<&[u8]> = ocs.iter().map(|o| o.as_bytes()).collect();
    let mut counts: Vec<(AttrId, usize)> = vec![(id(s, "objectClass"), ocs.len())];
    counts.extend(attrs.iter().map(|(a, n)| (id(s, a), *n)));
    s.check_entry(&ocs, &counts)
        .map(|c| s.class(c).names[0].clone())
}

#[test]
fn check_entry_cases() {
    let s = s();
    let ok = |ocs: &[&str], attrs: &[(&str, usize)]| oc_check(&s, ocs, attrs);
    let fail = |ocs: &[&str], attrs: &[(&str, usize)]| match oc_check(&s, ocs, attrs) {
        Ok(c) => panic!("{ocs:?} {attrs:?} accepted as {c}"),
        Err(v) => (v.kind, v.message),
    };
    use ViolationKind::*;
    assert_eq!(
        ok(&["top", "person"], &[("cn", 1), ("sn", 1)]),
        Ok("person".into())
    );
    assert_eq!(
        ok(&["person"], &[("cn", 1), ("sn", 1), ("description", 2)]),
        Ok("person".into())
    );
    assert_eq!(
        ok(
            &["inetOrgPerson", "posixAccount"],
            &[
                ("cn", 1),
                ("sn", 1),
                ("uid", 1),
                ("uidNumber", 1),
                ("gidNumber", 1),
                ("homeDirectory", 1),
                ("mail", 2)
            ]
        ),
        Ok("inetOrgPerson".into())
    );
    // Chain: person + organizationalPerson + inetOrgPerson is one chain.
    assert_eq!(
        ok(
            &["person", "organizationalPerson", "inetOrgPerson"],
            &[("cn", 1), ("sn", 1)]
        ),
        Ok("inetOrgPerson".into())
    );
    assert_eq!(
        ok(&["2.5.6.6"], &[("cn", 1), ("sn", 1)]),
        Ok("person".into())
    );
    assert_eq!(
        ok(&["organization", "dcObject"], &[("o", 1), ("dc", 1)]),
        Ok("organization".into())
    );
    // Operational attributes are not checked against MUST/MAY.
    assert_eq!(
        ok(
            &["person"],
            &[
                ("cn", 1),
                ("sn", 1),
                ("createTimestamp", 1),
                ("entryUUID", 1)
            ]
        ),
        Ok("person".into())
    );
    // extensibleObject allows any user attribute.
    assert_eq!(
        ok(
            &["person", "extensibleObject"],
            &[("cn", 1), ("sn", 1), ("uidNumber", 1)]
        ),
        Ok("person".into())
    );
    // Subtypes of an allowed attribute are allowed (name is not in person, cn is a MUST).
    assert_eq!(ok(&["device"], &[("cn", 1)]), Ok("device".into()));

    assert_eq!(
        fail(&["person", "foo"], &[("cn", 1), ("sn", 1)]),
        (
            ObjectClassViolation,
            "unrecognized objectClass 'foo'".into()
        )
    );
    assert_eq!(
        fail(&[], &[("cn", 1)]),
        (ObjectClassViolation, "no objectClass attribute".into())
    );
    assert_eq!(
        fail(&["top", "dcObject"], &[("dc", 1)]),
        (
            ObjectClassViolation,
            "no structural object class provided".into()
        )
    );
    assert_eq!(
        fail(&["person", "device"], &[("cn", 1), ("sn", 1)]),
        (
            ObjectClassViolation,
            "invalid structural object class chain (person/device)".into()
        )
    );
    assert_eq!(
        fail(&["person"], &[("cn", 1)]),
        (
            ObjectClassViolation,
            "object class 'person' requires attribute 'sn'".into()
        )
    );
    assert_eq!(
        fail(&["person"], &[("cn", 1), ("sn", 1), ("mail", 1)]),
        (ObjectClassViolation, "attribute 'mail' not allowed".into())
    );
    assert_eq!(
        fail(
            &["person", "posixAccount"],
            &[
                ("cn", 1),
                ("sn", 1),
                ("uid", 1),
                ("uidNumber", 2),
                ("gidNumber", 1),
                ("homeDirectory", 1)
            ]
        ),
        (
            ConstraintViolation,
            "attribute 'uidNumber' cannot have multiple values".into()
        )
    );
    assert_eq!(
        fail(
            &["inetOrgPerson"],
            &[("cn", 1), ("sn", 1), ("displayName", 2)]
        ),
        (
            ConstraintViolation,
            "attribute 'displayName' cannot have multiple values".into()
        )
    );
    // Superclass MUST is inherited.
    assert_eq!(
        fail(&["inetOrgPerson"], &[("sn", 1)]),
        (
            ObjectClassViolation,
            "object class 'person' requires attribute 'cn'".into()
        )
    );
}

mod props {
    use super::*;
    use proptest::prelude::*;
    use std::sync::OnceLock;

    fn schema() -> &'static Schema {
        static S: OnceLock<Schema> = OnceLock::new();
        S.get_or_init(Schema::builtin)
    }

    proptest! {
        #[test]
        fn case_ignore_key_is_idempotent(v in "\\PC{1,16}") {
            let s = schema();
            let cn = id(s, "cn");
            let k = s.normalize_eq(cn, v.as_bytes()).map_err(|e| TestCaseError::fail(e.0))?;
            let k2 = s.normalize_eq(cn, &k).map_err(|e| TestCaseError::fail(e.0))?;
            prop_assert_eq!(k, k2);
        }

        #[test]
        fn integer_keys_and_order_match_numbers(a in any::<i128>(), b in any::<i128>(), za in 0usize..3) {
            let s = schema();
            let u = id(s, "uidNumber");
            let sa = if a < 0 { format!("-{}{}", "0".repeat(za), a.unsigned_abs()) } else { format!("{}{a}", "0".repeat(za)) };
            let sb = b.to_string();
            let ka = s.normalize_eq(u, sa.as_bytes()).map_err(|e| TestCaseError::fail(e.0))?;
            let kb = s.normalize_eq(u, sb.as_bytes()).map_err(|e| TestCaseError::fail(e.0))?;
            prop_assert_eq!(ka == kb, a == b);
            prop_assert_eq!(s.compare_ord(u, sa.as_bytes(), sb.as_bytes()), Some(a.cmp(&b)));
        }

        #[test]
        fn gentime_order_matches_instants(a in 0i64..4_000_000_000, b in 0i64..4_000_000_000, off in -23i64..24) {
            let s = schema();
            let t = id(s, "createTimestamp");
            let fmt = |secs: i64, off_h: i64| {
                let local = secs + off_h * 3600;
                let days = local.div_euclid(86_400);
                let rem = local.rem_euclid(86_400);
                let (y, m, d) = crate::rules::civil_from_days_pub(days);
                let sign = if off_h < 0 { '-' } else { '+' };
                format!("{y:04}{m:02}{d:02}{:02}{:02}{:02}{sign}{:02}00", rem / 3600, rem / 60 % 60, rem % 60, off_h.abs())
            };
            let va = fmt(a, off);
            let vb = fmt(b, 0);
            prop_assert_eq!(s.compare_ord(t, va.as_bytes(), vb.as_bytes()), Some(a.cmp(&b)), "{} vs {}", va, vb);
        }

        #[test]
        fn normalized_dn_is_stable(
            rdns in proptest::collection::vec(
                (
                    prop_oneof![Just("cn"), Just("UID"), Just("o"), Just("2.5.4.11"), Just("commonName")],
                    prop_oneof!["\\PC{1,8}", "[ \u{34F}\u{AD}aB,+#\\\\]{1,4}"],
                ),
                1..4,
            )
        ) {
            let s = schema();
            let dn = Dn {
                rdns: rdns
                    .iter()
                    .map(|(a, v)| Rdn { avas: vec![Ava { attr: a.to_string(), value: v.clone().into_bytes() }] })
                    .collect(),
            };
            let n = dn.normalize(s).map_err(|e| TestCaseError::fail(e.0))?;
            let again = Dn::parse(&n.norm).and_then(|d| d.normalize(s)).map_err(|e| TestCaseError::fail(e.0))?;
            prop_assert_eq!(&again.norm, &n.norm);
            let shown = Dn::parse(&dn.to_string()).and_then(|d| d.normalize(s)).map_err(|e| TestCaseError::fail(e.0))?;
            prop_assert_eq!(&shown.norm, &n.norm);
            prop_assert_eq!(n.rdns.len(), rdns.len());
        }
    }
}

#[test]
fn extend_appends_and_keeps_ids() {
    let base = s();
    let n = base.attr_count();
    let cn = id(&base, "cn");
    let text = "attributetype ( 1.3.6.1.4.1.99999.7.1 NAME 'shoeSize' EQUALITY integerMatch SYNTAX 1.3.6.1.4.1.1466.115.121.1.27 SINGLE-VALUE )\n\
                objectclass ( 1.3.6.1.4.1.99999.7.2 NAME 'shoeWearer' SUP top AUXILIARY MAY shoeSize )\n";
    let ext = base.extend(text, "t").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(ext.attr_count(), n + 1);
    assert_eq!(id(&ext, "cn"), cn, "existing ids never change");
    assert_eq!(id(&ext, "shoeSize"), AttrId(n as u32));
    assert_ne!(ext.generation(), base.generation());
    assert!(
        base.attr_by_name("shoeSize").is_none(),
        "the old schema is unchanged"
    );
    assert_eq!(ext.extensions().lines().count(), 2);
    // Replaying the recorded text on the base gives the same definitions with the same ids.
    let again = base
        .replay_extension(ext.extensions(), "replay")
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(again.extensions(), ext.extensions());
    assert_eq!(id(&again, "shoeSize"), id(&ext, "shoeSize"));
    assert_eq!(
        again.subschema().object_classes,
        ext.subschema().object_classes
    );
    // Replaying over a schema that already has them (a configured file took them in) adds
    // nothing and records nothing.
    let none = again
        .replay_extension(ext.extensions(), "replay")
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(none.attr_count(), again.attr_count());
}

#[test]
fn extend_refuses_incompatible_changes() {
    let base = s();
    let cases = [
        // An existing OID, an existing name, a missing superior, rule or syntax.
        ("attributetype ( 2.5.4.3 NAME 'cn2' SUP name )", "already defined"),
        ("attributetype ( 1.2.3.4.5 NAME 'CN' SUP name )", "duplicate definition of name"),
        ("attributetype ( 1.2.3.4.5 NAME 'x' SUP noSuchType )", "noSuchType"),
        ("objectclass ( 1.2.3.4.5 NAME 'x' SUP noSuchClass )", "noSuchClass"),
        ("attributetype ( 1.2.3.4.5 NAME 'x' EQUALITY fooMatch SYNTAX 1.3.6.1.4.1.1466.115.121.1.15 )", "fooMatch"),
        ("attributetype ( 1.2.3.4.5 NAME 'x' SYNTAX 1.2.3.4.5.6 )", "syntax 1.2.3.4.5.6 is not known"),
        ("ldapsyntax ( 1.2.3.4.5 DESC 'x' )", "only attribute types and object classes"),
        ("objectidentifier foo 1.2.3", "only attribute types and object classes"),
        ("objectclass ( 2.5.6.6 NAME 'person' SUP top STRUCTURAL MUST ( sn $ cn ) )", "already defined"),
    ];
    for (text, want) in cases {
        match base.extend(text, "modify") {
            Ok(_) => panic!("{text}: accepted"),
            Err(e) => assert!(e.message.contains(want), "{text}: {e}"),
        }
    }
}

#[test]
fn files_skip_identical_definitions_and_name_differing_ones() {
    let mut base = s();
    let n = base.attr_count();
    // The built-in `cn` again, with another DESC: skipped.
    base.load_file_text(
        "attributetype ( 2.5.4.3 NAME ( 'cn' 'commonName' ) DESC 'another wording' SUP name )\n",
        "a.schema",
        false,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(base.attr_count(), n);
    assert!(base.extensions().is_empty(), "files are not extensions");
    let e = base
        .load_file_text(
            "\n\nattributetype ( 2.5.4.3 NAME 'cn' SUP description )\n",
            "b.schema",
            false,
        )
        .err()
        .unwrap_or_else(|| panic!("a differing definition must fail"));
    assert_eq!((e.origin.as_str(), e.line), ("b.schema", 3), "{e}");
    assert!(
        e.message.contains("2.5.4.3 is already defined differently"),
        "{e}"
    );
}

#[test]
fn ldif_schema_files() {
    // The cn=config form Debian ships, folded lines and ordering prefixes included.
    let text = "# comment\n\
dn: cn=test,cn=schema,cn=config\n\
objectClass: olcSchemaConfig\n\
cn: test\n\
olcObjectIdentifier: {0}testOID 1.3.6.1.4.1.99999.8\n\
olcAttributeTypes: {0}( testOID:1 NAME 'testColour' DESC 'a\n  colour' EQUALITY caseIgnoreMatch\n   SYNTAX 1.3.6.1.4.1.1466.115.121.1.15 )\n\
olcObjectClasses: {0}( testOID:2 NAME 'testThing' SUP top STRUCTURAL MUST ( cn $ testColour ) )\n\
\n\
dn: cn=Subschema\n\
attributeTypes: ( 1.3.6.1.4.1.99999.8.3 NAME 'testSize' SYNTAX 1.3.6.1.4.1.1466.115.121.1.27 )\n\
objectClasses:: KCAxLjMuNi4xLjQuMS45OTk5OS44LjQgTkFNRSAndGVzdEI2NCcgU1VQIHRvcCBBVVhJTElBUlkgKQ==\n";
    let mut s = s();
    s.load_file_text(text, "t.ldif", true)
        .unwrap_or_else(|e| panic!("{e}"));
    let c = id(&s, "testColour");
    assert_eq!(s.attr(c).oid, "1.3.6.1.4.1.99999.8.1");
    assert_eq!(s.attr(c).desc.as_deref(), Some("a colour"));
    assert!(s.class_by_name("testThing").is_some());
    assert!(s.attr_by_name("testSize").is_some());
    assert!(s.class_by_name("testB64").is_some());

    // Errors name the line of the value, also inside a folded value.
    let bad = "dn: cn=x,cn=schema,cn=config\nolcAttributeTypes: ( 1.3.6.1.4.1.99999.9.1 NAME 'x'\n  EQUALITY noSuchMatch\n  SYNTAX 1.3.6.1.4.1.1466.115.121.1.15 )\n";
    let e = s
        .load_file_text(bad, "bad.ldif", true)
        .err()
        .unwrap_or_else(|| panic!("must fail"));
    assert_eq!((e.origin.as_str(), e.line), ("bad.ldif", 3), "{e}");
    let e = s
        .load_file_text("dn: cn=x\n\nnot ldif\n", "bad2.ldif", true)
        .err()
        .unwrap_or_else(|| panic!("must fail"));
    assert_eq!(e.line, 3, "{e}");
}

/// Per-thread caches are tagged with the schema generation: a check cached under one schema is
/// never served under its extension, nor the other way round.
#[test]
fn caches_notice_an_extended_schema() {
    let base = s();
    let oc: [&[u8]; 3] = [b"top", b"person", b"shoeWearer"];
    let counts = |s: &Schema| {
        vec![
            (id(s, "objectClass"), 3),
            (id(s, "cn"), 1),
            (id(s, "sn"), 1),
        ]
    };
    assert!(
        base.check_entry(&oc, &counts(&base)).is_err(),
        "unknown class"
    );
    let ext = base
        .extend(
            "objectclass ( 1.3.6.1.4.1.99999.7.2 NAME 'shoeWearer' SUP top AUXILIARY )",
            "t",
        )
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(ext.check_entry(&oc, &counts(&ext)).is_ok());
    assert!(base.check_entry(&oc, &counts(&base)).is_err());
    assert!(ext.check_entry(&oc, &counts(&ext)).is_ok());
    // DN keys too: the same DN normalizes the same under both, from either cache state.
    let dn = Dn::parse("CN=Sam,DC=Example,DC=Com").unwrap_or_default();
    let a = dn.normalize(&base).map(|n| n.norm).unwrap_or_default();
    let b = dn.normalize(&ext).map(|n| n.norm).unwrap_or_default();
    assert_eq!(a, b);
    assert!(!a.is_empty());
}

#[test]
fn dns_are_prettied_as_slapd_stores_them() {
    let s = s();
    let pretty = |dn: &str| Dn::parse(dn).map(|d| d.pretty(&s)).unwrap();
    assert_eq!(
        pretty("CN=x\\2Cy,  OU=Groups,DC=example,   dc=com"),
        "cn=x\\2Cy,ou=Groups,dc=example,dc=com"
    );
    assert_eq!(pretty("2.5.4.3=abc+SN=def,dc=com"), "cn=abc+sn=def,dc=com");
    assert_eq!(
        pretty("commonName=Test  One ,dc=com"),
        "cn=Test  One,dc=com"
    );
    assert_eq!(
        pretty("cn=a\\+b\\,c\\;\\\"d\\<\\>\\\\\\ ,dc=com"),
        "cn=a\\2Bb\\2Cc\\3B\\22d\\3C\\3E\\5C\\20,dc=com"
    );
    assert_eq!(pretty("cn=\\#x\\=y,dc=com"), "cn=\\23x\\3Dy,dc=com");
    assert_eq!(pretty("cn=\\ a b\\ ,dc=com"), "cn=\\20a b\\20,dc=com");
    assert_eq!(
        pretty("cn=\\C3\\A9t\\C3\\A9,dc=com"),
        "cn=\u{e9}t\u{e9},dc=com"
    );
    assert_eq!(pretty(""), "");
    // The pretty form names the same entry.
    for dn in ["CN=x\\2Cy,  OU=Groups,DC=example", "cn=\\ a\\+b\\ ,o=x"] {
        let a = Dn::parse(dn).unwrap();
        let b = Dn::parse(&a.pretty(&s)).unwrap();
        assert_eq!(a.normalize(&s).unwrap(), b.normalize(&s).unwrap());
    }
    let new = s.parse_new_dn("UID=x , ou=People,dc=com").unwrap();
    assert_eq!(new.text, "uid=x,ou=People,dc=com");
    assert_eq!(new.rdn_len, "uid=x".len());
}

#[test]
fn values_stored_pretty() {
    let s = s();
    let p = |attr: &str, v: &str| {
        s.pretty_value(id(&s, attr), v.as_bytes())
            .map(|v| String::from_utf8(v).unwrap())
    };
    assert_eq!(
        p("objectClass", "groupofnames").as_deref(),
        Some("groupOfNames")
    );
    assert_eq!(p("objectClass", "2.5.6.6").as_deref(), Some("person"));
    assert_eq!(p("objectClass", "person"), None);
    assert_eq!(p("objectClass", "noSuchClass"), None);
    assert_eq!(
        p("seeAlso", "cn=All Staff, ou=Groups, dc=x").as_deref(),
        Some("cn=All Staff,ou=Groups,dc=x")
    );
    assert_eq!(p("member", "cn=a,dc=x"), None);
    assert_eq!(
        p("uniqueMember", "UID=a , dc=x#'0101'B").as_deref(),
        Some("uid=a,dc=x#'0101'B")
    );
    assert_eq!(p("cn", "Some  Name "), None);
    assert_eq!(p("supportedControl", "1.2.3"), None);
}

#[test]
fn subclasses_include_the_class_and_everything_below() {
    let s = s();
    let c = |n: &str| s.class_by_name(n).unwrap();
    let person = s.subclasses(c("person"));
    assert_eq!(person[0], c("person"));
    for sub in ["organizationalPerson", "inetOrgPerson", "residentialPerson"] {
        assert!(person.contains(&c(sub)), "{sub}");
    }
    assert!(!person.contains(&c("groupOfNames")));
    assert_eq!(s.subclasses(c("inetOrgPerson")), &[c("inetOrgPerson")]);
    assert!(s.subclasses(c("top")).contains(&c("inetOrgPerson")));
}

#[test]
fn rules_apply_as_matching_rule_use_says() {
    let s = s();
    let r = |n: &str| s.rule_by_name(n).unwrap();
    assert!(s.rule_applies(r("caseIgnoreMatch"), id(&s, "cn")));
    assert!(s.rule_applies(r("caseExactMatch"), id(&s, "cn")));
    assert!(s.rule_applies(r("caseIgnoreMatch"), id(&s, "telephoneNumber")));
    assert!(!s.rule_applies(r("caseIgnoreIA5Match"), id(&s, "cn")));
    assert!(!s.rule_applies(r("caseIgnoreSubstringsMatch"), id(&s, "cn")));
    assert!(s.rule_applies(r("caseIgnoreSubstringsMatch"), id(&s, "telephoneNumber")));
    assert!(s.rule_applies(r("distinguishedNameMatch"), id(&s, "member")));
    assert!(!s.rule_applies(r("objectIdentifierMatch"), id(&s, "objectClass")));
    assert!(!s.rule_applies(r("UUIDMatch"), id(&s, "entryUUID")));
    let uses = s.subschema().matching_rule_uses;
    let ci = uses
        .iter()
        .find(|u| u.starts_with("( 2.5.13.2 NAME 'caseIgnoreMatch' APPLIES ("))
        .unwrap();
    assert!(ci.contains(" cn ") && ci.contains(" uid "), "{ci}");
    assert!(!uses
        .iter()
        .any(|u| u.contains("'caseIgnoreIA5SubstringsMatch'")));
}

#[test]
fn approximate_match_on_string_types_only() {
    let s = s();
    assert!(s.has_approx(id(&s, "cn")));
    assert!(s.has_approx(id(&s, "mail")));
    assert!(!s.has_approx(id(&s, "member")));
    assert!(!s.has_approx(id(&s, "uidNumber")));
}
