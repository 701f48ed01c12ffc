//! One module per LDAP operation, each reading decode → authorize → execute → respond.
//!
//! Writes are split in two: `submit` runs in the session's read loop (parse, resolve, check
//! what needs no data) and hands a closure to the store's writer (`write::route_write`), which
//! checks everything that depends on the data against the newest version and applies it
//! all-or-nothing, through the write path's door (`dit::write::write_job`). Password hashing
//! and verification run on the hashing threads (`credcache::Credentials::hashing_job`, shared
//! with binds), never on the read loop's runtime thread nor on the writer; the read loop awaits
//! them, so writes still reach the writer in arrival order.

pub mod add;
pub mod bind;
pub(crate) mod cancel;
pub mod compare;
pub mod delete;
pub mod extended;
pub mod modify;
pub mod modrdn;
pub mod sasl;
pub mod search;
pub(crate) mod state;
pub mod subschema;
pub(crate) mod syncprov;
pub(crate) mod txn;
pub(crate) mod write;
