//! Request and response control values, one module per control (design.md: `proto` owns the
//! codecs; the server's registry decides which operations accept them).
//!
//! - [`psearch`]: Persistent Search and Entry Change Notification
//!   (draft-ietf-ldapext-psearch-03).

pub mod psearch;
