//! slapd's `access to … by …` rules (slapd.access(5)) as Linden's `[[access]]` tables
//! (docs/access-control.md).
//!
//! - Levels become the set of rights they imply: `read` is auth, compare, search and read;
//!   `write` adds write (and add and delete where the rule covers the entry itself); `manage`
//!   is `all`. `=rscx` privileges map letter by letter.
//! - Targets: `*`, `dn.base/one/subtree/children`, `dn.regex` when the expression is one of
//!   those in disguise (`.*,ou=people,…` is children, `(.*,)?ou=people,…` subtree,
//!   `uid=([^,]+),ou=people,…` one level, with `dn.exact,expand="uid=$1,…"` as self), `filter=`,
//!   `attrs=` (with `entry`, and `@class` as its attributes). A target that cannot be expressed drops the rule (reported: its
//!   entries now fall to the rules after it).
//! - Subjects: `*`, anonymous, users, self, `dn.exact/subtree` (and literal or subtree-shaped
//!   `dn.regex`), `group=` on groupOfNames/member or groupOfUniqueNames/uniqueMember. A clause
//!   that cannot be expressed is dropped (reported): those clients get no rights from it,
//!   which is never more than slapd gave them.
//! - `by * break` at the end of a rule (slapd: "nobody else matched here; try the next
//!   rules") is carried exactly: its other clauses are put in front of every later rule that
//!   selects some of the same entries (that rule cut down to the overlap when it selects
//!   more), and once more at the end for the entries no later rule selects. Any other
//!   `break`, and `continue`, are carried as `stop` and reported.
//! - The frontend's rules come after every database's (slapd appends them), a database's
//!   rules are confined to its suffix when there are several databases, rules for the root
//!   DSE and cn=Subschema are not needed (Linden lets anyone read them), and rules no entry
//!   can reach after a rule that selects everything are dropped.

use super::model::{Directive, Loc};
use super::report::{Kind, Report};

/// Which entries below a DN.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    Base,
    One,
    Subtree,
    Children,
}

impl Scope {
    pub fn name(self) -> &'static str {
        match self {
            Scope::Base => "base",
            Scope::One => "one",
            Scope::Subtree => "subtree",
            Scope::Children => "children",
        }
    }
}

/// What a rule selects. `dn: None` is every entry.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Target {
    pub dn: Option<(String, Scope)>,
    pub filter: Option<String>,
    pub attrs: Option<Vec<String>>,
}

impl Target {
    fn everything(&self) -> bool {
        self.dn.is_none() && self.filter.is_none() && self.attrs.is_none()
    }

    /// The rule covers the entry itself (not only attributes).
    fn covers_entry(&self) -> bool {
        self.attrs
            .as_ref()
            .is_none_or(|a| a.iter().any(|x| x.eq_ignore_ascii_case("entry")))
    }
}

/// Linden's rights, as bits.
pub mod rights {
    pub const AUTH: u16 = 1;
    pub const COMPARE: u16 = 2;
    pub const SEARCH: u16 = 4;
    pub const READ: u16 = 8;
    pub const WRITE: u16 = 16;
    pub const ADD: u16 = 32;
    pub const DELETE: u16 = 64;
    pub const ALL: u16 = 127;
    pub const NAMES: &[(u16, &str)] = &[
        (AUTH, "auth"),
        (COMPARE, "compare"),
        (SEARCH, "search"),
        (READ, "read"),
        (WRITE, "write"),
        (ADD, "add"),
        (DELETE, "delete"),
    ];
}

/// One `by` clause in Linden's terms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Clause {
    /// `*`, `anonymous`, `users`, `self`, `dn:<DN>`, `subtree:<DN>`, `group:<DN>`.
    pub who: String,
    pub rights: u16,
}

/// One `[[access]]` table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    pub target: Target,
    pub by: Vec<Clause>,
    pub loc: Loc,
}

impl Rule {
    /// The rights of a clause as Linden names them (`["none"]` for none, `["all"]` for all).
    pub fn right_names(&self, c: &Clause) -> Vec<&'static str> {
        let mut r = c.rights;
        if r == rights::ALL {
            return vec!["all"];
        }
        if !self.target.covers_entry() {
            r &= !(rights::ADD | rights::DELETE);
        }
        if r == 0 {
            return vec!["none"];
        }
        if r == rights::ALL {
            return vec!["all"];
        }
        rights::NAMES
            .iter()
            .filter(|(b, _)| r & b != 0)
            .map(|(_, n)| *n)
            .collect()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Control {
    Stop,
    Continue,
    Break,
}

/// A parsed clause: `who` is `None` when it cannot be expressed.
#[derive(Debug, Clone)]
struct Parsed {
    who: Option<String>,
    rights: u16,
    control: Control,
}

#[derive(Debug, Clone)]
struct Work {
    target: Target,
    by: Vec<Parsed>,
    loc: Loc,
    /// The directive it came from, for the report.
    shown: String,
    /// Made by carrying a `break` (not a rule of the file): not reported when unreachable.
    derived: bool,
}

/// One `access` directive and the suffix its database confines it to (`None`: the frontend,
/// or the only database).
pub struct Input<'a> {
    pub directive: &'a Directive,
    pub confine: Option<&'a str>,
}

