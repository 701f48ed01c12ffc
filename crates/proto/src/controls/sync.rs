//! LDAP Content Synchronization (RFC 4533): the Sync Request, Sync State and Sync Done
//! controls, the Sync Info Message (an IntermediateResponse value), and the cookie in
//! OpenLDAP's form.
//!
//! ```text
//! syncRequestValue ::= SEQUENCE {            -- request control 1.3.6.1.4.1.4203.1.9.1.1
//!     mode ENUMERATED { refreshOnly (1), refreshAndPersist (3) },
//!     cookie     syncCookie OPTIONAL,        -- OCTET STRING
//!     reloadHint BOOLEAN DEFAULT FALSE }
//!
//! syncStateValue ::= SEQUENCE {              -- entry control 1.3.6.1.4.1.4203.1.9.1.2
//!     state ENUMERATED { present (0), add (1), modify (2), delete (3) },
//!     entryUUID syncUUID,                    -- OCTET STRING (SIZE(16))
//!     cookie    syncCookie OPTIONAL }
//!
//! syncDoneValue ::= SEQUENCE {               -- SearchResultDone control 1.3.6.1.4.1.4203.1.9.1.3
//!     cookie          syncCookie OPTIONAL,
//!     refreshDeletes  BOOLEAN DEFAULT FALSE }
//!
//! syncInfoValue ::= CHOICE {                 -- IntermediateResponse 1.3.6.1.4.1.4203.1.9.1.4
//!     newcookie      [0] syncCookie,
//!     refreshDelete  [1] SEQUENCE { cookie syncCookie OPTIONAL,
//!                                   refreshDone BOOLEAN DEFAULT TRUE },
//!     refreshPresent [2] SEQUENCE { cookie syncCookie OPTIONAL,
//!                                   refreshDone BOOLEAN DEFAULT TRUE },
//!     syncIdSet      [3] SEQUENCE { cookie syncCookie OPTIONAL,
//!                                   refreshDeletes BOOLEAN DEFAULT FALSE,
//!                                   syncUUIDs SET OF syncUUID } }
//! ```
//!
//! Encoders write DER (a BOOLEAN equal to its DEFAULT is left out), decoders accept BER
//! (an explicit default too). Every decoder rejects trailing bytes. A UUID that is not 16
//! bytes is refused.
//!
//! [`SyncCookie`] is the cookie as OpenLDAP's syncprov and syncrepl write it:
//! `rid=NNN,sid=SSS,csn=CSN[;CSN…]` (rid decimal, sid hex, one CSN per server id).

use std::borrow::Cow;
use std::fmt;

use ber::tag::{BOOLEAN, ENUMERATED, OCTET_STRING, SEQUENCE, SET};
use ber::{Reader, Writer};

use crate::error::DecodeErrorKind;
use crate::tags::{context, context_constructed};

/// The Sync Request control's OID.
pub const REQUEST_OID: &str = "1.3.6.1.4.1.4203.1.9.1.1";
/// The Sync State control's OID (attached to SearchResultEntry and SearchResultReference).
pub const STATE_OID: &str = "1.3.6.1.4.1.4203.1.9.1.2";
/// The Sync Done control's OID (attached to SearchResultDone).
pub const DONE_OID: &str = "1.3.6.1.4.1.4203.1.9.1.3";
/// The Sync Info Message's OID (the responseName of its IntermediateResponse).
pub const INFO_OID: &str = "1.3.6.1.4.1.4203.1.9.1.4";

/// Bytes of an entryUUID on the wire (`syncUUID`).
pub const UUID_LEN: usize = 16;

/// A 16-byte entryUUID as Sync State and syncIdSet carry it.
pub type SyncUuid = [u8; UUID_LEN];

fn uuid(bytes: &[u8]) -> Result<SyncUuid, DecodeErrorKind> {
    SyncUuid::try_from(bytes).map_err(|_| DecodeErrorKind::BadValue {
        field: "syncUUID length",
        value: bytes.len() as i64,
    })
}

/// The Sync Request mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    RefreshOnly = 1,
    RefreshAndPersist = 3,
}

/// The Sync Request control's value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncRequest<'a> {
    pub mode: Mode,
    pub cookie: Option<Cow<'a, [u8]>>,
    pub reload_hint: bool,
}

