//! Console sessions: a random id (128 bits from the OS RNG) in a cookie, the identity's LDAP
//! connection (`client::Client`), a CSRF token every change must carry, and the time of last
//! use. At most `console_max_sessions` at once (a new login ends the one idle longest); one
//! idle longer than `console_idle_timeout` is ended, its LDAP connection closed with it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rand::RngCore;

use super::client::Client;

/// One logged-in browser.
pub struct Session {
    pub id: String,
    pub csrf: String,
    /// The DN the user is bound as.
    pub dn: String,
    /// One operation at a time per session.
    pub client: tokio::sync::Mutex<Client>,
    last_used: Mutex<Instant>,
}

/// A random token: 128 bits from the operating system's generator, as hex.
pub fn token() -> String {
    let mut b = [0u8; 16];
    rand::rngs::OsRng.fill_bytes(&mut b);
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Whether two tokens are equal, in time that does not depend on where they differ.
pub fn same_token(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

/// Every open session.
#[derive(Default)]
pub struct Sessions {
    map: Mutex<HashMap<String, Arc<Session>>>,
}

impl Sessions {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Session>>> {
        self.map.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A new session (a fresh id, never one the browser offered) for `dn` over `client`;
    /// beyond `max`, the session idle longest is ended first.
    pub fn create(&self, dn: String, client: Client, max: usize) -> Arc<Session> {
        let s = Arc::new(Session {
            id: token(),
            csrf: token(),
            dn,
            client: tokio::sync::Mutex::new(client),
            last_used: Mutex::new(Instant::now()),
        });
        let mut map = self.lock();
        while map.len() >= max.max(1) {
            let oldest = map
                .values()
                .min_by_key(|s| s.last_used())
                .map(|s| s.id.clone());
            match oldest {
                Some(id) => {
                    map.remove(&id);
                }
                None => break,
            }
        }
        map.insert(s.id.clone(), s.clone());
        s
    }

    /// The session with id `id` if it has not been idle longer than `idle`; touching it.
    /// An expired one is ended.
    pub fn get(&self, id: &str, idle: Duration) -> Option<Arc<Session>> {
        let mut map = self.lock();
        let s = map.get(id)?.clone();
        let now = Instant::now();
        if now.duration_since(s.last_used()) > idle {
            map.remove(id);
            return None;
        }
        if let Ok(mut t) = s.last_used.lock() {
            *t = now;
        }
        Some(s)
    }

    /// Ends a session (logout).
    pub fn remove(&self, id: &str) -> Option<Arc<Session>> {
        self.lock().remove(id)
    }

    /// Ends every session idle longer than `idle`.
    pub fn sweep(&self, idle: Duration) {
        let now = Instant::now();
        self.lock()
            .retain(|_, s| now.duration_since(s.last_used()) <= idle);
    }

    /// Sessions open.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Session {
    fn last_used(&self) -> Instant {
        self.last_used
            .lock()
            .map(|t| *t)
            .unwrap_or_else(|e| *e.into_inner())
    }
}