/// Translates the rules, in slapd's order of evaluation (databases' rules, then the
/// frontend's), into Linden's.
pub fn translate(inputs: &[Input<'_>], schema: &schema::Schema, report: &mut Report) -> Vec<Rule> {
    let mut work: Vec<Work> = Vec::new();
    for inp in inputs {
        let d = inp.directive;
        let Some(mut w) = parse(d, schema, report) else {
            continue;
        };
        if let Some(suffix) = inp.confine {
            let scope = Target {
                dn: Some((suffix.to_string(), Scope::Subtree)),
                ..Target::default()
            };
            match intersect(&scope, &w.target) {
                Some(t) => w.target = t,
                None => {
                    report.add(
                        &d.loc,
                        d.shown(),
                        Kind::NotNeeded,
                        format!("selects no entry of its database ({suffix}), so slapd never applies it"),
                    );
                    continue;
                }
            }
        }
        work.push(w);
    }
    carry_breaks(&mut work);
    finish(work, report)
}

/// Replaces each rule ending in `by * break` as described in the module comment.
fn carry_breaks(work: &mut Vec<Work>) {
    let mut i = 0;
    while i < work.len() {
        let ends_in_break = work[i]
            .by
            .last()
            .is_some_and(|c| c.control == Control::Break && c.who.as_deref() == Some("*"));
        if !ends_in_break {
            i += 1;
            continue;
        }
        let rule = work.remove(i);
        let before: Vec<Parsed> = rule.by[..rule.by.len() - 1].to_vec();
        let mut j = i;
        while j < work.len() {
            match intersect(&rule.target, &work[j].target) {
                None => j += 1,
                Some(t) if t == work[j].target => {
                    let mut by = before.clone();
                    by.append(&mut work[j].by);
                    work[j].by = by;
                    j += 1;
                }
                Some(t) => {
                    let mut by = before.clone();
                    by.extend(work[j].by.iter().cloned());
                    let copy = Work {
                        target: t,
                        by,
                        loc: work[j].loc.clone(),
                        shown: work[j].shown.clone(),
                        derived: true,
                    };
                    work.insert(j, copy);
                    j += 2;
                }
            }
        }
        if !before.is_empty() {
            // The rule itself, for what no later rule selects: reported if never reached.
            work.push(Work {
                target: rule.target,
                by: before,
                loc: rule.loc,
                shown: rule.shown,
                derived: false,
            });
        }
    }
}

/// Drops what can never apply and what cannot be expressed, and makes the rules.
fn finish(work: Vec<Work>, report: &mut Report) -> Vec<Rule> {
    let mut out: Vec<Rule> = Vec::new();
    let mut catch_all: Option<Loc> = None;
    for w in work {
        if let Some(at) = &catch_all {
            if !w.derived {
                report.add(
                    &w.loc,
                    w.shown.clone(),
                    Kind::NotNeeded,
                    format!("never reached: the rule from {at} before it selects every entry and attribute (as in slapd)"),
                );
            }
            continue;
        }
        let mut by = Vec::new();
        for p in w.by {
            let Some(who) = p.who else { continue };
            let anyone = who == "*";
            by.push(Clause {
                who,
                rights: p.rights,
            });
            if anyone {
                break;
            }
        }
        if by.is_empty() {
            // slapd's implicit `by * none`: the rule still stops the search for a rule.
            by.push(Clause {
                who: "*".into(),
                rights: 0,
            });
        }
        if w.target.everything() {
            catch_all = Some(w.loc.clone());
        }
        out.push(Rule {
            target: w.target,
            by,
            loc: w.loc,
        });
    }
    out
}

/// Reads one `access to WHAT by WHO LEVEL [CONTROL] …` directive. `None` when the rule is not
/// carried (reported).
fn parse(d: &Directive, schema: &schema::Schema, report: &mut Report) -> Option<Work> {
    let shown = d.shown();
    let mut words = d.args.iter().map(String::as_str).peekable();
    if !words.next().is_some_and(|w| w.eq_ignore_ascii_case("to")) {
        report.add(
            &d.loc,
            shown,
            Kind::NotCarried,
            "not an 'access to ...' rule",
        );
        return None;
    }
    let mut target = Target::default();
    let mut what: Vec<&str> = Vec::new();
    while let Some(w) = words.peek() {
        if w.eq_ignore_ascii_case("by") {
            break;
        }
        what.push(w);
        words.next();
    }
    let target_regex = what.iter().find_map(|w| {
        let (k, v) = w.split_once('=')?;
        k.eq_ignore_ascii_case("dn.regex").then(|| v.to_string())
    });
    for w in &what {
        if let Err(why) = target_word(w, &mut target, schema) {
            if why.is_empty() {
                report.add(
                    &d.loc,
                    shown,
                    Kind::NotNeeded,
                    "Linden lets anyone read the root DSE and cn=Subschema, outside the rules",
                );
            } else {
                report.add(
                    &d.loc,
                    shown,
                    Kind::NotCarried,
                    format!("{why}; the entries it selected now fall to the rules after it: review them"),
                );
            }
            return None;
        }
    }
    // The `by` clauses.
    let rest: Vec<&str> = words.collect();
    let mut clauses: Vec<Vec<&str>> = Vec::new();
    for w in rest {
        if w.eq_ignore_ascii_case("by") {
            clauses.push(Vec::new());
        } else if let Some(c) = clauses.last_mut() {
            c.push(w);
        }
    }
    let covers_entry = target.covers_entry();
    let mut by = Vec::new();
    for (n, c) in clauses.iter().enumerate() {
        let clause_shown = format!("{shown} (by #{}: {})", n + 1, c.join(" "));
        let mut who_words = Vec::new();
        let mut level = None;
        let mut control = Control::Stop;
        for w in c {
            match w.to_ascii_lowercase().as_str() {
                "stop" => control = Control::Stop,
                "continue" => control = Control::Continue,
                "break" => control = Control::Break,
                _ if level.is_none() && is_level(w) => level = Some(*w),
                _ => who_words.push(*w),
            }
        }
        let (rights, level_note) = match level {
            Some(l) => parse_level(l, covers_entry),
            None => (0, None),
        };
        if let Some(why) = level_note {
            report.add(&d.loc, clause_shown.clone(), Kind::Difference, why);
        }
        let who = match parse_who(&who_words, target_regex.as_deref()) {
            Ok(w) => Some(w),
            Err(why) => {
                report.add(
                    &d.loc,
                    clause_shown.clone(),
                    Kind::NotCarried,
                    format!(
                        "{why}; the clause is left out, so these clients get no rights from it"
                    ),
                );
                None
            }
        };
        let last = n + 1 == clauses.len();
        match control {
            Control::Continue => report.add(
                &d.loc,
                clause_shown,
                Kind::Difference,
                "'continue' is carried as 'stop': Linden gives the rights of the first clause that matches",
            ),
            Control::Break if !(last && who.as_deref() == Some("*") && rights == 0) => report.add(
                &d.loc,
                clause_shown,
                Kind::Difference,
                "only a final 'by * break' is carried exactly; this 'break' is carried as 'stop'",
            ),
            _ => {}
        }
        let control = match control {
            Control::Break if last && who.as_deref() == Some("*") && rights == 0 => Control::Break,
            _ => Control::Stop,
        };
        by.push(Parsed {
            who,
            rights,
            control,
        });
    }
    if by.is_empty() {
        report.add(
            &d.loc,
            shown,
            Kind::Difference,
            "no 'by' clause: nobody gets any right on what it selects (as slapd's implicit 'by * none')",
        );
    }
    Some(Work {
        target,
        by,
        loc: d.loc.clone(),
        shown: d.shown(),
        derived: false,
    })
}

/// Reads one word of a target into `t`. `Err("")`: a rule for the root DSE or the
/// subschema subentry; `Err(why)`: not expressible.
fn target_word(w: &str, t: &mut Target, schema: &schema::Schema) -> Result<(), String> {
    if w == "*" {
        return Ok(());
    }
    let Some((key, value)) = w.split_once('=') else {
        // A bare pattern is a DN pattern of the default style (base).
        return set_dn(t, w, Scope::Base);
    };
    let key = key.to_ascii_lowercase();
    let (kind, style) = key.split_once('.').unwrap_or((key.as_str(), ""));
    match kind {
        "dn" => match style {
            "" | "base" | "baseobject" | "exact" => set_dn(t, value, Scope::Base),
            "one" | "onelevel" => set_dn(t, value, Scope::One),
            "sub" | "subtree" => set_dn(t, value, Scope::Subtree),
            "children" => set_dn(t, value, Scope::Children),
            "regex" => match regex_dn(value) {
                Some(RegexDn::Everything) => Ok(()),
                Some(RegexDn::Dn(dn, scope)) => set_dn(t, &dn, scope),
                None => Err(format!(
                    "the regular expression '{value}' is not a base, one-level, subtree or children DN, which is all Linden's rules can select"
                )),
            },
            other => Err(format!("dn style '{other}' has no equivalent")),
        },
        "filter" => {
            t.filter = Some(value.to_string());
            Ok(())
        }
        "attrs" | "attr" => {
            let mut attrs = Vec::new();
            for a in value.split(',').map(str::trim).filter(|a| !a.is_empty()) {
                if a.eq_ignore_ascii_case("children") {
                    return Err("the 'children' pseudo-attribute has no equivalent (Linden checks 'add' on the new entry and 'delete' on the entry itself: grant those on the entries below instead)".into());
                }
                if let Some(class) = a.strip_prefix('@') {
                    // slapd: every attribute the class (and its superclasses) may hold.
                    let id = schema.class_by_name(class).ok_or_else(|| {
                        format!("'{a}': the object class is not in Linden's built-in schema or the bundles this configuration enables: list the attributes")
                    })?;
                    for c in schema.class_closure(&[id]) {
                        let oc = schema.class(c);
                        for at in oc.must.iter().chain(&oc.may) {
                            let name = schema.attr(*at).name().to_string();
                            if !attrs.contains(&name) {
                                attrs.push(name);
                            }
                        }
                    }
                    continue;
                }
                if a.starts_with('!') {
                    return Err(format!(
                        "'{a}' (the attributes an object class may not hold) is not carried: list the attributes"
                    ));
                }
                if a == "*" {
                    continue;
                }
                attrs.push(a.to_string());
            }
            if !attrs.is_empty() {
                t.attrs = Some(attrs);
            }
            Ok(())
        }
        "val" => Err("rules on one attribute value (val=) have no equivalent".into()),
        other => Err(format!("'{other}' has no equivalent in Linden's targets")),
    }
}

fn set_dn(t: &mut Target, dn: &str, scope: Scope) -> Result<(), String> {
    let n = norm(dn);
    if scope == Scope::Base && (n.is_empty() || n == "cn=subschema") {
        return Err(String::new());
    }
    if n.is_empty() && scope == Scope::Subtree {
        return Ok(());
    }
    t.dn = Some((dn.to_string(), scope));
    Ok(())
}

/// What a `dn.regex` pattern selects, when it is one of the shapes Linden's rules have.
#[derive(Debug, PartialEq, Eq)]
pub enum RegexDn {
    Everything,
    Dn(String, Scope),
}

/// Recognises `.*`, `LITERAL`, `.*,LITERAL` / `.+,LITERAL` (children), `[^,]+,LITERAL` (one
/// level) and `(.*,)?LITERAL` / `(.+,)?LITERAL` (subtree), with or without `^`/`$`.
pub fn regex_dn(p: &str) -> Option<RegexDn> {
    let p = p.strip_prefix('^').unwrap_or(p);
    let p = p.strip_suffix('$').unwrap_or(p);
    if matches!(p, ".*" | ".+" | "") {
        return Some(RegexDn::Everything);
    }
    let shapes: &[(&str, Scope)] = &[
        ("(.*,)?", Scope::Subtree),
        ("(.+,)?", Scope::Subtree),
        ("(.*,)*", Scope::Subtree),
        (".*,", Scope::Children),
        (".+,", Scope::Children),
        ("[^,]+,", Scope::One),
        ("[^,]*,", Scope::One),
    ];
    let (rest, scope) = shapes
        .iter()
        .find_map(|(pre, s)| p.strip_prefix(pre).map(|r| (r, *s)))
        .or_else(|| one_captured_rdn(p).map(|r| (r, Scope::One)))
        .unwrap_or((p, Scope::Base));
    literal(rest).map(|dn| RegexDn::Dn(dn, scope))
}

/// `uid=([^,]+),REST` → `REST`: one RDN of a given type, its value captured (slapd's idiom
/// for "each entry below", used with `dn.exact,expand="uid=$1,REST"` for the entry itself).
fn one_captured_rdn(p: &str) -> Option<&str> {
    let (attr, rest) = p.split_once('=')?;
    if attr.is_empty() || !attr.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
        return None;
    }
    rest.strip_prefix("([^,]+),")
        .or_else(|| rest.strip_prefix("([^,]*),"))
}