impl<'a> SyncRequest<'a> {
    /// Decodes the control value.
    pub fn decode(value: &'a [u8]) -> Result<Self, DecodeErrorKind> {
        let mut outer = Reader::new(value);
        let mut r = outer.sub(SEQUENCE)?;
        outer.finish()?;
        let m = r.read_enumerated()?;
        let mode = match m {
            1 => Mode::RefreshOnly,
            3 => Mode::RefreshAndPersist,
            _ => {
                return Err(DecodeErrorKind::BadValue {
                    field: "sync request mode",
                    value: m,
                })
            }
        };
        let cookie = r.read_optional(OCTET_STRING)?.map(Cow::Borrowed);
        let reload_hint = match r.peek_tag() {
            Some(BOOLEAN) => r.read_bool(BOOLEAN)?,
            _ => false,
        };
        r.finish()?;
        Ok(SyncRequest {
            mode,
            cookie,
            reload_hint,
        })
    }

    /// Appends the control value.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let mut w = Writer::new(out);
        let m = w.start(SEQUENCE);
        w.write_integer(ENUMERATED, self.mode as i64);
        if let Some(c) = &self.cookie {
            w.write_octets(OCTET_STRING, c);
        }
        if self.reload_hint {
            w.write_bool(BOOLEAN, true);
        }
        w.end(m);
    }
}

/// The state a Sync State control gives an entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    Present = 0,
    Add = 1,
    Modify = 2,
    Delete = 3,
}

/// The Sync State control's value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncState<'a> {
    pub state: State,
    pub entry_uuid: SyncUuid,
    pub cookie: Option<Cow<'a, [u8]>>,
}

impl<'a> SyncState<'a> {
    /// Decodes the control value.
    pub fn decode(value: &'a [u8]) -> Result<Self, DecodeErrorKind> {
        let mut outer = Reader::new(value);
        let mut r = outer.sub(SEQUENCE)?;
        outer.finish()?;
        let s = r.read_enumerated()?;
        let state = match s {
            0 => State::Present,
            1 => State::Add,
            2 => State::Modify,
            3 => State::Delete,
            _ => {
                return Err(DecodeErrorKind::BadValue {
                    field: "sync state",
                    value: s,
                })
            }
        };
        let entry_uuid = uuid(r.read_octets(OCTET_STRING)?)?;
        let cookie = r.read_optional(OCTET_STRING)?.map(Cow::Borrowed);
        r.finish()?;
        Ok(SyncState {
            state,
            entry_uuid,
            cookie,
        })
    }

    /// Appends the control value.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let mut w = Writer::new(out);
        let m = w.start(SEQUENCE);
        w.write_integer(ENUMERATED, self.state as i64);
        w.write_octets(OCTET_STRING, &self.entry_uuid);
        if let Some(c) = &self.cookie {
            w.write_octets(OCTET_STRING, c);
        }
        w.end(m);
    }
}

/// The Sync Done control's value.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SyncDone<'a> {
    pub cookie: Option<Cow<'a, [u8]>>,
    pub refresh_deletes: bool,
}

impl<'a> SyncDone<'a> {
    /// Decodes the control value.
    pub fn decode(value: &'a [u8]) -> Result<Self, DecodeErrorKind> {
        let mut outer = Reader::new(value);
        let mut r = outer.sub(SEQUENCE)?;
        outer.finish()?;
        let cookie = r.read_optional(OCTET_STRING)?.map(Cow::Borrowed);
        let refresh_deletes = match r.peek_tag() {
            Some(BOOLEAN) => r.read_bool(BOOLEAN)?,
            _ => false,
        };
        r.finish()?;
        Ok(SyncDone {
            cookie,
            refresh_deletes,
        })
    }

    /// Appends the control value.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let mut w = Writer::new(out);
        let m = w.start(SEQUENCE);
        if let Some(c) = &self.cookie {
            w.write_octets(OCTET_STRING, c);
        }
        if self.refresh_deletes {
            w.write_bool(BOOLEAN, true);
        }
        w.end(m);
    }
}

/// The Sync Info Message (the value of an IntermediateResponse named [`INFO_OID`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SyncInfo<'a> {
    /// `newcookie [0]`: the cookie moved on with nothing else to say.
    NewCookie(Cow<'a, [u8]>),
    /// `refreshDelete [1]`: the end of a delete phase (`refresh_done` false: more follows).
    RefreshDelete {
        cookie: Option<Cow<'a, [u8]>>,
        refresh_done: bool,
    },
    /// `refreshPresent [2]`: the end of a present phase.
    RefreshPresent {
        cookie: Option<Cow<'a, [u8]>>,
        refresh_done: bool,
    },
    /// `syncIdSet [3]`: many entries at once, present or (with `refresh_deletes`) deleted.
    SyncIdSet {
        cookie: Option<Cow<'a, [u8]>>,
        refresh_deletes: bool,
        uuids: Vec<SyncUuid>,
    },
}

