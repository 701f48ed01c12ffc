//! RFC 4515 string form: examples from the RFC, ldapsearch conveniences, and errors.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed unwrap is a failed test"
)]

use proto::{Filter, FilterParseError};
use std::borrow::Cow;

fn o(s: &[u8]) -> Cow<'static, [u8]> {
    Cow::Owned(s.to_vec())
}

fn p(s: &str) -> Filter<'static> {
    Filter::parse(s).unwrap_or_else(|e| panic!("{s:?}: {e}"))
}

#[test]
fn rfc4515_examples() {
    assert_eq!(
        p("(cn=Babs Jensen)"),
        Filter::Equality(o(b"cn"), o(b"Babs Jensen"))
    );
    assert_eq!(
        p("(!(cn=Tim Howes))"),
        Filter::Not(Box::new(Filter::Equality(o(b"cn"), o(b"Tim Howes"))))
    );
    assert_eq!(
        p("(&(objectClass=Person)(|(sn=Jensen)(cn=Babs J*)))"),
        Filter::And(vec![
            Filter::Equality(o(b"objectClass"), o(b"Person")),
            Filter::Or(vec![
                Filter::Equality(o(b"sn"), o(b"Jensen")),
                Filter::Substrings {
                    attr: o(b"cn"),
                    initial: Some(o(b"Babs J")),
                    any: vec![],
                    final_: None
                },
            ]),
        ])
    );
    assert_eq!(
        p("(o=univ*of*mich*)"),
        Filter::Substrings {
            attr: o(b"o"),
            initial: Some(o(b"univ")),
            any: vec![o(b"of"), o(b"mich")],
            final_: None
        }
    );
    assert_eq!(p("(seeAlso=)"), Filter::Equality(o(b"seeAlso"), o(b"")));
    assert_eq!(
        p("(cn:caseExactMatch:=Fred Flintstone)"),
        Filter::Extensible {
            rule: Some(o(b"caseExactMatch")),
            attr: Some(o(b"cn")),
            value: o(b"Fred Flintstone"),
            dn_attributes: false
        }
    );
    assert_eq!(
        p("(cn:=Betty Rubble)"),
        Filter::Extensible {
            rule: None,
            attr: Some(o(b"cn")),
            value: o(b"Betty Rubble"),
            dn_attributes: false
        }
    );
    assert_eq!(
        p("(sn:dn:2.4.6.8.10:=Barney Rubble)"),
        Filter::Extensible {
            rule: Some(o(b"2.4.6.8.10")),
            attr: Some(o(b"sn")),
            value: o(b"Barney Rubble"),
            dn_attributes: true
        }
    );
    assert_eq!(
        p("(:1.2.3:=Wilma Flintstone)"),
        Filter::Extensible {
            rule: Some(o(b"1.2.3")),
            attr: None,
            value: o(b"Wilma Flintstone"),
            dn_attributes: false
        }
    );
    assert_eq!(
        p("(:DN:2.4.6.8.10:=Dino)"),
        Filter::Extensible {
            rule: Some(o(b"2.4.6.8.10")),
            attr: None,
            value: o(b"Dino"),
            dn_attributes: true
        }
    );
    assert_eq!(
        p("(o=Parens R Us \\28for all your parenthetical needs\\29)"),
        Filter::Equality(
            o(b"o"),
            o(b"Parens R Us (for all your parenthetical needs)")
        )
    );
    assert_eq!(
        p("(cn=*\\2A*)"),
        Filter::Substrings {
            attr: o(b"cn"),
            initial: None,
            any: vec![o(b"*")],
            final_: None
        }
    );
    assert_eq!(
        p("(filename=C:\\5cMyFile)"),
        Filter::Equality(o(b"filename"), o(b"C:\\MyFile"))
    );
    assert_eq!(
        p("(bin=\\00\\00\\00\\04)"),
        Filter::Equality(o(b"bin"), o(&[0, 0, 0, 4]))
    );
    assert_eq!(
        p("(sn=Lu\\c4\\8di\\c4\\87)"),
        Filter::Equality(o(b"sn"), o("Lučić".as_bytes()))
    );
    assert_eq!(
        p("(1.3.6.1.4.1.1466.0=\\04\\02\\48\\69)"),
        Filter::Equality(o(b"1.3.6.1.4.1.1466.0"), o(&[4, 2, 0x48, 0x69]))
    );
}

