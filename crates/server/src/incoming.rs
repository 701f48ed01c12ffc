//! Memory for requests being received: the read buffer of each connection and the budget all
//! of them share (`max_incoming_bytes`).
//!
//! Every connection reads into a buffer of [`FREE_BYTES`] of its own, never charged: small
//! requests, pipelined or not, need nothing else, so a connection can always make progress
//! with them whatever the others do. A request whose header announces more (a large add, a
//! bind with a big SASL token) takes the difference from the shared [`Budget`] *before* its
//! bytes are read, all at once, and gives it back when it has been handled. While the budget
//! cannot cover it, the connection's reads pause (TCP back-pressure on that client) and it
//! counts as waiting; it is then bounded by its timeouts as if it were reading.
//!
//! Why all at once: a connection never holds part of the budget while it waits for more, so
//! connections cannot block each other (each holder only needs its client to send the rest,
//! and the waiters are served first come, first served: the semaphore is fair). Reads are
//! also cut at the end of a large request, so a buffer holds at most one large request, whose
//! size it paid for: the memory of all partly received requests is at most
//! `connections × FREE_BYTES + max_incoming_bytes`.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The read buffer every connection has without charge. Large enough for any ordinary
/// request and for a pipelined batch of small ones (a search is about 100 bytes).
pub const FREE_BYTES: usize = 16 * 1024;

/// Bytes of partly received requests beyond the connections' own buffers, shared by all
/// connections (`max_incoming_bytes`), with the figures cn=Monitor and `/metrics` show.
pub struct Budget {
    permits: Arc<Semaphore>,
    total: usize,
    /// Bytes given to requests being received (the semaphore's own count also includes what
    /// it sets aside for the first waiter, which is not memory yet).
    held: Arc<AtomicUsize>,
    waiting: AtomicUsize,
}

impl Budget {
    /// A budget of `total` bytes (capped at what a semaphore can count, far beyond any memory).
    pub fn new(total: usize) -> Budget {
        let total = total.min(Semaphore::MAX_PERMITS);
        Budget {
            permits: Arc::new(Semaphore::new(total)),
            total,
            held: Arc::new(AtomicUsize::new(0)),
            waiting: AtomicUsize::new(0),
        }
    }

    /// The configured budget, in bytes.
    pub fn total(&self) -> usize {
        self.total
    }

    /// Bytes taken from the budget now by requests being received (their buffers' memory
    /// beyond `FREE_BYTES`): never more than [`Budget::total`].
    pub fn held(&self) -> usize {
        self.held.load(Ordering::Relaxed)
    }

    /// Connections whose reads are paused until the budget covers their request.
    pub fn waiting(&self) -> usize {
        self.waiting.load(Ordering::Relaxed)
    }
}

/// Counts a connection as waiting for as long as it lives (the wait may be cut short).
struct Waiting<'a>(&'a AtomicUsize);

