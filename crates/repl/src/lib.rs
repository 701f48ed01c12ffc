//! Replication over LDAP Content Synchronization (RFC 4533), with OpenLDAP-compatible cookies
//! and CSNs (design.md, "Beyond one machine"). The wire codec of the controls and the Sync Info
//! message is `proto::controls::sync`.
//!
//! Modules:
//! - [`consumer`]: as OpenLDAP's syncrepl: a task per configured provider that keeps a
//!   replicated area of this server in step with it (`consumer::run`); `consumer::apply` is
//!   the socket-free part (replicated changes in the writer's job, the cookie on the suffix
//!   entry), `consumer::conn` its client connection, `consumer::spec` its configuration.

pub mod consumer;
