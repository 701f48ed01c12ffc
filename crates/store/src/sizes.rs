//! The allocation sizes of the store's structures, as jemalloc (the server's allocator) hands
//! them out: the arithmetic `footprint` and the structures' own accounting share.

use std::mem::size_of;

use roaring::RoaringBitmap;

/// The bytes jemalloc (x86-64, 4 KiB pages) hands out for a request of `n` bytes: 8, then
/// multiples of 16 up to 128, then four classes per doubling (160, 192, 224, 256, 320, …).
pub fn alloc_size(n: usize) -> usize {
    match n {
        0 => 0,
        1..=8 => 8,
        9..=128 => n.div_ceil(16) * 16,
        _ => {
            let group = usize::BITS - 1 - (n - 1).leading_zeros();
            let step = 1usize << (group - 2);
            n.div_ceil(step) * step
        }
    }
}

/// The allocation of an `Arc<T>` (two counts, then the value).
pub(crate) fn arc_size<T>() -> usize {
    alloc_size(2 * size_of::<usize>() + size_of::<T>())
}

/// One part of a version's memory.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Part {
    pub bytes: u64,
    pub allocations: u64,
}

impl Part {
    pub(crate) fn add(&mut self, bytes: usize) {
        if bytes > 0 {
            self.bytes += bytes as u64;
            self.allocations += 1;
        }
    }
}

/// The bytes of a roaring bitmap (its container vector, each container's store), estimated
/// from its statistics: arrays at two bytes per value, bitsets at 8 KiB.
pub(crate) fn bitmap_size(b: &RoaringBitmap, part: &mut Part) {
    let s = b.statistics();
    // A container is a 16-bit key and a store (a vector or a boxed bitset): 32 bytes.
    part.add(alloc_size(s.n_containers as usize * 32));
    // `statistics` counts array capacity at four bytes a value; arrays hold `u16`s.
    let mut arrays = (s.n_bytes_array_containers / 2) as usize;
    let per_array = arrays / (s.n_array_containers as usize).max(1);
    for _ in 0..s.n_array_containers {
        let n = per_array.min(arrays);
        part.add(alloc_size(n));
        arrays -= n;
    }
    for _ in 0..s.n_bitset_containers {
        part.add(8192);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn size_classes_are_jemallocs() {
        let classes = [
            (1, 8),
            (8, 8),
            (9, 16),
            (17, 32),
            (100, 112),
            (128, 128),
            (129, 160),
            (257, 320),
            (449, 512),
            (2048, 2048),
            (2049, 2560),
            (8192, 8192),
        ];
        for (n, want) in classes {
            assert_eq!(alloc_size(n), want, "{n}");
        }
        assert_eq!(alloc_size(0), 0);
    }
}
