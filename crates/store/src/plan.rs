//! Search planning: pick candidate entries from the indexes, then walk the scope.
//!
//! `candidates` returns `None` when the indexes cannot narrow the filter (the scope is walked
//! instead). Every candidate is still checked against the scope and the full filter, so the plan
//! only has to over-approximate.

use std::ops::ControlFlow;
use std::sync::Arc;

use roaring::RoaringBitmap;
use schema::Schema;

use crate::entry::{Entry, EntryId};
use crate::filter::{Filter, Tri};
use crate::index::{filter_sub_keys, IndexKinds};
use crate::version::Version;
use crate::Scope;

/// How many entries a search examines between calls of its `tick`.
pub const TICK_EVERY: u32 = 256;

impl Version {
    /// Entries that may match `f`, or `None` for "cannot tell, scan the scope".
    pub fn candidates(&self, schema: &Schema, f: &Filter) -> Option<RoaringBitmap> {
        match f {
            Filter::False | Filter::Undefined => Some(RoaringBitmap::new()),
            Filter::Equality { attr, norm } => {
                let mut out = RoaringBitmap::new();
                for &t in schema.subtypes(*attr) {
                    if !self.is_indexed(t) {
                        return None;
                    }
                    if let Some(p) = self.eq_postings(t, norm) {
                        p.union_into(&mut out);
                    }
                }
                Some(out)
            }
            Filter::Present(attr) => {
                let mut out = RoaringBitmap::new();
                for &t in schema.subtypes(*attr) {
                    if !self.index_kinds(t).contains(IndexKinds::PRES) {
                        return None;
                    }
                    if let Some(b) = self.pres_postings(t) {
                        out |= b;
                    }
                }
                Some(out)
            }
            Filter::Substrings {
                attr,
                initial,
                any,
                final_,
            } => {
                let mut out = RoaringBitmap::new();
                for &t in schema.subtypes(*attr) {
                    let kinds = self.index_kinds(t);
                    if !kinds.intersects(IndexKinds::SUB) {
                        return None;
                    }
                    // Pieces as the type's SUBSTR rule prepares them; one it cannot prepare
                    // makes the filter Undefined on every value of this type.
                    let prep = |p: &[u8]| schema.substr_component(t, p);
                    let prep_opt = |p: Option<&[u8]>| match p {
                        None => Some(None),
                        Some(p) => prep(p).map(Some),
                    };
                    let Some(initial) = prep_opt(initial.as_deref()) else {
                        continue;
                    };
                    let Some(final_) = prep_opt(final_.as_deref()) else {
                        continue;
                    };
                    let Some(any) = any.iter().map(|p| prep(p)).collect::<Option<Vec<_>>>() else {
                        continue;
                    };
                    let keys =
                        filter_sub_keys(t, kinds, initial.as_deref(), &any, final_.as_deref());
                    if keys.is_empty() {
                        return None;
                    }
                    out |= self.intersect_hashed(&keys);
                }
                Some(out)
            }
            Filter::GreaterOrEqual { attr, value } | Filter::LessOrEqual { attr, value } => {
                let ge = matches!(f, Filter::GreaterOrEqual { .. });
                let mut out = RoaringBitmap::new();
                for &t in schema.subtypes(*attr) {
                    if !self.index_kinds(t).contains(IndexKinds::ORD) {
                        return None;
                    }
                    // An assertion the ordering rule cannot read orders no value.
                    let Some(k) = schema.ord_key(t, value) else {
                        continue;
                    };
                    let (lo, hi) = if ge {
                        (Some(&k[..]), None)
                    } else {
                        (None, Some(&k[..]))
                    };
                    self.ord_range_into(t, lo, hi, &mut out);
                }
                Some(out)
            }
            Filter::And(fs) => {
                // Intersect what the indexed parts give; unindexed parts are checked per entry.
                let mut acc: Option<RoaringBitmap> = None;
                for f in fs {
                    if let Some(b) = self.candidates(schema, f) {
                        acc = Some(match acc {
                            Some(a) => a & b,
                            None => b,
                        });
                        if acc.as_ref().is_some_and(RoaringBitmap::is_empty) {
                            break;
                        }
                    }
                }
                acc
            }
            Filter::Or(fs) => {
                let mut acc = RoaringBitmap::new();
                for f in fs {
                    acc |= self.candidates(schema, f)?;
                }
                Some(acc)
            }
            _ => None,
        }
    }