const NEWCOOKIE: u8 = context(0);
const REFRESH_DELETE: u8 = context_constructed(1);
const REFRESH_PRESENT: u8 = context_constructed(2);
const SYNC_ID_SET: u8 = context_constructed(3);

impl<'a> SyncInfo<'a> {
    /// Decodes the IntermediateResponse value.
    pub fn decode(value: &'a [u8]) -> Result<Self, DecodeErrorKind> {
        let mut outer = Reader::new(value);
        let (tag, body) = outer.read_element()?;
        outer.finish()?;
        let mut r = Reader::new(body);
        let info = match tag {
            NEWCOOKIE => return Ok(SyncInfo::NewCookie(Cow::Borrowed(body))),
            REFRESH_DELETE | REFRESH_PRESENT => {
                let cookie = r.read_optional(OCTET_STRING)?.map(Cow::Borrowed);
                let refresh_done = match r.peek_tag() {
                    Some(BOOLEAN) => r.read_bool(BOOLEAN)?,
                    _ => true,
                };
                if tag == REFRESH_DELETE {
                    SyncInfo::RefreshDelete {
                        cookie,
                        refresh_done,
                    }
                } else {
                    SyncInfo::RefreshPresent {
                        cookie,
                        refresh_done,
                    }
                }
            }
            SYNC_ID_SET => {
                let cookie = r.read_optional(OCTET_STRING)?.map(Cow::Borrowed);
                let refresh_deletes = match r.peek_tag() {
                    Some(BOOLEAN) => r.read_bool(BOOLEAN)?,
                    _ => false,
                };
                let mut set = r.sub(SET)?;
                let mut uuids = Vec::new();
                while !set.is_empty() {
                    uuids.push(uuid(set.read_octets(OCTET_STRING)?)?);
                }
                SyncInfo::SyncIdSet {
                    cookie,
                    refresh_deletes,
                    uuids,
                }
            }
            t => {
                return Err(DecodeErrorKind::BadValue {
                    field: "sync info choice tag",
                    value: i64::from(t),
                })
            }
        };
        r.finish()?;
        Ok(info)
    }

    /// Appends the IntermediateResponse value.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let mut w = Writer::new(out);
        match self {
            SyncInfo::NewCookie(c) => w.write_octets(NEWCOOKIE, c),
            SyncInfo::RefreshDelete {
                cookie,
                refresh_done,
            }
            | SyncInfo::RefreshPresent {
                cookie,
                refresh_done,
            } => {
                let tag = if matches!(self, SyncInfo::RefreshDelete { .. }) {
                    REFRESH_DELETE
                } else {
                    REFRESH_PRESENT
                };
                let m = w.start(tag);
                if let Some(c) = cookie {
                    w.write_octets(OCTET_STRING, c);
                }
                if !refresh_done {
                    w.write_bool(BOOLEAN, false);
                }
                w.end(m);
            }
            SyncInfo::SyncIdSet {
                cookie,
                refresh_deletes,
                uuids,
            } => {
                let m = w.start(SYNC_ID_SET);
                if let Some(c) = cookie {
                    w.write_octets(OCTET_STRING, c);
                }
                if *refresh_deletes {
                    w.write_bool(BOOLEAN, true);
                }
                let s = w.start(SET);
                for u in uuids {
                    w.write_octets(OCTET_STRING, u);
                }
                w.end(s);
                w.end(m);
            }
        }
    }

    /// The cookie this message carries, if any.
    pub fn cookie(&self) -> Option<&[u8]> {
        match self {
            SyncInfo::NewCookie(c) => Some(c),
            SyncInfo::RefreshDelete { cookie, .. }
            | SyncInfo::RefreshPresent { cookie, .. }
            | SyncInfo::SyncIdSet { cookie, .. } => cookie.as_deref(),
        }
    }
}

/// A sync cookie in OpenLDAP's form: `rid=NNN,sid=SSS,csn=CSN[;CSN…]`.
///
/// `rid` is the consumer's replica id (decimal, 0..=999), echoed by the provider; `sid` the
/// server id of the server that wrote the cookie (hex, 0..=0xfff); `csns` the newest CSN the
/// holder has seen from each server id (at most one per server id, sorted by server id). A
/// cookie may carry none of them (a consumer's first request sends `rid=NNN` alone).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SyncCookie {
    pub rid: Option<u16>,
    pub sid: Option<u16>,
    pub csns: Vec<String>,
}