impl<'a> Waiting<'a> {
    fn new(n: &'a AtomicUsize) -> Waiting<'a> {
        n.fetch_add(1, Ordering::Relaxed);
        Waiting(n)
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// What one request took from the budget, given back when dropped.
struct Charge {
    permit: OwnedSemaphorePermit,
    held: Arc<AtomicUsize>,
}

impl Charge {
    fn new(permit: OwnedSemaphorePermit, held: &Arc<AtomicUsize>) -> Charge {
        held.fetch_add(permit.num_permits(), Ordering::Relaxed);
        Charge {
            permit,
            held: held.clone(),
        }
    }

    fn bytes(&self) -> usize {
        self.permit.num_permits()
    }
}

impl Drop for Charge {
    fn drop(&mut self) {
        self.held
            .fetch_sub(self.permit.num_permits(), Ordering::Relaxed);
    }
}

/// What the next read of a connection needs.
pub(crate) enum Room {
    /// Read at most this many bytes (never 0: there is always a byte of the request missing).
    Ready(usize),
    /// First take this many bytes from the budget (`RequestBuf::charge`).
    Charge(usize),
}

/// The request bytes one connection has received and not yet handled.
pub(crate) struct RequestBuf {
    pub buf: Vec<u8>,
    /// What the buffer's growth beyond `FREE_BYTES` took from the budget.
    charge: Option<Charge>,
}

impl RequestBuf {
    pub fn new() -> RequestBuf {
        RequestBuf {
            buf: Vec::with_capacity(FREE_BYTES),
            charge: None,
        }
    }

    fn charged(&self) -> usize {
        self.charge.as_ref().map_or(0, Charge::bytes)
    }

    /// Gives the budget back and the buffer's memory with it.
    fn release(&mut self) {
        if self.charge.take().is_some() {
            self.buf.shrink_to(FREE_BYTES);
        }
    }

    /// What the next read needs, once the handled requests are drained from the buffer: `need`
    /// is the length announced by the header of the partial request at its start (0 while
    /// there is no complete header).
    pub fn room(&mut self, need: usize) -> Room {
        if need <= FREE_BYTES {
            self.release();
            if self.buf.capacity() < FREE_BYTES {
                self.buf.reserve_exact(FREE_BYTES - self.buf.len());
            }
            // Reads stop at the end of a large request, so what is left here is a small
            // request's start or a partial header.
            return Room::Ready(FREE_BYTES.saturating_sub(self.buf.len()).max(1));
        }
        let charge = need - FREE_BYTES;
        if self.charged() == charge {
            Room::Ready(need.saturating_sub(self.buf.len()).max(1))
        } else {
            self.release();
            Room::Charge(charge)
        }
    }

    /// Takes `bytes` from `budget` for a request of `need` bytes, waiting (counted in
    /// [`Budget::waiting`]) while others hold it, then makes room for the whole request.
    /// `false` when it can never be covered (larger than the whole budget).
    pub async fn charge(&mut self, budget: &Budget, bytes: usize, need: usize) -> bool {
        let Ok(n) = u32::try_from(bytes) else {
            return false;
        };
        if bytes > budget.total {
            return false;
        }
        let permit = match budget.permits.clone().try_acquire_many_owned(n) {
            Ok(p) => p,
            Err(_) => {
                let _waiting = Waiting::new(&budget.waiting);
                match budget.permits.clone().acquire_many_owned(n).await {
                    Ok(p) => p,
                    // The semaphore is never closed.
                    Err(_) => return false,
                }
            }
        };
        self.charge = Some(Charge::new(permit, &budget.held));
        self.buf.reserve_exact(need.saturating_sub(self.buf.len()));
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn large_requests_pay_for_their_growth_and_give_it_back() {
        let budget = Budget::new(100_000);
        let mut a = RequestBuf::new();
        assert!(matches!(a.room(0), Room::Ready(FREE_BYTES)));
        a.buf.extend_from_slice(&[0x30; 10]);
        assert!(matches!(a.room(500), Room::Ready(n) if n == FREE_BYTES - 10));
        // A request of FREE_BYTES + 60,000 bytes takes 60,000.
        let need = FREE_BYTES + 60_000;
        let Room::Charge(bytes) = a.room(need) else {
            panic!("a large request must be charged");
        };
        assert_eq!(bytes, 60_000);
        assert!(a.charge(&budget, bytes, need).await);
        assert_eq!(budget.held(), 60_000);
        assert!(a.buf.capacity() >= need);
        assert!(matches!(a.room(need), Room::Ready(n) if n == need - 10));

        // Another one does not fit: it waits, and is counted, until the first gives back.
        let mut b = RequestBuf::new();
        let Room::Charge(bytes) = b.room(need) else {
            panic!("a large request must be charged");
        };
        let mut wait = Box::pin(b.charge(&budget, bytes, need));
        assert!(futures_poll(wait.as_mut()).is_none());
        assert_eq!(budget.waiting(), 1);
        a.buf.clear();
        assert!(matches!(a.room(0), Room::Ready(FREE_BYTES)));
        assert_eq!(a.buf.capacity(), FREE_BYTES);
        assert!(wait.await);
        assert_eq!(budget.waiting(), 0);
        assert_eq!(budget.held(), 60_000);
        b.buf.clear();
        let _ = b.room(0);
        assert_eq!(budget.held(), 0);

        // Larger than the whole budget: refused rather than waited for.
        let mut c = RequestBuf::new();
        assert!(!c.charge(&budget, 100_001, FREE_BYTES + 100_001).await);
    }

    /// Polls a future once.
    fn futures_poll<F: std::future::Future>(f: std::pin::Pin<&mut F>) -> Option<F::Output> {
        let waker = std::task::Waker::noop();
        let mut cx = std::task::Context::from_waker(waker);
        match f.poll(&mut cx) {
            std::task::Poll::Ready(v) => Some(v),
            std::task::Poll::Pending => None,
        }
    }
}
