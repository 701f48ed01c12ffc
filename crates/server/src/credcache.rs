//! Checking a presented password against an entry's stored `userPassword` values: where the
//! work runs, and the cache of verified credentials that makes repeat logins cheap.
//!
//! - Cheap schemes (`{SSHA}`, `{SSHA512}`, `{SHA}`, cleartext … : one digest, a few
//!   microseconds, `pwhash::is_cheap`) are verified inline on the connection's task: a hop to
//!   the hashing threads and back would cost more than the hash.
//! - Slow schemes (Argon2id, PBKDF2, SHA-crypt) first ask the credential cache
//!   (`pwhash::cache`): a hit is a keyed MAC over (DN, stored value, password) and a table
//!   lookup. A miss runs the scheme on the hashing threads (`lowprio::Pool`: one per core,
//!   five nice steps below the server), so a cold login never stalls other connections:
//!   however many first logins arrive at once, at most one hash per core runs, and a
//!   connection with a request to answer takes the core before it. A success is remembered.
//!   `credential_cache_entries = 0` turns the cache off. docs/credential-cache.md has the
//!   threat model.
//!
//! Only the password check is cached: the entry, its access rules, the failed-bind throttling
//! and anything else a bind checks are looked at every time by the caller.
//!
//! The hashing threads are the one place slow password work runs: changes hash new passwords
//! and verify old ones there too (`Credentials::hashing_job`: add, modify, Password Modify,
//! the password policy's checks), so a burst of password changes and a burst of first logins
//! share the same bounded, lower-priority threads instead of two pools.

use std::sync::atomic::{AtomicU64, Ordering};

use pwhash::cache::{CacheStats, CredentialCache};

/// How much lower than the server's the hashing threads' CPU priority is (nice steps): at 5 a
/// connection's thread weighs three times a hash on a shared core and takes it first when it
/// wakes up, while first logins still get a quarter of a busy core each.
const HASH_NICE_STEPS: i32 = 5;

/// What `Shared` holds for password checks: the cache and how verifications ran.
#[derive(Debug)]
pub struct Credentials {
    cache: CredentialCache,
    /// Where slow schemes run.
    hashing: crate::lowprio::Pool,
    /// Checks that ran a slow scheme on the hashing threads.
    slow: AtomicU64,
    /// Checks done inline (every stored value a cheap scheme).
    inline: AtomicU64,
    /// Jobs of changes run on the hashing threads (`hashing_job`).
    change_jobs: AtomicU64,
}

/// Counts since start, for monitoring and tests (which assert on them instead of on timings).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct CredentialStats {
    pub cache: CacheStats,
    /// Password checks that ran a slow scheme (Argon2, PBKDF2, SHA-crypt) on the hashing
    /// threads.
    pub slow_verifications: u64,
    /// Password checks done inline on the connection's task (cheap schemes only).
    pub inline_verifications: u64,
    /// Slow password work of changes run on the hashing threads: hashing the new passwords of
    /// adds, modifies and Password Modify, verifying an old password, the password policy's
    /// checks.
    pub change_hashing_jobs: u64,
}

impl Credentials {
    /// `capacity` tags at most (`credential_cache_entries`); 0 = no cache.
    pub fn new(capacity: usize) -> Credentials {
        Credentials {
            cache: CredentialCache::new(capacity),
            hashing: crate::lowprio::Pool::new(
                "linden-hash",
                HASH_NICE_STEPS,
                pwhash::concurrent_hashes(),
            ),
            slow: AtomicU64::new(0),
            inline: AtomicU64::new(0),
            change_jobs: AtomicU64::new(0),
        }
    }

    pub fn stats(&self) -> CredentialStats {
        CredentialStats {
            cache: self.cache.stats(),
            slow_verifications: self.slow.load(Ordering::Relaxed),
            inline_verifications: self.inline.load(Ordering::Relaxed),
            change_hashing_jobs: self.change_jobs.load(Ordering::Relaxed),
        }
    }

    /// Runs slow password work of a change (hashing a new password, verifying an old one, the
    /// password policy's checks) on the hashing threads, where binds' slow verifications run,
    /// and returns its result: never on a runtime thread (it would stall every connection
    /// served there) nor on the writer (every write).
    pub(crate) async fn hashing_job<R: Send + 'static>(
        &self,
        job: impl FnOnce() -> R + Send + 'static,
    ) -> dit::error::LdapResult<R> {
        self.change_jobs.fetch_add(1, Ordering::Relaxed);
        self.hashing.run(job).await.map_err(|e| {
            dit::error::LdapError::new(
                proto::ResultCode::Other,
                format!("password hashing failed: {e}"),
            )
        })
    }

    /// Whether `password` matches one of `stored`, the `userPassword` values of the entry
    /// `ndn` (normalized). `cache` is false when a success must not be remembered (the values
    /// are a stand-in for a DN without a password).
    ///
    /// Every value is checked on a miss (not only until the first match), as before, so the
    /// work does not tell which value matched.
    pub async fn verify(&self, ndn: &str, stored: &[&[u8]], password: &[u8], cache: bool) -> bool {
        if stored.iter().all(|s| pwhash::is_cheap(s)) {
            self.inline.fetch_add(1, Ordering::Relaxed);
            return stored
                .iter()
                .fold(false, |ok, s| pwhash::verify(s, password) | ok);
        }
        // The tags are computed even when they cannot be used (a stand-in, or the cache off),
        // so a DN without a password costs the same as one with a wrong password.
        let tags: Vec<pwhash::cache::Tag> = stored
            .iter()
            .map(|s| self.cache.tag(ndn.as_bytes(), s, password))
            .collect();
        if cache && tags.iter().any(|t| self.cache.contains(t)) {
            return true;
        }
        self.slow.fetch_add(1, Ordering::Relaxed);
        let pw = password.to_vec();
        let stored: Vec<Vec<u8>> = stored.iter().map(|s| s.to_vec()).collect();
        let check = move || {
            stored.iter().enumerate().fold(None, |found, (i, s)| {
                let ok = pwhash::verify(s, &pw);
                found.or(ok.then_some(i))
            })
        };
        let matched = match self.hashing.run(check).await {
            Ok(m) => m,
            Err(e) => {
                tracing::error!("password check not done: {e}");
                None
            }
        };
        match matched {
            Some(i) => {
                if cache {
                    if let Some(&t) = tags.get(i) {
                        self.cache.insert(t);
                    }
                }
                true
            }
            None => false,
        }
    }
}
