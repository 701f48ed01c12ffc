//! Persistent Search (draft-ietf-ldapext-psearch-03).
//!
//! ```text
//! PersistentSearch ::= SEQUENCE {            -- request control 2.16.840.1.113730.3.4.3
//!         changeTypes INTEGER,               -- add 1, delete 2, modify 4, modDN 8
//!         changesOnly BOOLEAN,
//!         returnECs BOOLEAN }
//!
//! EntryChangeNotification ::= SEQUENCE {     -- response control 2.16.840.1.113730.3.4.7
//!         changeType ENUMERATED { add (1), delete (2), modify (4), modDN (8) },
//!         previousDN   LDAPDN OPTIONAL,      -- modDN only
//!         changeNumber INTEGER OPTIONAL }
//! ```

use std::borrow::Cow;

use ber::tag::{BOOLEAN, ENUMERATED, INTEGER, OCTET_STRING, SEQUENCE};
use ber::{Reader, Writer};

use crate::error::DecodeErrorKind;

/// The Persistent Search request control's OID.
pub const OID: &str = "2.16.840.1.113730.3.4.3";
/// The Entry Change Notification response control's OID.
pub const ECN_OID: &str = "2.16.840.1.113730.3.4.7";

/// One kind of change, as the changeTypes bits and the ECN changeType value name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum ChangeType {
    Add = 1,
    Delete = 2,
    Modify = 4,
    ModDn = 8,
}

impl ChangeType {
    /// The bit (and ENUMERATED value) of this change type.
    pub fn bit(self) -> u8 {
        self as u8
    }

    fn from_value(v: i64) -> Option<ChangeType> {
        Some(match v {
            1 => ChangeType::Add,
            2 => ChangeType::Delete,
            4 => ChangeType::Modify,
            8 => ChangeType::ModDn,
            _ => return None,
        })
    }
}

/// Every change type (`changeTypes` 15).
pub const ALL_CHANGES: u8 = 15;

/// The request control's value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PersistentSearch {
    /// Which changes to send: an OR of [`ChangeType`] bits (1..=15).
    pub change_types: u8,
    /// Send no initial result set, only changes.
    pub changes_only: bool,
    /// Attach an Entry Change Notification to each entry sent for a change.
    pub return_ecs: bool,
}

impl PersistentSearch {
    /// Decodes the control value. changeTypes must name at least one change type and no
    /// unknown bit (the draft gives no meaning to others; slapd-era servers refuse them).
    pub fn decode(value: &[u8]) -> Result<Self, DecodeErrorKind> {
        let mut outer = Reader::new(value);
        let mut r = outer.sub(SEQUENCE)?;
        outer.finish()?;
        let types = r.read_integer(INTEGER)?;
        let changes_only = r.read_bool(BOOLEAN)?;
        let return_ecs = r.read_bool(BOOLEAN)?;
        r.finish()?;
        if !(1..=i64::from(ALL_CHANGES)).contains(&types) {
            return Err(DecodeErrorKind::BadValue {
                field: "persistent search changeTypes",
                value: types,
            });
        }
        Ok(PersistentSearch {
            change_types: types as u8,
            changes_only,
            return_ecs,
        })
    }

    /// Appends the control value (for clients and tests).
    pub fn encode(&self, out: &mut Vec<u8>) {
        let mut w = Writer::new(out);
        let m = w.start(SEQUENCE);
        w.write_integer(INTEGER, i64::from(self.change_types));
        w.write_bool(BOOLEAN, self.changes_only);
        w.write_bool(BOOLEAN, self.return_ecs);
        w.end(m);
    }

    /// Whether the client asked for changes of this type.
    pub fn wants(&self, t: ChangeType) -> bool {
        self.change_types & t.bit() != 0
    }
}

/// The response control's value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntryChangeNotification<'a> {
    pub change_type: ChangeType,
    /// The DN before a modDN (absent for the other change types).
    pub previous_dn: Option<Cow<'a, [u8]>>,
    pub change_number: Option<i64>,
}