/// Whether the subject `dn.exact,expand=VALUE` names the target entry itself: the target is
/// `ATTR=([^,]+),REST` and VALUE is `ATTR=$1,REST`, i.e. `self`.
fn expands_to_self(value: &str, target_regex: Option<&str>) -> bool {
    let Some(p) = target_regex else { return false };
    let p = p.strip_prefix('^').unwrap_or(p);
    let p = p.strip_suffix('$').unwrap_or(p);
    if one_captured_rdn(p).is_none() || p.matches('(').count() != 1 {
        return false;
    }
    let norm = |s: &str| s.to_ascii_lowercase().replace(", ", ",");
    ["([^,]+)", "([^,]*)"]
        .iter()
        .any(|g| norm(&value.replace("$1", g)) == norm(p))
}

/// A regular expression without operators, as the text it matches.
fn literal(p: &str) -> Option<String> {
    let mut out = String::new();
    let mut chars = p.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next()? {
                // `\,` in a DN pattern is an escaped comma in a value.
                ',' => out.push_str("\\,"),
                n => out.push(n),
            },
            '.' | '*' | '+' | '?' | '(' | ')' | '[' | ']' | '{' | '}' | '|' | '^' | '$' => {
                return None
            }
            c => out.push(c),
        }
    }
    if out.is_empty() {
        None
    } else {
        Some(out)
    }
}

