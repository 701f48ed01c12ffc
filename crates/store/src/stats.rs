//! Figures the writer keeps about itself, for monitoring (cn=Monitor, `/metrics`): batches
//! committed, operations per batch, the time each batch's journal commit took (the fsync) and
//! the operations waiting for the writer.
//!
//! Everything is a relaxed atomic, written by the writer thread (and, for the queue depth, by
//! whoever hands it a job) and read by monitoring at any time: no lock, no allocation. Readers
//! may see one batch's figures half updated; each figure on its own is exact.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Sub-buckets per power of two: four, so a value is placed within about 19 % of itself.
const SUB_BITS: u32 = 2;
const SUB: usize = 1 << SUB_BITS;
/// Buckets: values 0..SUB exactly, then SUB per power of two up to 2^64.
const BUCKETS: usize = SUB + (64 - SUB_BITS as usize) * SUB;

/// A histogram of `u64` samples (microseconds, counts) in logarithmic buckets, updated with
/// relaxed atomics only: cheap enough for the writer's every batch, readable at any time.
pub struct Histogram {
    buckets: Box<[AtomicU64]>,
    count: AtomicU64,
    sum: AtomicU64,
    max: AtomicU64,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            buckets: (0..BUCKETS).map(|_| AtomicU64::new(0)).collect(),
            count: AtomicU64::new(0),
            sum: AtomicU64::new(0),
            max: AtomicU64::new(0),
        }
    }
}

/// The bucket a value falls in.
fn bucket(v: u64) -> usize {
    if v < SUB as u64 {
        return v as usize;
    }
    let exp = 63 - v.leading_zeros(); // >= SUB_BITS
    let mantissa = ((v >> (exp - SUB_BITS)) as usize) & (SUB - 1);
    SUB + (exp - SUB_BITS) as usize * SUB + mantissa
}

/// The largest value bucket `i` holds.
fn upper(i: usize) -> u64 {
    if i < SUB {
        return i as u64;
    }
    let exp = (i - SUB) / SUB + SUB_BITS as usize;
    let mantissa = ((i - SUB) % SUB) as u64;
    let low = (1u64 << exp) + (mantissa << (exp - SUB_BITS as usize));
    low.saturating_add((1u64 << (exp - SUB_BITS as usize)) - 1)
}

impl Histogram {
    pub fn record(&self, v: u64) {
        self.buckets[bucket(v)].fetch_add(1, Ordering::Relaxed);
        self.count.fetch_add(1, Ordering::Relaxed);
        self.sum.fetch_add(v, Ordering::Relaxed);
        self.max.fetch_max(v, Ordering::Relaxed);
    }

    pub fn count(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }

    pub fn sum(&self) -> u64 {
        self.sum.load(Ordering::Relaxed)
    }

    pub fn max(&self) -> u64 {
        self.max.load(Ordering::Relaxed)
    }

    /// The value below which a fraction `q` (0–1) of the samples lie, to within a bucket (the
    /// bucket's upper end, never above the largest sample); 0 without samples.
    pub fn quantile(&self, q: f64) -> u64 {
        let counts: Vec<u64> = self
            .buckets
            .iter()
            .map(|b| b.load(Ordering::Relaxed))
            .collect();
        let total: u64 = counts.iter().sum();
        if total == 0 {
            return 0;
        }
        let rank = ((q.clamp(0.0, 1.0) * total as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (i, n) in counts.iter().enumerate() {
            seen += n;
            if seen >= rank {
                return upper(i).min(self.max());
            }
        }
        self.max()
    }

    /// How many samples are at most `bound`, for each bound of `bounds` (ascending): the
    /// cumulative buckets of a Prometheus histogram. Exact when every bound is a power of two
    /// minus one or below `SUB` (bucket edges); otherwise to within a bucket.
    pub fn cumulative(&self, bounds: &[u64]) -> Vec<u64> {
        let mut out = Vec::with_capacity(bounds.len());
        let mut seen = 0;
        let mut i = 0;
        for &b in bounds {
            while i < BUCKETS && upper(i) <= b {
                seen += self.buckets[i].load(Ordering::Relaxed);
                i += 1;
            }
            out.push(seen);
        }
        out
    }
}

/// The writer's figures (`Store::stats`).
#[derive(Default)]
pub struct WriterStats {
    /// Batches that changed something and were committed (one journal record and fsync each).
    pub batches: AtomicU64,
    /// Operations the writer ran (committed or refused by their own checks).
    pub operations: AtomicU64,
    /// Operations handed to the writer and not yet taken by it.
    pub queued: AtomicU64,
    /// Operations per batch.
    pub batch_size: Histogram,
    /// Time the journal took to make each batch durable (the fsync), in microseconds.
    pub commit_micros: Histogram,
    /// Whether the last batch the journal was given was refused for lack of space (writes are
    /// being refused until space is freed); cleared by the next batch it accepts.
    pub disk_full: AtomicBool,
    /// Batches refused because the journal had no room (disk full) since start.
    pub refused_full: AtomicU64,
}

impl WriterStats {
    pub(crate) fn queued(&self) {
        self.queued.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn taken(&self, n: u64) {
        // Saturating: a job that failed to be queued was never counted.
        let _ = self
            .queued
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |q| {
                Some(q.saturating_sub(n))
            });
    }

    pub fn queue_depth(&self) -> u64 {
        self.queued.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_cover_values_in_order() {
        for v in [0u64, 1, 3, 4, 5, 7, 8, 1000, 65_535, 1 << 40, u64::MAX] {
            let b = bucket(v);
            assert!(upper(b) >= v, "{v} in bucket {b} up to {}", upper(b));
            if b > 0 {
                assert!(
                    upper(b - 1) < v,
                    "{v}: bucket {b} is not the first to hold it"
                );
            }
        }
        assert_eq!(upper(BUCKETS - 1), u64::MAX);
    }

    #[test]
    fn quantiles_within_a_bucket() {
        let h = Histogram::default();
        for v in 1..=1000u64 {
            h.record(v);
        }
        assert_eq!(h.count(), 1000);
        assert_eq!(h.sum(), 500_500);
        let p50 = h.quantile(0.5);
        assert!((500..=600).contains(&p50), "p50 {p50}");
        let p99 = h.quantile(0.99);
        assert!((990..=1000).contains(&p99), "p99 {p99}");
        assert_eq!(h.quantile(1.0), 1000);
        assert_eq!(
            h.cumulative(&[0, 3, 1023, u64::MAX]),
            vec![0, 3, 1000, 1000]
        );
        assert_eq!(Histogram::default().quantile(0.5), 0);
    }
}
