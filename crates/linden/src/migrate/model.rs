//! The neutral model of a slapd configuration that both readers produce: every setting as a
//! slapd.conf directive (`suffix`, `access`, `memberof-group-oc` …) with the file and line it
//! came from. The slapd.d reader names each `olc*` attribute by its slapd.conf keyword, so the
//! translation to Linden's keys (`translate`) is written once.

use std::fmt;

/// Where a directive was read: the file and its first line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Loc {
    pub file: String,
    pub line: usize,
}

impl fmt::Display for Loc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.file, self.line)
    }
}

/// One directive: its slapd.conf keyword (lower case) and its arguments, unquoted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Directive {
    pub name: String,
    pub args: Vec<String>,
    pub loc: Loc,
}

impl Directive {
    /// The directive as slapd.conf would write it, shortened for the report.
    pub fn shown(&self) -> String {
        let mut s = self.name.clone();
        for a in &self.args {
            s.push(' ');
            if a.contains(' ') || a.is_empty() {
                s.push('"');
                s.push_str(a);
                s.push('"');
            } else {
                s.push_str(a);
            }
        }
        if s.chars().count() > 100 {
            let cut: String = s.chars().take(97).collect();
            format!("{cut}...")
        } else {
            s
        }
    }

    /// The first argument, or "".
    pub fn arg(&self) -> &str {
        self.args.first().map(String::as_str).unwrap_or("")
    }

    /// A flag directive's value: no argument, or on/true/yes, is true.
    pub fn flag(&self) -> bool {
        self.args
            .first()
            .is_none_or(|a| matches!(a.to_ascii_lowercase().as_str(), "on" | "true" | "yes" | "1"))
    }
}

/// An overlay on a database (or on the frontend: every database).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Overlay {
    pub name: String,
    pub loc: Loc,
    pub directives: Vec<Directive>,
}

/// A `database` section (`mdb`, `frontend`, `config`, `monitor` …).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Database {
    pub kind: String,
    pub loc: Loc,
    pub directives: Vec<Directive>,
    pub overlays: Vec<Overlay>,
}

impl Database {
    pub fn new(kind: &str, loc: Loc) -> Database {
        Database {
            kind: kind.to_ascii_lowercase(),
            loc,
            directives: Vec::new(),
            overlays: Vec::new(),
        }
    }

    /// The directives named `name`.
    pub fn all<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a Directive> + 'a {
        self.directives.iter().filter(move |d| d.name == name)
    }

    /// The naming contexts of the database.
    pub fn suffixes(&self) -> Vec<String> {
        self.all("suffix").map(|d| d.arg().to_string()).collect()
    }

    /// A database that holds entries (not the frontend, cn=config or cn=Monitor).
    pub fn holds_data(&self) -> bool {
        !matches!(self.kind.as_str(), "frontend" | "config" | "monitor")
    }
}

/// A schema the configuration loads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Schema {
    /// `include /etc/ldap/schema/cosine.schema` (slapd.conf).
    File { path: std::path::PathBuf, loc: Loc },
    /// `cn={1}cosine,cn=schema,cn=config` (slapd.d), or definitions written in slapd.conf
    /// itself: the name and the definitions as .schema text.
    Inline {
        name: String,
        text: String,
        loc: Loc,
    },
}

impl Schema {
    pub fn loc(&self) -> &Loc {
        match self {
            Schema::File { loc, .. } | Schema::Inline { loc, .. } => loc,
        }
    }
}

/// A whole slapd configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlapdConfig {
    /// What the configuration was read from (a file or a slapd.d directory).
    pub source: String,
    /// Global directives (before the first `database`, or the attributes of cn=config).
    pub global: Vec<Directive>,
    /// The frontend (`database frontend`, olcDatabase={-1}frontend, and in slapd.conf the
    /// access/limits directives and overlays of the global section).
    pub frontend: Database,
    /// Every other database, in order.
    pub databases: Vec<Database>,
    pub schemas: Vec<Schema>,
}

impl SlapdConfig {
    pub fn new(source: &str) -> SlapdConfig {
        SlapdConfig {
            source: source.to_string(),
            global: Vec::new(),
            frontend: Database::new(
                "frontend",
                Loc {
                    file: source.to_string(),
                    line: 0,
                },
            ),
            databases: Vec::new(),
            schemas: Vec::new(),
        }
    }
}