fn is_level(w: &str) -> bool {
    let l = w.to_ascii_lowercase();
    let l = l.strip_prefix("self").unwrap_or(&l);
    matches!(
        l,
        "none"
            | "disclose"
            | "auth"
            | "compare"
            | "search"
            | "read"
            | "write"
            | "add"
            | "delete"
            | "manage"
    ) || w.starts_with(['=', '+', '-'])
}

/// The rights a level or privilege list implies, and a note when the translation differs.
fn parse_level(w: &str, covers_entry: bool) -> (u16, Option<String>) {
    use rights::*;
    let lower = w.to_ascii_lowercase();
    if lower.starts_with("self") {
        return (
            0,
            Some(format!(
                "'{w}' (only the requester's own DN as the value) has no equivalent: carried as none"
            )),
        );
    }
    let read = AUTH | COMPARE | SEARCH | READ;
    let write = read | WRITE | if covers_entry { ADD | DELETE } else { 0 };
    match lower.as_str() {
        "none" => (0, None),
        "disclose" => (
            0,
            Some("'disclose' has no equivalent (Linden never discloses what a client may not read): carried as none".into()),
        ),
        "auth" => (AUTH, None),
        "compare" => (AUTH | COMPARE, None),
        "search" => (AUTH | COMPARE | SEARCH, None),
        "read" => (read, None),
        "write" => (write, None),
        "add" => (read | ADD, None),
        "delete" => (read | DELETE, None),
        "manage" => (
            ALL,
            Some("'manage' is carried as 'all': Linden's rules never allow writing operational attributes or the configuration".into()),
        ),
        _ => {
            let mut r = 0;
            let mut note = None;
            let (op, letters) = w.split_at(1);
            if op != "=" {
                note = Some(format!(
                    "'{w}' adds to or removes from rights of other clauses, which Linden does not combine: carried as '={letters}'"
                ));
            }
            for c in letters.chars() {
                r |= match c {
                    'm' => ALL,
                    'w' => WRITE | if covers_entry { ADD | DELETE } else { 0 },
                    'a' => ADD,
                    'z' => DELETE,
                    'r' => READ,
                    's' => SEARCH,
                    'c' => COMPARE,
                    'x' => AUTH,
                    'd' | '0' => 0,
                    other => {
                        note = Some(format!("unknown privilege '{other}' in '{w}' is ignored"));
                        0
                    }
                };
            }
            (r, note)
        }
    }
}

