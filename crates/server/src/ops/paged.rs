//! Simple Paged Results (RFC 2696) state of one connection: the paged searches it has open.
//!
//! A paged search is bound to the version its first page ran on: that version is kept, with
//! the ids of the entries the whole search matches (a compressed bitmap). Each page takes the
//! lowest ids left, so walking all pages returns every entry exactly once, however the
//! directory changes meanwhile. A sorted paged search (RFC 2891 with RFC 2696) keeps its ids
//! in sorted order instead, sorted once on the first page. Each page gets a new cookie: an older one (a page already
//! answered, or a search dropped to make room) is refused as slapd refuses it.

use std::collections::VecDeque;
use std::sync::Arc;

use proto::ResultCode;
use store::{RoaringBitmap, Version};

use dit::error::LdapError;

/// A paged search between two pages.
pub(crate) struct Cursor {
    /// Fingerprint of the request (all but the control): a cookie serves only its own search.
    pub key: u64,
    pub version: Arc<Version>,
    /// Entries still to send.
    pub left: Left,
    /// Entries sent by earlier pages (for the size limit, which bounds the whole walk).
    pub sent: u64,
}

/// The entries a paged search has still to send.
pub(crate) enum Left {
    /// In id order (an unsorted search).
    Ids(RoaringBitmap),
    /// In the order of a server-side sort.
    Sorted(VecDeque<u32>),
}

impl Left {
    pub fn len(&self) -> u64 {
        match self {
            Left::Ids(b) => b.len(),
            Left::Sorted(v) => v.len() as u64,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The ids in the order they are to be sent.
    pub fn iter(&self) -> Box<dyn Iterator<Item = u32> + '_> {
        match self {
            Left::Ids(b) => Box::new(b.iter()),
            Left::Sorted(v) => Box::new(v.iter().copied()),
        }
    }

    /// Drops the first `n` ids (those a page sent).
    pub fn drop_first(&mut self, n: usize) {
        match self {
            Left::Ids(b) => {
                if let Some(last) = b.iter().nth(n.saturating_sub(1)).filter(|_| n > 0) {
                    b.remove_range(..=last);
                }
            }
            Left::Sorted(v) => {
                v.drain(..n.min(v.len()));
            }
        }
    }
}

/// The open paged searches of a connection, oldest first.
#[derive(Default)]
pub(crate) struct PagedSearches {
    open: VecDeque<(u64, Cursor)>,
    /// The cookie the next page gets; cookies are never reused on a connection.
    next_cookie: u64,
}

impl PagedSearches {
    /// Takes the cursor a cookie names, for the search with fingerprint `key`.
    pub fn take(&mut self, cookie: &[u8], key: u64) -> Result<Cursor, LdapError> {
        let invalid =
            || LdapError::new(ResultCode::ProtocolError, "paged results cookie is invalid");
        let n = u64::from_be_bytes(cookie.try_into().map_err(|_| invalid())?);
        if n >= self.next_cookie {
            return Err(invalid());
        }
        let Some(at) = self.open.iter().position(|(c, _)| *c == n) else {
            return Err(LdapError::new(
                ResultCode::UnwillingToPerform,
                "paged results cookie is invalid or old",
            ));
        };
        if self.open[at].1.key != key {
            return Err(LdapError::new(
                ResultCode::UnwillingToPerform,
                "paged results cookie belongs to a different search (base, scope, filter and attributes must not change between pages)",
            ));
        }
        self.open.remove(at).map(|(_, c)| c).ok_or_else(invalid)
    }

    /// Keeps a cursor for its next page and returns the cookie naming it. With `max` searches
    /// open already, the oldest is dropped (`max_paged_searches`).
    pub fn keep(&mut self, cursor: Cursor, max: usize) -> Vec<u8> {
        while self.open.len() >= max.max(1) {
            self.open.pop_front();
        }
        let n = self.next_cookie;
        self.next_cookie += 1;
        self.open.push_back((n, cursor));
        n.to_be_bytes().to_vec()
    }
}
