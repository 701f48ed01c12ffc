//! The source of a search of the entries the server holds itself (`engine::Held`): the root
//! DSE and the subschema subentry (base scope), and cn=Monitor's tree, built when read. They
//! are outside the naming contexts and the access rules (cn=Monitor is for those who may read
//! it: anyone else gets noSuchObject, as from slapd when its rules hide it); their entries
//! carry no computed attributes. Such a search always runs in the read loop: its entries are
//! few.

use proto::ResultCode;
use store::{Entry, Tri};

use super::engine::{Emitter, Held, Prepared, Source, Walked};
use super::paged::paged_control;
use crate::reply::Conn;
use dit::error::LdapError;

/// A search of server-held entries.
pub(crate) struct HeldEntries {
    held: Held,
    /// It carries the paged results control: one page holds it all (no cookie).
    paged: bool,
}

impl HeldEntries {
    pub(crate) fn new(held: Held, paged: bool) -> HeldEntries {
        HeldEntries { held, paged }
    }
}

impl Source for HeldEntries {
    fn inline(&self, _: &Prepared) -> bool {
        true
    }

    fn feed(&mut self, em: &mut Emitter<'_>) -> Walked {
        let (shared, p) = (em.shared, em.p);
        let (subschema, all, list);
        let (base, entries): (Option<&Entry>, &[Entry]) = match self.held {
            Held::RootDse => (
                Some(&shared.root_dse),
                std::slice::from_ref(&shared.root_dse),
            ),
            Held::Subschema => {
                subschema = shared.subschema();
                (Some(&*subschema), std::slice::from_ref(&*subschema))
            }
            Held::Monitor { readable } => {
                let hidden = || LdapError::new(ResultCode::NoSuchObject, "no such object");
                if !readable {
                    em.fail(hidden());
                    return Walked::Done;
                }
                all = crate::monitor::entries(shared);
                let Some(found) = crate::monitor::in_scope(&all, &p.base, p.scope) else {
                    // matchedDN: the nearest entry of the tree above the base.
                    let matched = all
                        .iter()
                        .filter(|(d, _)| schema::norm_is_descendant(&p.base.norm, &d.norm))
                        .max_by_key(|(d, _)| d.rdns.len())
                        .map(|(_, e)| e.dn().to_string())
                        .unwrap_or_default();
                    em.fail(hidden().with_matched(matched));
                    return Walked::Done;
                };
                list = found;
                let base = all.iter().find(|(d, _)| d.norm == p.base.norm);
                (base.map(|(_, e)| e), &list[..])
            }
        };
        // The assertion control is checked against the base entry.
        if let Some(base) = base {
            if let Err(e) = dit::write::check_assertion(p.assertion.as_ref(), shared, em.v, base) {
                em.fail(e);
                return Walked::Done;
            }
        }
        for e in entries {
            if p.filter.eval(em.schema, e) == Tri::True && em.held(e).is_break() {
                break;
            }
        }
        Walked::Done
    }

    fn respond(
        self,
        _: &Conn,
        _: &Result<(), LdapError>,
        response: &mut Vec<proto::Control<'static>>,
    ) {
        if self.paged {
            response.push(paged_control(0, Vec::new()));
        }
    }
}