/// The subject of a clause in Linden's terms.
fn parse_who(words: &[&str], target_regex: Option<&str>) -> Result<String, String> {
    let [w] = words else {
        return Err(if words.is_empty() {
            "no subject".into()
        } else {
            format!(
                "'{}' combines conditions, which Linden's subjects cannot",
                words.join(" ")
            )
        });
    };
    match w.to_ascii_lowercase().as_str() {
        "*" => return Ok("*".into()),
        "anonymous" => return Ok("anonymous".into()),
        "users" => return Ok("users".into()),
        "self" => return Ok("self".into()),
        _ => {}
    }
    let Some((key, value)) = w.split_once('=') else {
        return Err(format!("subject '{w}' has no equivalent"));
    };
    let key = key.to_ascii_lowercase();
    let (kind, style) = key.split_once('.').unwrap_or((key.as_str(), ""));
    let (style, modifier) = style.split_once(',').unwrap_or((style, ""));
    if kind == "dn"
        && matches!(style, "" | "base" | "baseobject" | "exact")
        && modifier == "expand"
        && expands_to_self(value, target_regex)
    {
        return Ok("self".into());
    }
    if modifier == "expand" && value.contains('$') {
        return Err(format!(
            "'{w}' uses the target's regular expression matches, which Linden has not"
        ));
    }
    if kind == "dn" {
        return match style {
            "" | "base" | "baseobject" | "exact" => Ok(format!("dn:{value}")),
            "sub" | "subtree" => Ok(format!("subtree:{value}")),
            "regex" => match regex_dn(value) {
                Some(RegexDn::Everything) => Ok("users".into()),
                Some(RegexDn::Dn(dn, Scope::Base)) => Ok(format!("dn:{dn}")),
                Some(RegexDn::Dn(dn, Scope::Subtree)) => Ok(format!("subtree:{dn}")),
                _ => Err(format!(
                    "the regular expression '{value}' is not one DN or a subtree, which is all Linden's subjects can name"
                )),
            },
            other => Err(format!("dn style '{other}' has no equivalent in Linden's subjects")),
        };
    }
    if kind == "group" || kind.starts_with("group/") {
        let mut parts = kind.split('/').skip(1);
        let oc = parts.next().map(str::to_ascii_lowercase);
        let attr = parts.next().map(str::to_ascii_lowercase);
        let ok = matches!(
            (oc.as_deref(), attr.as_deref()),
            (None, None)
                | (Some("groupofnames"), None | Some("member"))
                | (Some("groupofuniquenames"), Some("uniquemember"))
        );
        if !ok {
            return Err(format!(
                "'{w}': Linden's groups are groupOfNames (member) and groupOfUniqueNames (uniqueMember)"
            ));
        }
        if !matches!(style, "" | "exact" | "base") {
            return Err(format!("group style '{style}' has no equivalent"));
        }
        return Ok(format!("group:{value}"));
    }
    Err(format!(
        "subject '{kind}' has no equivalent in Linden's rules"
    ))
}

