//! A bounded cache of verified credentials, so that repeat logins against a slow scheme
//! (Argon2id, PBKDF2, SHA-crypt) cost a keyed hash instead of the scheme's full cost.
//!
//! What is kept is a *tag*: HMAC-SHA-256, under a key drawn at random when the cache is made
//! (per process, never written anywhere), over the entry's DN, the stored `userPassword`
//! value and the password presented, each length-prefixed. A tag is inserted only after
//! [`crate::verify`] said yes. A later bind is accepted from the cache when the tag of
//! (DN, stored value, presented password) is present, so:
//!
//! - a password change, a re-hash with another scheme or cost, or a rename changes the
//!   stored value or the DN, hence the tag: old tags can never match again and simply age out;
//! - a wrong password never has a tag in the cache (nothing is inserted for a failure);
//! - the cache holds neither passwords nor anything that checks one without the key.
//!
//! Size: at most `capacity` tags (32 bytes each, about 100 bytes with the table), spread over
//! [`SHARDS`] independently locked shards. Eviction is CLOCK (second chance): each shard keeps
//! its tags in insertion order with a "used since" bit set by a hit; to make room the oldest
//! unused tag goes, used ones get another round. A capacity of 0 turns the cache off: nothing
//! is stored and every lookup misses. docs/credential-cache.md has the threat model.

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use hmac::{Hmac, Mac as _};
use rand::RngCore as _;
use sha2::Sha256;

/// Independently locked parts of the cache: binds on different connections rarely wait for
/// each other.
pub const SHARDS: usize = 16;

/// The MAC of one verified (DN, stored value, password).
pub type Tag = [u8; 32];

/// The per-process secret the tags are computed under. Not `Clone`, not printed.
struct Key([u8; 32]);

impl Key {
    fn random() -> Key {
        let mut k = [0u8; 32];
        rand::rngs::OsRng.fill_bytes(&mut k);
        Key(k)
    }
}

#[derive(Default)]
struct Shard {
    /// Tag → used since it was last passed over by the clock hand.
    tags: HashMap<Tag, bool>,
    /// The tags in the order the hand visits them (oldest first).
    order: VecDeque<Tag>,
}

/// Counts since the cache was made, for monitoring and tests.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct CacheStats {
    /// Lookups that found the tag (the password was accepted without running its scheme).
    pub hits: u64,
    /// Lookups that did not.
    pub misses: u64,
    /// Tags inserted.
    pub inserts: u64,
    /// Tags evicted to make room.
    pub evictions: u64,
}

/// The cache; shared by every connection (`&self` methods, internally locked).
pub struct CredentialCache {
    key: Key,
    /// Tags per shard; 0 when the cache is off.
    per_shard: usize,
    shards: Vec<Mutex<Shard>>,
    hits: AtomicU64,
    misses: AtomicU64,
    inserts: AtomicU64,
    evictions: AtomicU64,
}

impl fmt::Debug for CredentialCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never the key.
        f.debug_struct("CredentialCache")
            .field("capacity", &self.capacity())
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}

impl CredentialCache {
    /// A cache of at most `capacity` tags (rounded up to a multiple of [`SHARDS`]), under a
    /// fresh random key. `0` makes a cache that is off.
    pub fn new(capacity: usize) -> CredentialCache {
        let per_shard = capacity.div_ceil(SHARDS);
        let shards = if per_shard == 0 {
            Vec::new()
        } else {
            (0..SHARDS).map(|_| Mutex::default()).collect()
        };
        CredentialCache {
            key: Key::random(),
            per_shard,
            shards,
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            inserts: AtomicU64::new(0),
            evictions: AtomicU64::new(0),
        }
    }

    /// Whether the cache stores anything.
    pub fn enabled(&self) -> bool {
        self.per_shard > 0
    }

    /// Most tags held at once.
    pub fn capacity(&self) -> usize {
        self.per_shard * self.shards.len()
    }