impl<'a> EntryChangeNotification<'a> {
    /// Appends the control value.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let mut w = Writer::new(out);
        let m = w.start(SEQUENCE);
        w.write_integer(ENUMERATED, i64::from(self.change_type.bit()));
        if let Some(dn) = &self.previous_dn {
            w.write_octets(OCTET_STRING, dn);
        }
        if let Some(n) = self.change_number {
            w.write_integer(INTEGER, n);
        }
        w.end(m);
    }

    /// Decodes the control value (for clients and tests).
    pub fn decode(value: &'a [u8]) -> Result<Self, DecodeErrorKind> {
        let mut outer = Reader::new(value);
        let mut r = outer.sub(SEQUENCE)?;
        outer.finish()?;
        let v = r.read_enumerated()?;
        let change_type = ChangeType::from_value(v).ok_or(DecodeErrorKind::BadValue {
            field: "entry change notification changeType",
            value: v,
        })?;
        let previous_dn = r.read_optional(OCTET_STRING)?.map(Cow::Borrowed);
        let change_number = match r.read_optional(INTEGER)? {
            Some(c) => Some(ber::decode_integer(c)?),
            None => None,
        };
        r.finish()?;
        Ok(EntryChangeNotification {
            change_type,
            previous_dn,
            change_number,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_round_trips_in_der_form() {
        let p = PersistentSearch {
            change_types: 15,
            changes_only: true,
            return_ecs: true,
        };
        let mut out = Vec::new();
        p.encode(&mut out);
        // changeTypes any, changesOnly and returnECs TRUE, in the DER form.
        assert_eq!(
            out,
            [0x30, 0x09, 0x02, 0x01, 0x0f, 0x01, 0x01, 0xff, 0x01, 0x01, 0xff]
        );
        assert_eq!(PersistentSearch::decode(&out), Ok(p));
        assert!(p.wants(ChangeType::ModDn));
        let q = PersistentSearch {
            change_types: 2,
            changes_only: false,
            return_ecs: false,
        };
        let mut out = Vec::new();
        q.encode(&mut out);
        assert_eq!(PersistentSearch::decode(&out), Ok(q));
        assert!(q.wants(ChangeType::Delete) && !q.wants(ChangeType::Add));
    }

    #[test]
    fn bad_requests_are_refused() {
        // changeTypes 0 and 16 name nothing the draft defines.
        for t in [0u8, 16] {
            let v = [
                0x30, 0x09, 0x02, 0x01, t, 0x01, 0x01, 0x00, 0x01, 0x01, 0x00,
            ];
            assert!(PersistentSearch::decode(&v).is_err());
        }
        // Missing returnECs, trailing bytes, wrong outer tag.
        assert!(
            PersistentSearch::decode(&[0x30, 0x06, 0x02, 0x01, 0x01, 0x01, 0x01, 0x00]).is_err()
        );
        assert!(PersistentSearch::decode(&[
            0x30, 0x09, 0x02, 0x01, 0x01, 0x01, 0x01, 0x00, 0x01, 0x01, 0x00, 0x00
        ])
        .is_err());
        assert!(PersistentSearch::decode(&[0x31, 0x00]).is_err());
        assert!(PersistentSearch::decode(&[]).is_err());
    }

    #[test]
    fn ecn_round_trips_with_and_without_optional_parts() {
        for ecn in [
            EntryChangeNotification {
                change_type: ChangeType::Add,
                previous_dn: None,
                change_number: None,
            },
            EntryChangeNotification {
                change_type: ChangeType::ModDn,
                previous_dn: Some(Cow::Borrowed(b"uid=a,dc=example,dc=com")),
                change_number: Some(42),
            },
            EntryChangeNotification {
                change_type: ChangeType::Delete,
                previous_dn: None,
                change_number: Some(7),
            },
        ] {
            let mut out = Vec::new();
            ecn.encode(&mut out);
            assert_eq!(EntryChangeNotification::decode(&out), Ok(ecn));
        }
        let mut out = Vec::new();
        EntryChangeNotification {
            change_type: ChangeType::Modify,
            previous_dn: None,
            change_number: None,
        }
        .encode(&mut out);
        assert_eq!(out, [0x30, 0x03, 0x0a, 0x01, 0x04]);
        // An unknown changeType is refused.
        assert!(EntryChangeNotification::decode(&[0x30, 0x03, 0x0a, 0x01, 0x03]).is_err());
    }
}
