//! Loads N generated inetOrgPerson entries into a store and reports time, resident memory per
//! entry and the cost of indexed lookups: `cargo run --release -p store --example load -- 1000000`.
//! With `RESTORE=1` it then times the bulk build a start-up does (`Version::restore` of the
//! loaded entries: entry and DN maps, indexes), three times.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "developer tool: a failed step ends the run with its message"
)]

use std::ops::ControlFlow;
use std::sync::Arc;
use std::time::Instant;

use schema::{Dn, Schema};
use store::{Attr, Filter, Scope, Store};

mod common;
use common::rss_bytes;

fn main() {
    let n: u32 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(100_000);
    let schema = Arc::new(Schema::builtin());
    let names: &[&str] = if std::env::var_os("NOINDEX").is_some() {
        &[]
    } else {
        &["objectClass", "uid", "cn", "sn", "mail"]
    };
    let idx: Vec<_> = names
        .iter()
        .filter_map(|a| schema.attr_by_name(a))
        .collect();
    let store = Store::new(schema.clone(), &idx);
    let rss0 = rss_bytes();
    let t = Instant::now();
    let batch = 10_000;
    let mut i = 0;
    while i < n {
        let s = schema.clone();
        let first = i;
        let last = (i + batch).min(n);
        store
            .write_blocking(move |txn| {
                let a = |name: &str, v: &str| {
                    let ty = s.attr_by_name(name).expect("attr");
                    Attr::new(&s, ty, "", vec![v.as_bytes().into()]).expect("value")
                };
                if first == 0 {
                    let dn = "dc=example,dc=com";
                    let ndn = Dn::parse(dn).expect("dn").normalize(&s).expect("ndn");
                    txn.add(
                        dn.into(),
                        ndn,
                        vec![a("objectClass", "domain"), a("dc", "example")],
                        true,
                    )?;
                    let dn = "ou=people,dc=example,dc=com";
                    let ndn = Dn::parse(dn).expect("dn").normalize(&s).expect("ndn");
                    txn.add(
                        dn.into(),
                        ndn,
                        vec![a("objectClass", "organizationalUnit"), a("ou", "people")],
                        false,
                    )?;
                }
                for k in first..last {
                    let dn = format!("uid=user.{k},ou=people,dc=example,dc=com");
                    let ndn = Dn::parse(&dn).expect("dn").normalize(&s).expect("ndn");
                    let attrs = vec![
                        a("objectClass", "inetOrgPerson"),
                        a("uid", &format!("user.{k}")),
                        a("cn", &format!("Given{k} Family{k}")),
                        a("sn", &format!("Family{k}")),
                        a("givenName", &format!("Given{k}")),
                        a("mail", &format!("user.{k}@example.com")),
                        a("telephoneNumber", &format!("+1 555 {k:07}")),
                        a("employeeNumber", &k.to_string()),
                        a(
                            "userPassword",
                            "{SSHA}0123456789012345678901234567890123456789",
                        ),
                    ];
                    txn.add(dn, ndn, attrs, false)?;
                }
                Ok::<_, store::StoreError>(())
            })
            .expect("writer")
            .expect("load");
        i = last;
    }
    let load = t.elapsed();
    let rss = rss_bytes().saturating_sub(rss0);
    let v = store.read();
    let base = v
        .lookup(
            &Dn::parse("dc=example,dc=com")
                .expect("dn")
                .normalize(&schema)
                .expect("n"),
        )
        .expect("base")
        .clone();
    let uid = schema.attr_by_name("uid").expect("uid");
    let t = Instant::now();
    let lookups: u32 = if names.is_empty() { 0 } else { 200_000 };
    let mut found = 0u64;
    for k in 0..lookups {
        let key = format!("user.{}", (k * 7919) % n);
        let f = Filter::Equality {
            attr: uid,
            norm: schema.normalize_eq(uid, key.as_bytes()).expect("n"),
        };
        v.search(
            &schema,
            &base,
            Scope::Subtree,
            &f,
            |_| {
                found += 1;
                ControlFlow::Continue(())
            },
            || ControlFlow::Continue(()),
        );
    }
    let per = t.elapsed() / lookups.max(1);
    println!(
        "entries={n} load={:.2}s ({:.0}/s) rss_delta={} MiB ({} B/entry) indexed_lookup={:?} found={found}",
        load.as_secs_f64(),
        f64::from(n) / load.as_secs_f64(),
        rss >> 20,
        rss / u64::from(n),
        per
    );
    if std::env::var_os("RESTORE").is_some() {
        let indexes = store::Indexes::eq_pres(&idx);
        let next = v.next_id();
        for round in 1..=3 {
            let entries: Vec<store::Entry> = v.iter().map(|e| (**e).clone()).collect();
            let t = Instant::now();
            let r = store::Version::restore(schema.clone(), &indexes, entries, next, v.seq);
            println!(
                "restore round {round}: {} entries in {:.3}s",
                r.len(),
                t.elapsed().as_secs_f64()
            );
        }
    }
}