/// A DN compared loosely: lower case, no spaces around separators.
fn norm(dn: &str) -> String {
    super::slapd_d::split_dn(dn)
        .iter()
        .map(|r| match r.split_once('=') {
            Some((a, v)) => format!("{}={}", a.trim(), v.trim()),
            None => r.clone(),
        })
        .collect::<Vec<_>>()
        .join(",")
        .to_ascii_lowercase()
}

/// `a` is `b` or below it (`b` empty: the root, above everything).
fn at_or_below(a: &str, b: &str) -> bool {
    b.is_empty() || a == b || a.ends_with(&format!(",{b}"))
}

fn depth(dn: &str) -> usize {
    if dn.is_empty() {
        0
    } else {
        super::slapd_d::split_dn(dn).len()
    }
}

/// The pairs (entry, attribute) both targets select, when there are any.
pub fn intersect(a: &Target, b: &Target) -> Option<Target> {
    let dn = match (&a.dn, &b.dn) {
        (None, x) | (x, None) => x.clone(),
        (Some((x, sx)), Some((y, sy))) => Some(intersect_dn((x, *sx), (y, *sy))?),
    };
    let filter = match (&a.filter, &b.filter) {
        (None, f) | (f, None) => f.clone(),
        (Some(f), Some(g)) if f == g => Some(f.clone()),
        (Some(f), Some(g)) => Some(format!("(&{}{})", paren(f), paren(g))),
    };
    let attrs = match (&a.attrs, &b.attrs) {
        (None, x) | (x, None) => x.clone(),
        (Some(x), Some(y)) => {
            let both: Vec<String> = y
                .iter()
                .filter(|n| x.iter().any(|m| m.eq_ignore_ascii_case(n)))
                .cloned()
                .collect();
            if both.is_empty() {
                return None;
            }
            Some(both)
        }
    };
    Some(Target { dn, filter, attrs })
}

fn paren(f: &str) -> String {
    if f.starts_with('(') {
        f.to_string()
    } else {
        format!("({f})")
    }
}

