//! Work split over threads for the bulk builds (`Version::restore`, `HashTrie::from_buckets`).

/// `f` of each item, each on a thread of its own (inline when there is one), in order.
///
/// A building thread cannot fail short of running out of memory; an incomplete index would
/// then give wrong answers, so a panic in one is carried on in the caller.
pub(crate) fn map<I: Send, T: Send>(items: Vec<I>, f: impl Fn(I) -> T + Sync) -> Vec<T> {
    if items.len() <= 1 {
        return items.into_iter().map(f).collect();
    }
    let f = &f;
    std::thread::scope(|s| {
        let handles: Vec<_> = items
            .into_iter()
            .map(|item| s.spawn(move || f(item)))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
            .collect()
    })
}