/// The largest replica id of a cookie (OpenLDAP: `SLAP_SYNC_RID_MAX`).
pub const RID_MAX: u16 = 999;
/// The largest server id of a cookie or CSN (OpenLDAP: `SLAP_SYNC_SID_MAX`).
pub const SID_MAX: u16 = 0xfff;

/// Why a cookie could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CookieError {
    #[error("sync cookie is not UTF-8")]
    NotUtf8,
    #[error("sync cookie has an invalid rid {0:?} (decimal 0..=999)")]
    BadRid(String),
    #[error("sync cookie has an invalid sid {0:?} (hex 0..=fff)")]
    BadSid(String),
    #[error("sync cookie has an invalid CSN {0:?}")]
    BadCsn(String),
}

impl SyncCookie {
    /// Parses a cookie. Unknown `key=value` parts (e.g. OpenLDAP's `delcsn=`) are skipped.
    pub fn parse(bytes: &[u8]) -> Result<SyncCookie, CookieError> {
        let s = std::str::from_utf8(bytes).map_err(|_| CookieError::NotUtf8)?;
        let mut c = SyncCookie::default();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            if let Some(v) = part.strip_prefix("rid=") {
                let rid = v
                    .parse::<u16>()
                    .ok()
                    .filter(|r| *r <= RID_MAX)
                    .ok_or_else(|| CookieError::BadRid(v.to_owned()))?;
                c.rid = Some(rid);
            } else if let Some(v) = part.strip_prefix("sid=") {
                let sid = u16::from_str_radix(v, 16)
                    .ok()
                    .filter(|s| *s <= SID_MAX)
                    .ok_or_else(|| CookieError::BadSid(v.to_owned()))?;
                c.sid = Some(sid);
            } else if let Some(v) = part.strip_prefix("csn=") {
                for csn in v.split(';').filter(|x| !x.is_empty()) {
                    if csn_sid(csn).is_none() {
                        return Err(CookieError::BadCsn(csn.to_owned()));
                    }
                    c.csns.push(csn.to_owned());
                }
            }
        }
        c.normalize();
        Ok(c)
    }

    /// Keeps the newest CSN of each server id, sorted by server id.
    pub fn normalize(&mut self) {
        let mut by_sid: Vec<(u16, String)> = Vec::with_capacity(self.csns.len());
        for csn in self.csns.drain(..) {
            let Some(sid) = csn_sid(&csn) else { continue };
            match by_sid.iter_mut().find(|(s, _)| *s == sid) {
                Some((_, old)) if *old < csn => *old = csn,
                Some(_) => {}
                None => by_sid.push((sid, csn)),
            }
        }
        by_sid.sort_by_key(|(s, _)| *s);
        self.csns = by_sid.into_iter().map(|(_, c)| c).collect();
    }

    /// The cookie's CSN for server id `sid`.
    pub fn csn_for(&self, sid: u16) -> Option<&str> {
        self.csns
            .iter()
            .map(String::as_str)
            .find(|c| csn_sid(c) == Some(sid))
    }
}

impl fmt::Display for SyncCookie {
    /// OpenLDAP's form: `rid=%03d`, `sid=%03x`, `csn=` with `;` between CSNs.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut sep = "";
        if let Some(rid) = self.rid {
            write!(f, "rid={rid:03}")?;
            sep = ",";
        }
        if let Some(sid) = self.sid {
            write!(f, "{sep}sid={sid:03x}")?;
            sep = ",";
        }
        if !self.csns.is_empty() {
            write!(f, "{sep}csn={}", self.csns.join(";"))?;
        }
        Ok(())
    }
}

