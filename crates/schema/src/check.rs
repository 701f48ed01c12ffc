//! The entry check slapd runs on add and modify (`entry_schema_check`): single-valued
//! attributes, known object classes, exactly one structural chain, MUST and MAY.

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
        // objectClass itself counts as present: the caller passed its values.
        let present = |must: AttrId| {
            self.attr(must).oid == "2.5.4.0"
                || attrs
                    .iter()
                    .any(|(a, n)| *n > 0 && self.is_subtype(*a, must))
        };
        for c in &closure {
            for must in &self.class(*c).must {
                if !present(*must) {
                    return violation(
                        ViolationKind::ObjectClassViolation,
                        format!(
                            "object class '{}' requires attribute '{}'",
                            self.class_name(*c),
                            self.attr(*must).name()
                        ),
                    );
                }
            }
        }
        if !extensible {
            for &(ty, _) in attrs {
                let a = self.attr(ty);
                if a.is_operational() {
                    continue;
                }
                let allowed = closure.iter().any(|c| {
                    let oc = self.class(*c);
                    oc.must
                        .iter()
                        .chain(oc.may.iter())
                        .any(|m| self.is_subtype(ty, *m))
                });
                if !allowed {
                    return violation(
                        ViolationKind::ObjectClassViolation,
                        format!("attribute '{}' not allowed", a.name()),
                    );
                }
            }
        }
        Ok(*top)
    }
}