    /// Tags held now.
    pub fn len(&self) -> usize {
        self.shards.iter().map(|s| lock(s).tags.len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The tag of `password` presented for `dn` whose entry stores `stored`. Each part is
    /// preceded by its length, so no two different triples give the same MAC input.
    pub fn tag(&self, dn: &[u8], stored: &[u8], password: &[u8]) -> Tag {
        // HMAC accepts keys of any length: this does not fail.
        let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(&self.key.0) else {
            return [0u8; 32];
        };
        for part in [dn, stored, password] {
            mac.update(&(part.len() as u64).to_be_bytes());
            mac.update(part);
        }
        mac.finalize().into_bytes().into()
    }

    fn shard(&self, tag: &Tag) -> Option<&Mutex<Shard>> {
        // The tag is uniformly random under the key: any byte picks a shard evenly.
        self.shards.get(usize::from(tag[0]) % SHARDS.max(1))
    }

    /// Whether `tag` is held; marks it used.
    pub fn contains(&self, tag: &Tag) -> bool {
        let found = self.shard(tag).is_some_and(|s| {
            let mut s = lock(s);
            match s.tags.get_mut(tag) {
                Some(used) => {
                    *used = true;
                    true
                }
                None => false,
            }
        });
        let counter = if found { &self.hits } else { &self.misses };
        counter.fetch_add(1, Ordering::Relaxed);
        found
    }

    /// Remembers `tag` (call only after the scheme verified the password), evicting the oldest
    /// unused tag of its shard when the shard is full.
    pub fn insert(&self, tag: Tag) {
        let Some(s) = self.shard(&tag) else { return };
        let mut s = lock(s);
        if s.tags.contains_key(&tag) {
            return;
        }
        // CLOCK: each pass over a used tag clears its bit, so this ends within two rounds.
        let mut evicted = 0;
        let mut visits = 2 * s.order.len();
        while s.tags.len() >= self.per_shard && visits > 0 {
            visits -= 1;
            let Some(old) = s.order.pop_front() else {
                break;
            };
            match s.tags.get_mut(&old) {
                Some(used) if *used => {
                    *used = false;
                    s.order.push_back(old);
                }
                _ => {
                    s.tags.remove(&old);
                    evicted += 1;
                }
            }
        }
        s.tags.insert(tag, false);
        s.order.push_back(tag);
        drop(s);
        self.inserts.fetch_add(1, Ordering::Relaxed);
        self.evictions.fetch_add(evicted, Ordering::Relaxed);
    }

    pub fn stats(&self) -> CacheStats {
        CacheStats {
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            inserts: self.inserts.load(Ordering::Relaxed),
            evictions: self.evictions.load(Ordering::Relaxed),
        }
    }
}

fn lock(m: &Mutex<Shard>) -> std::sync::MutexGuard<'_, Shard> {
    // A panic while holding a shard cannot leave it inconsistent in a way that matters: at
    // worst a tag is missing or held without its order slot (and then never evicted early).
    m.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_depend_on_every_part_and_on_the_key() {
        let c = CredentialCache::new(64);
        let t = c.tag(b"uid=a,dc=x", b"{ARGON2}v", b"pw");
        assert_eq!(t, c.tag(b"uid=a,dc=x", b"{ARGON2}v", b"pw"));
        assert_ne!(t, c.tag(b"uid=b,dc=x", b"{ARGON2}v", b"pw"));
        assert_ne!(t, c.tag(b"uid=a,dc=x", b"{ARGON2}w", b"pw"));
        assert_ne!(t, c.tag(b"uid=a,dc=x", b"{ARGON2}v", b"pW"));
        // Another process (another cache) has another key.
        let other = CredentialCache::new(64);
        assert_ne!(t, other.tag(b"uid=a,dc=x", b"{ARGON2}v", b"pw"));
    }

    #[test]
    fn parts_are_length_prefixed() {
        let c = CredentialCache::new(64);
        assert_ne!(c.tag(b"ab", b"c", b"d"), c.tag(b"a", b"bc", b"d"));
        assert_ne!(c.tag(b"a", b"b", b"cd"), c.tag(b"a", b"bc", b"d"));
        assert_ne!(c.tag(b"", b"", b"x"), c.tag(b"x", b"", b""));
    }

    #[test]
    fn the_key_is_the_hmac_key() {
        // The tag is exactly HMAC-SHA-256 under the cache's key, so without the key it is a
        // random-looking 32 bytes and nothing else.
        let c = CredentialCache::new(1);
        let mut mac = Hmac::<Sha256>::new_from_slice(&c.key.0).expect("any key length");
        for part in [&b"dn"[..], b"stored", b"pw"] {
            mac.update(&(part.len() as u64).to_be_bytes());
            mac.update(part);
        }
        let expected: Tag = mac.finalize().into_bytes().into();
        assert_eq!(c.tag(b"dn", b"stored", b"pw"), expected);
        assert_ne!(c.key.0, [0u8; 32], "the key is drawn at random");
        assert_ne!(c.key.0, CredentialCache::new(1).key.0);
    }

    #[test]
    fn debug_never_shows_the_key() {
        let c = CredentialCache::new(16);
        let text = format!("{c:?}");
        let hex: String = c.key.0.iter().map(|b| format!("{b:02x}")).collect();
        assert!(!text.contains(&hex) && !text.contains(&format!("{:?}", c.key.0)));
    }

    #[test]
    fn insert_then_hit_and_misses_count() {
        let c = CredentialCache::new(64);
        let t = c.tag(b"dn", b"s", b"p");
        assert!(!c.contains(&t));
        c.insert(t);
        assert!(c.contains(&t));
        assert_eq!(
            c.stats(),
            CacheStats {
                hits: 1,
                misses: 1,
                inserts: 1,
                evictions: 0
            }
        );
    }

    #[test]
    fn bounded_by_capacity() {
        let c = CredentialCache::new(2 * SHARDS);
        assert_eq!(c.capacity(), 2 * SHARDS);
        for i in 0..10_000u32 {
            c.insert(c.tag(&i.to_be_bytes(), b"s", b"p"));
        }
        assert!(c.len() <= c.capacity(), "{} > {}", c.len(), c.capacity());
        assert_eq!(c.stats().inserts - c.stats().evictions, c.len() as u64);
    }

    #[test]
    fn used_tags_get_a_second_chance() {
        // One tag per shard: fill a shard with two tags, use the first, add a third: the
        // unused second one goes.
        let c = CredentialCache::new(2 * SHARDS);
        let in_shard = |shard: usize| {
            (0u32..)
                .map(|i| c.tag(&i.to_be_bytes(), b"", b""))
                .filter(move |t| usize::from(t[0]) % SHARDS == shard)
        };
        let mut three = in_shard(0).take(3);
        let (a, b, d) = (
            three.next().expect("a"),
            three.next().expect("b"),
            three.next().expect("d"),
        );
        c.insert(a);
        c.insert(b);
        assert!(c.contains(&a));
        c.insert(d);
        assert!(c.contains(&a), "used: kept");
        assert!(!c.contains(&b), "unused: evicted");
        assert!(c.contains(&d));
    }

    #[test]
    fn capacity_zero_is_off() {
        let c = CredentialCache::new(0);
        assert!(!c.enabled());
        let t = c.tag(b"dn", b"s", b"p");
        c.insert(t);
        assert!(!c.contains(&t));
        assert_eq!(c.len(), 0);
    }
}
