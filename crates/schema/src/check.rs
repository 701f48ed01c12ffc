//! The entry check slapd runs on add and modify (`entry_schema_check`): single-valued
//! attributes, known object classes, exactly one structural chain, MUST and MAY.

use std::cell::RefCell;
use std::sync::Arc;

use crate::cache::GenCache;

use crate::{AttrId, ClassId, ClassKind, Schema, SchemaViolation, ViolationKind};

fn violation<T>(kind: ViolationKind, message: String) -> Result<T, SchemaViolation> {
    Err(SchemaViolation { kind, message })
}

impl Schema {
    fn class_name(&self, c: ClassId) -> &str {
        let oc = self.class(c);
        oc.names.first().map(String::as_str).unwrap_or(&oc.oid)
    }

    /// Checks an entry's object classes and attributes, and returns its structural object
    /// class. `attrs` lists each attribute type present with its value count. Operational
    /// attributes are exempt from MUST/MAY; `extensibleObject` allows any user attribute.
    pub fn check_entry(
        &self,
        object_classes: &[&[u8]],
        attrs: &[(AttrId, usize)],
    ) -> Result<ClassId, SchemaViolation> {
        for &(ty, count) in attrs {
            let a = self.attr(ty);
            if a.single_value && count > 1 {
                return violation(
                    ViolationKind::ConstraintViolation,
                    format!("attribute '{}' cannot have multiple values", a.name()),
                );
            }
        }
        if object_classes.is_empty() {
            return violation(
                ViolationKind::ObjectClassViolation,
                "no objectClass attribute".into(),
            );
        }
        let rules = self.class_rules(object_classes)?;
        // objectClass itself counts as present: the caller passed its values.
        for &(c, must) in &rules.must {
            let present = self.attr(must).oid == "2.5.4.0"
                || attrs
                    .iter()
                    .any(|(a, n)| *n > 0 && self.is_subtype(*a, must));
            if !present {
                return violation(
                    ViolationKind::ObjectClassViolation,
                    format!(
                        "object class '{}' requires attribute '{}'",
                        self.class_name(c),
                        self.attr(must).name()
                    ),
                );
            }
        }
        if !rules.extensible {
            for &(ty, _) in attrs {
                let a = self.attr(ty);
                if a.is_operational() {
                    continue;
                }
                if !rules.allowed.get(ty.0 as usize).copied().unwrap_or(false) {
                    return violation(
                        ViolationKind::ObjectClassViolation,
                        format!("attribute '{}' not allowed", a.name()),
                    );
                }
            }
        }
        Ok(rules.structural)
    }

    /// What a set of objectClass values implies, from the per-thread cache: entries come in a
    /// handful of class combinations (an import checks a million `inetOrgPerson`s), and the
    /// closure, structural chain and allowed attributes cost more than the rest of the check.
    fn class_rules(&self, object_classes: &[&[u8]]) -> Result<Arc<ClassRules>, SchemaViolation> {
        type Cache = GenCache<Vec<u8>, Result<Arc<ClassRules>, SchemaViolation>>;
        thread_local! {
            static CACHE: RefCell<Cache> = RefCell::new(Cache::default());
        }
        const MAX_ENTRIES: usize = 256;
        if self.generation == 0 {
            return self.compute_class_rules(object_classes).map(Arc::new);
        }
        let mut key = Vec::with_capacity(64);
        for v in object_classes {
            key.extend_from_slice(v);
            key.push(0);
        }
        if let Some(r) = CACHE.with_borrow(|c| c.get(self.generation, &key, Clone::clone)) {
            return r;
        }
        let r = self.compute_class_rules(object_classes).map(Arc::new);
        CACHE.with_borrow_mut(|c| c.insert(self.generation, key, r.clone(), MAX_ENTRIES));
        r
    }

    fn compute_class_rules(&self, object_classes: &[&[u8]]) -> Result<ClassRules, SchemaViolation> {
        let mut given: Vec<ClassId> = Vec::with_capacity(object_classes.len());
        for raw in object_classes {
            let name = String::from_utf8_lossy(raw);
            match self.class_by_name(&name) {
                Some(c) => {
                    if !given.contains(&c) {
                        given.push(c);
                    }
                }
                None => {
                    return violation(
                        ViolationKind::ObjectClassViolation,
                        format!("unrecognized objectClass '{name}'"),
                    );
                }
            }
        }
        let mut closure = self.class_closure(&given);
        // `top` is implied even when not listed or not named as a superclass.
        if let Some(top) = self.class_by_name("top") {
            if !closure.contains(&top) {
                closure.push(top);
            }
        }
        let structural: Vec<ClassId> = closure
            .iter()
            .copied()
            .filter(|c| self.class(*c).kind == ClassKind::Structural)
            .collect();
        // The most specific structural class: every other structural class is one of its
        // superclasses.
        let mut chain: Vec<(ClassId, Vec<ClassId>)> = structural
            .iter()
            .map(|c| (*c, self.class_closure(&[*c])))
            .collect();
        chain.sort_by_key(|(_, sups)| std::cmp::Reverse(sups.len()));
        let Some((top, top_sups)) = chain.first() else {
            return violation(
                ViolationKind::ObjectClassViolation,
                "no structural object class provided".into(),
            );
        };
        if let Some((other, _)) = chain.iter().find(|(c, _)| !top_sups.contains(c)) {
            return violation(
                ViolationKind::ObjectClassViolation,
                format!(
                    "invalid structural object class chain ({}/{})",
                    self.class_name(*top),
                    self.class_name(*other)
                ),
            );
        }
        let extensible = closure
            .iter()
            .any(|c| self.class(*c).oid == "1.3.6.1.4.1.1466.101.120.111");
        let mut must = Vec::new();
        // An attribute is allowed when it is a MUST or MAY of some class, or a subtype of one.
        let mut allowed = vec![false; self.attr_count()];
        for &c in &closure {
            let oc = self.class(c);
            must.extend(oc.must.iter().map(|m| (c, *m)));
            for m in oc.must.iter().chain(oc.may.iter()) {
                for s in self.subtypes(*m) {
                    if let Some(slot) = allowed.get_mut(s.0 as usize) {
                        *slot = true;
                    }
                }
            }
        }
        Ok(ClassRules {
            structural: *top,
            extensible,
            must,
            allowed,
        })
    }
}

/// What an entry's object classes require and allow (`Schema::class_rules`).
#[derive(Debug)]
struct ClassRules {
    /// The most specific structural class.
    structural: ClassId,
    /// `extensibleObject` is in the closure: any user attribute is allowed.
    extensible: bool,
    /// Every MUST of the closure, with the class that requires it, in closure order.
    must: Vec<(ClassId, AttrId)>,
    /// By attribute id: a MUST or MAY of some class in the closure, or a subtype of one.
    allowed: Vec<bool>,
}
