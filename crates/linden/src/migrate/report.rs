//! The migration report: every directive not carried over as it was, with its file, line and
//! why, so that nothing is dropped silently.

use std::fmt::Write as _;

use super::model::Loc;

/// Why a directive is in the report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    /// Linden has no equivalent; the setting is lost unless done another way.
    NotCarried,
    /// Carried over, but Linden behaves differently in a way the operator should know.
    Difference,
    /// slapd's configuration allows several readings; the report says which was taken.
    Ambiguous,
    /// Not needed in Linden (module loading, pid files, database tuning …).
    NotNeeded,
}

impl Kind {
    pub fn label(self) -> &'static str {
        match self {
            Kind::NotCarried => "not carried",
            Kind::Difference => "carried with a difference",
            Kind::Ambiguous => "ambiguous",
            Kind::NotNeeded => "not needed",
        }
    }
}

/// One line of the report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Note {
    pub loc: Loc,
    /// The directive, as slapd.conf writes it (shortened).
    pub what: String,
    pub kind: Kind,
    pub why: String,
}

/// The report being built.
#[derive(Debug, Default)]
pub struct Report {
    pub notes: Vec<Note>,
}

impl Report {
    pub fn add(&mut self, loc: &Loc, what: impl Into<String>, kind: Kind, why: impl Into<String>) {
        self.notes.push(Note {
            loc: loc.clone(),
            what: what.into(),
            kind,
            why: why.into(),
        });
    }

    /// The notes of one kind.
    pub fn of(&self, kind: Kind) -> impl Iterator<Item = &Note> {
        self.notes.iter().filter(move |n| n.kind == kind)
    }

    /// The report as text: a heading per kind (the ones that need attention first), one
    /// line per note: `FILE:LINE: DIRECTIVE: WHY`.
    pub fn render(&self, source: &str, out: &str) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "# linden migrate: {source} -> {out}");
        if self.notes.is_empty() {
            let _ = writeln!(s, "# every directive was carried over as it was");
            return s;
        }
        for kind in [
            Kind::NotCarried,
            Kind::Difference,
            Kind::Ambiguous,
            Kind::NotNeeded,
        ] {
            let notes: Vec<&Note> = self.of(kind).collect();
            if notes.is_empty() {
                continue;
            }
            let _ = writeln!(s, "\n## {} ({})", kind.label(), notes.len());
            for n in notes {
                let _ = writeln!(s, "{}: {}: {}", n.loc, n.what, n.why);
            }
        }
        s
    }
}