/// The server id of a CSN in OpenLDAP's form `YYYYmmddHHMMSS.uuuuuuZ#cccccc#sss#mmmmmm`.
pub fn csn_sid(csn: &str) -> Option<u16> {
    let mut parts = csn.split('#');
    let time = parts.next()?;
    let _count = parts.next()?;
    let sid = parts.next()?;
    let _mod = parts.next()?;
    if parts.next().is_some() || !time.ends_with('Z') || time.len() < 15 {
        return None;
    }
    u16::from_str_radix(sid, 16).ok().filter(|s| *s <= SID_MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    const U1: SyncUuid = [1; 16];
    const U2: SyncUuid = [0x4f, 0x3a, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 0xff];

    fn enc(f: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
        let mut out = Vec::new();
        f(&mut out);
        out
    }

    #[test]
    fn sync_request_round_trips() {
        for req in [
            SyncRequest {
                mode: Mode::RefreshOnly,
                cookie: None,
                reload_hint: false,
            },
            SyncRequest {
                mode: Mode::RefreshAndPersist,
                cookie: Some(Cow::Borrowed(b"rid=001,csn=x")),
                reload_hint: true,
            },
        ] {
            let out = enc(|o| req.encode(o));
            assert_eq!(SyncRequest::decode(&out), Ok(req));
        }
        // DER: refreshOnly, no cookie, reloadHint left out.
        let out = enc(|o| {
            SyncRequest {
                mode: Mode::RefreshOnly,
                cookie: None,
                reload_hint: false,
            }
            .encode(o)
        });
        assert_eq!(out, [0x30, 0x03, 0x0a, 0x01, 0x01]);
        // An explicit FALSE reloadHint (BER) is accepted.
        let r = SyncRequest::decode(&[0x30, 0x06, 0x0a, 0x01, 0x03, 0x01, 0x01, 0x00]).unwrap();
        assert_eq!(r.mode, Mode::RefreshAndPersist);
        assert!(!r.reload_hint);
        // Mode 2 (reserved), trailing bytes, nothing.
        assert!(SyncRequest::decode(&[0x30, 0x03, 0x0a, 0x01, 0x02]).is_err());
        assert!(SyncRequest::decode(&[0x30, 0x03, 0x0a, 0x01, 0x01, 0x00]).is_err());
        assert!(SyncRequest::decode(&[0x30, 0x05, 0x0a, 0x01, 0x01, 0x05, 0x00]).is_err());
        assert!(SyncRequest::decode(&[]).is_err());
    }

    #[test]
    fn sync_state_round_trips() {
        for st in [
            SyncState {
                state: State::Present,
                entry_uuid: U1,
                cookie: None,
            },
            SyncState {
                state: State::Delete,
                entry_uuid: U2,
                cookie: Some(Cow::Borrowed(b"rid=000,csn=y")),
            },
            SyncState {
                state: State::Add,
                entry_uuid: U2,
                cookie: None,
            },
            SyncState {
                state: State::Modify,
                entry_uuid: U1,
                cookie: Some(Cow::Borrowed(b"")),
            },
        ] {
            let out = enc(|o| st.encode(o));
            assert_eq!(SyncState::decode(&out), Ok(st));
        }
        // A 15-byte UUID and an unknown state are refused.
        let mut bad = vec![0x30, 0x14, 0x0a, 0x01, 0x01, 0x04, 0x0f];
        bad.extend([0u8; 15]);
        assert!(SyncState::decode(&bad).is_err());
        let mut bad = vec![0x30, 0x15, 0x0a, 0x01, 0x04, 0x04, 0x10];
        bad.extend([0u8; 16]);
        assert!(SyncState::decode(&bad).is_err());
    }

    #[test]
    fn sync_done_round_trips() {
        for d in [
            SyncDone::default(),
            SyncDone {
                cookie: Some(Cow::Borrowed(b"rid=002,sid=001,csn=z")),
                refresh_deletes: true,
            },
            SyncDone {
                cookie: None,
                refresh_deletes: true,
            },
        ] {
            let out = enc(|o| d.encode(o));
            assert_eq!(SyncDone::decode(&out), Ok(d));
        }
        assert_eq!(enc(|o| SyncDone::default().encode(o)), [0x30, 0x00]);
        assert!(SyncDone::decode(&[0x30, 0x02, 0x05, 0x00]).is_err());
    }

    #[test]
    fn sync_info_round_trips_every_choice() {
        for info in [
            SyncInfo::NewCookie(Cow::Borrowed(b"rid=001,csn=a")),
            SyncInfo::RefreshDelete {
                cookie: None,
                refresh_done: true,
            },
            SyncInfo::RefreshDelete {
                cookie: Some(Cow::Borrowed(b"c")),
                refresh_done: false,
            },
            SyncInfo::RefreshPresent {
                cookie: Some(Cow::Borrowed(b"c")),
                refresh_done: true,
            },
            SyncInfo::RefreshPresent {
                cookie: None,
                refresh_done: false,
            },
            SyncInfo::SyncIdSet {
                cookie: None,
                refresh_deletes: false,
                uuids: vec![],
            },
            SyncInfo::SyncIdSet {
                cookie: Some(Cow::Borrowed(b"k")),
                refresh_deletes: true,
                uuids: vec![U1, U2],
            },
        ] {
            let out = enc(|o| info.encode(o));
            assert_eq!(SyncInfo::decode(&out), Ok(info));
        }
        // DER forms: newcookie primitive [0]; refreshPresent with the default refreshDone.
        assert_eq!(
            enc(|o| SyncInfo::NewCookie(Cow::Borrowed(b"ab")).encode(o)),
            [0x80, 0x02, b'a', b'b']
        );
        assert_eq!(
            enc(|o| SyncInfo::RefreshPresent {
                cookie: None,
                refresh_done: true
            }
            .encode(o)),
            [0xa2, 0x00]
        );
        // An explicit TRUE refreshDone, then unknown choice [4], trailing bytes, bad UUID.
        assert_eq!(
            SyncInfo::decode(&[0xa1, 0x03, 0x01, 0x01, 0xff]),
            Ok(SyncInfo::RefreshDelete {
                cookie: None,
                refresh_done: true
            })
        );
        assert!(SyncInfo::decode(&[0xa4, 0x00]).is_err());
        assert!(SyncInfo::decode(&[0xa2, 0x00, 0x00]).is_err());
        assert!(SyncInfo::decode(&[0xa3, 0x04, 0x31, 0x02, 0x04, 0x00]).is_err());
        assert_eq!(
            SyncInfo::decode(&[0x80, 0x01, b'q']).unwrap().cookie(),
            Some(&b"q"[..])
        );
    }

    #[test]
    fn sync_info_travels_in_an_intermediate_response() {
        let info = SyncInfo::RefreshDelete {
            cookie: Some(Cow::Borrowed(b"rid=001")),
            refresh_done: false,
        };
        let value = enc(|o| info.encode(o));
        let pdu = enc(|o| {
            crate::encode_intermediate_response(o, 9, Some(INFO_OID.as_bytes()), Some(&value), &[])
        });
        let msg = crate::LdapMessage::decode(&pdu).unwrap();
        assert_eq!(msg.id, 9);
        let crate::ProtocolOp::IntermediateResponse {
            oid: Some(oid),
            value: Some(v),
        } = &msg.op
        else {
            panic!("not an intermediate response: {msg:?}");
        };
        assert_eq!(&oid[..], INFO_OID.as_bytes());
        assert_eq!(SyncInfo::decode(v), Ok(info));
        // The same PDU as the generic encoder writes.
        assert_eq!(msg.to_vec(), pdu);
    }

    #[test]
    fn cookies_in_openldap_form() {
        let a = "20261125000000.000001Z#000000#001#000000";
        let b = "20261125000000.000002Z#000000#002#000000";
        let c = SyncCookie::parse(format!("rid=7,sid=01,csn={b};{a}").as_bytes()).unwrap();
        assert_eq!(c.rid, Some(7));
        assert_eq!(c.sid, Some(1));
        assert_eq!(c.csns, [a, b]);
        assert_eq!(c.to_string(), format!("rid=007,sid=001,csn={a};{b}"));
        assert_eq!(c.csn_for(2), Some(b));
        assert_eq!(SyncCookie::parse(c.to_string().as_bytes()), Ok(c));
        // The first request of a consumer, an empty cookie, an unknown part.
        let first = SyncCookie::parse(b"rid=123").unwrap();
        assert_eq!(
            (first.rid, first.sid, first.csns.len()),
            (Some(123), None, 0)
        );
        assert_eq!(first.to_string(), "rid=123");
        assert_eq!(SyncCookie::parse(b""), Ok(SyncCookie::default()));
        let d = SyncCookie::parse(format!("rid=001,csn={a},delcsn={b}").as_bytes()).unwrap();
        assert_eq!(d.csns, [a]);
        // Two CSNs of one server id: the newer stays.
        let newer = "20261125000000.000009Z#000000#001#000000";
        let e = SyncCookie::parse(format!("csn={a};{newer}").as_bytes()).unwrap();
        assert_eq!(e.csns, [newer]);
        assert!(SyncCookie::parse(b"rid=1000").is_err());
        assert!(SyncCookie::parse(b"sid=1000").is_err());
        assert!(SyncCookie::parse(b"csn=garbage").is_err());
        assert!(SyncCookie::parse(&[0xff]).is_err());
        assert_eq!(csn_sid(a), Some(1));
        assert_eq!(csn_sid("x#1#2"), None);
    }
}
