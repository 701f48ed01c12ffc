//! Request and response control values, one module per control. Each module decodes the
//! control's value from borrowed bytes (rejecting trailing bytes) and encodes its response
//! value in one pass; the server's control registry decides which operations take which.
//!
//! - [`deref`]: Dereference (draft-masarati-ldap-deref).
//! - [`dontusecopy`]: Don't Use Copy (RFC 6171).
//! - [`matchedvalues`]: Matched Values (RFC 3876).
//! - [`paged`]: Simple Paged Results (RFC 2696).
//! - [`psearch`]: Persistent Search and Entry Change Notification
//!   (draft-ietf-ldapext-psearch-03).
//! - [`proxyauthz`]: Proxied Authorization v2 (RFC 4370).
//! - [`readentry`]: pre-read and post-read (RFC 4527).
//! - [`sort`]: server-side sort request and sortResult (RFC 2891).
//! - [`sync`]: Content Synchronization (RFC 4533): Sync Request, Sync State, Sync Done, the
//!   Sync Info Message, and the cookie in OpenLDAP's form.
//! - [`vlv`]: virtual list view request and response (draft-ietf-ldapext-ldapv3-vlv-09).

pub mod deref;
pub mod dontusecopy;
pub mod matchedvalues;
pub mod paged;
pub mod proxyauthz;
pub mod psearch;
pub mod readentry;
pub mod sort;
pub mod sync;
pub mod vlv;

pub use paged::PagedResults;

use ber::tag::{BOOLEAN, OCTET_STRING, SEQUENCE};
use ber::Writer;

use crate::Control;

/// Appends the `controls [0] Controls` element of an LDAPMessage (nothing when empty).
pub(crate) fn encode_controls(w: &mut Writer<'_>, controls: &[Control<'_>]) {
    if controls.is_empty() {
        return;
    }
    let c = w.start(crate::tags::context_constructed(0));
    for ctl in controls {
        let s = w.start(SEQUENCE);
        w.write_octets(OCTET_STRING, &ctl.oid);
        if ctl.critical {
            w.write_bool(BOOLEAN, true);
        }
        if let Some(v) = &ctl.value {
            w.write_octets(OCTET_STRING, v);
        }
        w.end(s);
    }
    w.end(c);
}