/// The entries two (DN, scope) pairs both select, as one pair; `None`: none.
fn intersect_dn(a: (&String, Scope), b: (&String, Scope)) -> Option<(String, Scope)> {
    use Scope::*;
    let (na, nb) = (norm(a.0), norm(b.0));
    // Make `a` the higher (or equal) one.
    let (a, b, na, nb) = if at_or_below(&nb, &na) {
        (a, b, na, nb)
    } else if at_or_below(&na, &nb) {
        (b, a, nb, na)
    } else {
        return None;
    };
    let gap = depth(&nb) - depth(&na);
    let keep_b = Some((b.0.clone(), b.1));
    let b_base = Some((b.0.clone(), Base));
    match (a.1, gap) {
        (Subtree, _) => keep_b,
        (Children, 0) => match b.1 {
            Base => None,
            Subtree => Some((b.0.clone(), Children)),
            _ => keep_b,
        },
        (Children, _) => keep_b,
        (Base, 0) => matches!(b.1, Base | Subtree).then_some(b_base).flatten(),
        (Base, _) => None,
        (One, 0) => match b.1 {
            Base => None,
            _ => Some((b.0.clone(), One)),
        },
        (One, 1) => matches!(b.1, Base | Subtree).then_some(b_base).flatten(),
        (One, _) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(text: &str, line: usize) -> Directive {
        let words = super::super::slapd_conf::split_words(text).unwrap();
        Directive {
            name: words[0].clone(),
            args: words[1..].to_vec(),
            loc: Loc {
                file: "slapd.conf".into(),
                line,
            },
        }
    }

    fn run(rules: &[&str]) -> (Vec<Rule>, Report) {
        let ds: Vec<Directive> = rules.iter().enumerate().map(|(i, r)| d(r, i + 1)).collect();
        let inputs: Vec<Input> = ds
            .iter()
            .map(|directive| Input {
                directive,
                confine: None,
            })
            .collect();
        let mut report = Report::default();
        let r = translate(&inputs, &schema::Schema::builtin(), &mut report);
        (r, report)
    }

    fn shown(r: &Rule) -> String {
        let mut s = match &r.target.dn {
            Some((dn, sc)) => format!("{}:{dn}", sc.name()),
            None => "*".into(),
        };
        if let Some(f) = &r.target.filter {
            s += &format!(" filter={f}");
        }
        if let Some(a) = &r.target.attrs {
            s += &format!(" attrs={}", a.join(","));
        }
        for c in &r.by {
            s += &format!(" | {} {}", c.who, r.right_names(c).join(","));
        }
        s
    }

    #[test]
    fn levels_become_sets() {
        let (r, rep) = run(&[
            "access to attrs=userPassword by self write by anonymous auth by * none",
            "access to dn.subtree=ou=people,dc=x filter=(objectClass=person) by users read by dn.exact=cn=a,dc=x =rc",
            "access to * by group/groupOfNames/member=cn=admins,dc=x manage by * compare",
        ]);
        assert_eq!(
            r.iter().map(shown).collect::<Vec<_>>(),
            vec![
                "* attrs=userPassword | self auth,compare,search,read,write | anonymous auth | * none",
                "subtree:ou=people,dc=x filter=(objectClass=person) | users auth,compare,search,read | dn:cn=a,dc=x compare,read",
                "* | group:cn=admins,dc=x all | * auth,compare",
            ]
        );
        // manage is reported as carried with a difference.
        assert_eq!(rep.of(Kind::Difference).count(), 1);
    }

    #[test]
    fn attributes_of_an_object_class() {
        let (r, rep) = run(&[
            "access to attrs=@organizationalUnit,entry by users read",
            "access to attrs=!person by users read",
        ]);
        let attrs = r[0].target.attrs.as_ref().unwrap();
        for a in ["ou", "objectClass", "telephoneNumber", "entry"] {
            assert!(attrs.iter().any(|x| x == a), "{a} in {attrs:?}");
        }
        assert!(!attrs.iter().any(|x| x == "mail"));
        assert_eq!(r.len(), 1);
        assert_eq!(rep.of(Kind::NotCarried).count(), 1);
    }

    #[test]
    fn write_on_the_entry_adds_and_deletes() {
        let (r, _) = run(&["access to dn.children=ou=p,dc=x by users write"]);
        assert_eq!(shown(&r[0]), "children:ou=p,dc=x | users all");
    }

    #[test]
    fn regex_shapes() {
        assert_eq!(
            regex_dn("^.*,ou=people,dc=example,dc=com$"),
            Some(RegexDn::Dn(
                "ou=people,dc=example,dc=com".into(),
                Scope::Children
            ))
        );
        assert_eq!(
            regex_dn("(.*,)?dc=example,dc=com"),
            Some(RegexDn::Dn("dc=example,dc=com".into(), Scope::Subtree))
        );
        assert_eq!(
            regex_dn("[^,]+,ou=x"),
            Some(RegexDn::Dn("ou=x".into(), Scope::One))
        );
        assert_eq!(regex_dn(".*"), Some(RegexDn::Everything));
        assert_eq!(
            regex_dn("^uid=([^,]+),ou=people$"),
            Some(RegexDn::Dn("ou=people".into(), Scope::One))
        );
        assert_eq!(regex_dn("^uid=(a|b),ou=people$"), None);
        assert_eq!(
            regex_dn("cn=a\\,b,dc=x"),
            Some(RegexDn::Dn("cn=a\\,b,dc=x".into(), Scope::Base))
        );
    }

    #[test]
    fn inexpressible_targets_and_subjects_are_reported() {
        let (r, rep) = run(&[
            "access to dn.regex=^uid=(a|b),ou=p,dc=x$ by users write",
            "access to attrs=mail by dnattr=manager write by peername.ip=127.0.0.1 read by users read",
            "access to dn.base=\"\" by * read",
        ]);
        assert_eq!(r.len(), 1);
        assert_eq!(
            shown(&r[0]),
            "* attrs=mail | users auth,compare,search,read"
        );
        let lines: Vec<usize> = rep.of(Kind::NotCarried).map(|n| n.loc.line).collect();
        assert_eq!(lines, vec![1, 2, 2]);
        assert_eq!(rep.of(Kind::NotNeeded).count(), 1);
    }

    /// slapd's idiom for "each person may change their own entry".
    #[test]
    fn captured_rdn_with_expand_is_self() {
        let (r, rep) = run(&[
            "access to dn.regex=\"^uid=([^,]+),ou=people,dc=x$\" attrs=mail by dn.exact,expand=\"uid=$1,ou=people,dc=x\" write by users read",
            "access to dn.regex=\"^uid=([^,]+),ou=people,dc=x$\" by dn.exact,expand=\"uid=$1,ou=staff,dc=x\" write",
        ]);
        assert_eq!(
            shown(&r[0]),
            "one:ou=people,dc=x attrs=mail | self auth,compare,search,read,write | users auth,compare,search,read"
        );
        assert_eq!(shown(&r[1]), "one:ou=people,dc=x | * none");
        assert_eq!(rep.of(Kind::NotCarried).count(), 1);
    }

    #[test]
    fn final_break_is_carried_into_later_rules() {
        // Debian's frontend and database rules, in slapd's order for a database entry when
        // the break rule comes first.
        let (r, rep) = run(&[
            "access to * by dn.exact=gidNumber=0+uidNumber=0,cn=peercred,cn=external,cn=auth manage by * break",
            "access to attrs=userPassword by self write by anonymous auth by * none",
            "access to dn.subtree=ou=people,dc=x by users read",
        ]);
        let root = "dn:gidNumber=0+uidNumber=0,cn=peercred,cn=external,cn=auth all";
        assert_eq!(
            r.iter().map(shown).collect::<Vec<_>>(),
            vec![
                format!("* attrs=userPassword | {root} | self auth,compare,search,read,write | anonymous auth | * none"),
                format!("subtree:ou=people,dc=x | {root} | users auth,compare,search,read"),
                format!("* | {root}"),
            ]
        );
        assert_eq!(rep.of(Kind::NotCarried).count(), 0);
    }

    #[test]
    fn break_on_a_subtree_cuts_broader_rules_down() {
        let (r, _) = run(&[
            "access to dn.subtree=ou=a,dc=x by group=cn=g,dc=x write by * break",
            "access to dn.subtree=dc=x by users read",
        ]);
        assert_eq!(
            r.iter().map(shown).collect::<Vec<_>>(),
            vec![
                "subtree:ou=a,dc=x | group:cn=g,dc=x all | users auth,compare,search,read",
                "subtree:dc=x | users auth,compare,search,read",
                "subtree:ou=a,dc=x | group:cn=g,dc=x all",
            ]
        );
    }

    #[test]
    fn continue_and_unreachable_are_reported() {
        let (r, rep) = run(&[
            "access to * by self write continue by users read",
            "access to attrs=mail by * read",
        ]);
        assert_eq!(r.len(), 1);
        assert_eq!(rep.of(Kind::Difference).count(), 1);
        assert_eq!(rep.of(Kind::NotNeeded).count(), 1);
    }

    #[test]
    fn dn_intersections() {
        let t = |dn: &str, s| Target {
            dn: Some((dn.to_string(), s)),
            ..Target::default()
        };
        use Scope::*;
        assert_eq!(
            intersect(&t("dc=x", Subtree), &t("ou=a,dc=x", One)),
            Some(t("ou=a,dc=x", One))
        );
        assert_eq!(
            intersect(&t("ou=a,dc=x", Subtree), &t("dc=x", Subtree)),
            Some(t("ou=a,dc=x", Subtree))
        );
        assert_eq!(
            intersect(&t("ou=a,dc=x", Base), &t("dc=x", One)),
            Some(t("ou=a,dc=x", Base))
        );
        assert_eq!(intersect(&t("ou=a,dc=x", Base), &t("dc=x", Base)), None);
        assert_eq!(
            intersect(&t("ou=a,dc=x", Subtree), &t("ou=b,dc=x", Subtree)),
            None
        );
        assert_eq!(
            intersect(&t("dc=x", Children), &t("DC=X", Subtree)),
            Some(t("DC=X", Children))
        );
        let a = Target {
            attrs: Some(vec!["mail".into(), "cn".into()]),
            filter: Some("(a=1)".into()),
            ..Target::default()
        };
        let b = Target {
            attrs: Some(vec!["CN".into()]),
            filter: Some("b=2".into()),
            ..Target::default()
        };
        let i = intersect(&a, &b).unwrap();
        assert_eq!(i.attrs, Some(vec!["CN".to_string()]));
        assert_eq!(i.filter.as_deref(), Some("(&(a=1)(b=2))"));
    }
}