#[test]
fn other_forms() {
    assert_eq!(p("uid=x"), Filter::Equality(o(b"uid"), o(b"x")));
    assert_eq!(p("  (objectClass=*) "), Filter::Present(o(b"objectClass")));
    assert_eq!(p("cn;lang-en=*"), Filter::Present(o(b"cn;lang-en")));
    assert_eq!(p("(age>=30)"), Filter::GreaterOrEqual(o(b"age"), o(b"30")));
    assert_eq!(p("(age<=30)"), Filter::LessOrEqual(o(b"age"), o(b"30")));
    assert_eq!(p("(sn~=smith)"), Filter::Approx(o(b"sn"), o(b"smith")));
    assert_eq!(p("(&)"), Filter::And(vec![]));
    assert_eq!(p("(cn=***)"), Filter::Present(o(b"cn")));
    assert_eq!(p("(|)"), Filter::Or(vec![]));
    assert_eq!(
        p("(cn=*x)"),
        Filter::Substrings {
            attr: o(b"cn"),
            initial: None,
            any: vec![],
            final_: Some(o(b"x"))
        }
    );
}

#[test]
fn display_escapes() {
    let f = Filter::Equality(o(b"cn"), o(b"a*b(c)d\\e\0f\xff\xfe"));
    assert_eq!(f.to_string(), "(cn=a\\2ab\\28c\\29d\\5ce\\00f\\ff\\fe)");
    assert_eq!(Filter::parse(&f.to_string()), Ok(f));
    let f = Filter::Equality(o(b"sn"), o("Lučić".as_bytes()));
    assert_eq!(f.to_string(), "(sn=Lučić)");
    let f = p("(&(uid=a*b)(!(cn=x))(cn:dn:1.2:=y)(:r:=z)(x=*))");
    assert_eq!(
        f.to_string(),
        "(&(uid=a*b)(!(cn=x))(cn:dn:1.2:=y)(:r:=z)(x=*))"
    );
}

#[test]
fn errors() {
    use FilterParseError as E;
    let cases: &[(&str, FilterParseError)] = &[
        ("", E::Empty),
        ("   ", E::Empty),
        ("(cn=x", E::UnexpectedEnd(5)),
        ("(cn=x))", E::Trailing(1)),
        ("(cn=\\zz)", E::BadEscape(4)),
        ("(cn=\\2)", E::BadEscape(4)),
        ("(=x)", E::BadAttribute(1)),
        ("(cn)", E::MissingOperator(3)),
        ("(cn~x)", E::Unexpected { pos: 4, ch: 'x' }),
        ("(cn>=a*)", E::UnexpectedStar(6)),
        ("(:=x)", E::BadExtensible(1)),
        ("(cn:dn:r:s:=x)", E::BadExtensible(8)),
        ("(cn=a(b)", E::Unexpected { pos: 5, ch: '(' }),
        ("(!)", E::Unexpected { pos: 2, ch: ')' }),
        ("(!(a=b)(c=d))", E::Unexpected { pos: 7, ch: '(' }),
        ("(&(a=b)x)", E::Unexpected { pos: 7, ch: 'x' }),
    ];
    for (s, e) in cases {
        assert_eq!(Filter::parse(s).as_ref(), Err(e), "{s:?}");
        assert!(!e.to_string().is_empty());
    }
    let deep = format!("{}(a=b){}", "(!".repeat(40), ")".repeat(40));
    assert_eq!(Filter::parse(&deep), Err(E::TooDeep(32)));
    let deep = format!("{}(a=b){}", "(!".repeat(31), ")".repeat(31));
    assert!(Filter::parse(&deep).is_ok());
}