    /// The entries holding every one of the hashed `keys` (smallest posting first).
    fn intersect_hashed(&self, keys: &[u64]) -> RoaringBitmap {
        let mut postings = Vec::with_capacity(keys.len());
        for k in keys {
            match self.hashed_postings(*k) {
                Some(p) => postings.push(p),
                None => return RoaringBitmap::new(),
            }
        }
        postings.sort_by_key(|p| p.count());
        let mut acc = RoaringBitmap::new();
        let mut it = postings.into_iter();
        if let Some(first) = it.next() {
            first.union_into(&mut acc);
        }
        for p in it {
            if acc.is_empty() {
                break;
            }
            p.retain_in(&mut acc);
        }
        acc
    }

    /// Whether entry `e` is within `scope` of `base`.
    pub fn in_scope(&self, base: &Entry, scope: Scope, e: &Entry) -> bool {
        match scope {
            Scope::Base => e.id == base.id,
            Scope::One => e.parent == Some(base.id),
            Scope::Subtree => {
                e.id == base.id || schema::norm_is_descendant_bytes(e.ndn_bytes(), base.ndn_bytes())
            }
        }
    }

    /// Calls `visit` with every entry within `scope` of `base` for which `filter` is True, each
    /// exactly once, and returns how many entries it examined. Stops early when `visit` breaks, or when `tick` (called every
    /// `TICK_EVERY` entries examined, matching or not) breaks: that is where abandon and time
    /// limits are checked during long scans that match little.
    pub fn search(
        &self,
        schema: &Schema,
        base: &Arc<Entry>,
        scope: Scope,
        filter: &Filter,
        visit: impl FnMut(&Arc<Entry>) -> ControlFlow<()>,
        tick: impl FnMut() -> ControlFlow<()>,
    ) -> u64 {
        let cands = self.candidates(schema, filter);
        self.search_planned(schema, base, scope, filter, cands.as_ref(), visit, tick)
    }

    /// `search` with the candidates already computed by `candidates` (callers that planned the
    /// search to decide how to run it need not plan it twice).
    #[expect(
        clippy::too_many_arguments,
        reason = "`search`'s arguments and the planned candidates"
    )]
    pub fn search_planned(
        &self,
        schema: &Schema,
        base: &Arc<Entry>,
        scope: Scope,
        filter: &Filter,
        cands: Option<&RoaringBitmap>,
        mut visit: impl FnMut(&Arc<Entry>) -> ControlFlow<()>,
        mut tick: impl FnMut() -> ControlFlow<()>,
    ) -> u64 {
        let mut examined: u32 = 0;
        let mut check = |e: &Arc<Entry>| -> ControlFlow<()> {
            examined = examined.wrapping_add(1);
            if examined.is_multiple_of(TICK_EVERY) {
                tick()?;
            }
            if filter.eval(schema, e) == Tri::True {
                visit(e)
            } else {
                ControlFlow::Continue(())
            }
        };
        if scope == Scope::Base {
            let _ = check(base);
            return u64::from(examined);
        }
        if let Some(cands) = cands {
            // Walk the smaller of the two sets: candidates, or the scope when it is smaller.
            let scope_small = scope == Scope::One && self.num_children(base.id) < cands.len();
            if !scope_small {
                for id in cands {
                    if let Some(e) = self.get(id) {
                        if self.in_scope(base, scope, e) && check(e).is_break() {
                            return u64::from(examined);
                        }
                    }
                }
                return u64::from(examined);
            }
        }
        match scope {
            Scope::Base => {}
            Scope::One => {
                if let Some(kids) = self.children(base.id) {
                    for id in kids {
                        if let Some(e) = self.get(id) {
                            if check(e).is_break() {
                                return u64::from(examined);
                            }
                        }
                    }
                }
            }
            Scope::Subtree => {
                let _ = self.walk(base, &mut check);
            }
        }
        u64::from(examined)
    }

    /// Depth-first walk of a subtree (base first), with an explicit stack.
    pub fn walk(
        &self,
        base: &Arc<Entry>,
        f: &mut impl FnMut(&Arc<Entry>) -> ControlFlow<()>,
    ) -> ControlFlow<()> {
        let mut stack: Vec<EntryId> = vec![base.id];
        while let Some(id) = stack.pop() {
            let Some(e) = self.get(id) else { continue };
            f(e)?;
            if let Some(kids) = self.children(id) {
                stack.extend(kids.iter().rev());
            }
        }
        ControlFlow::Continue(())
    }
}
