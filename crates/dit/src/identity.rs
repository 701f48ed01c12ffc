//! Who an operation acts for: the identity a connection is bound as (and, with proxied
//! authorization, the one it acts for). Kept apart from the shared state so that access
//! control can name it without depending on the whole server.

use schema::NormDn;

/// Who a connection is bound as.
#[derive(Debug, Clone, Default)]
pub struct Identity {
    /// The DN as the client gave it at bind; empty for anonymous.
    pub dn: String,
    pub ndn: Option<NormDn>,
    pub is_admin: bool,
}

impl Identity {
    pub fn is_anonymous(&self) -> bool {
        self.ndn.is_none()
    }
}
