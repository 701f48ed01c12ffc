//! What one member change costs does not grow with the group (issue 16: "adding one member to
//! a group of 100,000 members must not rewrite or re-check the others"). Adding one member to
//! a groupOfNames and removing it again, with memberOf and referential integrity maintained,
//! in a group of 1,000 members and in one of 20,000: each change writes the same two entries
//! (the group and the member, counted from the change feed) and makes the same number of
//! allocations (dhat, every thread, the writer's included). Counts, not times, so the test
//! holds on a busy machine. Before the modify carried its own value changes to the overlay
//! and the indexes, and kept the member attribute packed, they grew by about six per member:
//! the group unpacked into owned values (two a member), and its members copied before and
//! after the change (two a member each) for the overlay to compare.
//!
//! One test in this binary: dhat counts the allocations of the whole process.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code: a failed unwrap is a failed test"
)]

mod common;

use std::borrow::Cow;
use std::sync::Arc;

use common::*;
use dit::modify::Mod;
use dit::overlays::MemberOfSpec;
use dit::{Dit, WriteLimits};
use proto::ModOp;
use store::{Subscription, Txn};

#[global_allocator]
static ALLOCATOR: dhat::Alloc = dhat::Alloc;

const GROUP: &str = "cn=big,dc=example,dc=com";

fn member(i: usize) -> String {
    format!("uid=user.{i},{SUFFIX}")
}

/// A directory holding `n + 1` people and the group `GROUP` naming the first `n`.
fn group_of(n: usize) -> Arc<Dit> {
    let dit = setup_with(directory_limited(
        &MemberOfSpec {
            memberof: true,
            groups: MemberOfSpec::default_groups(),
            refint: vec!["member".into(), "uniqueMember".into(), "memberOf".into()],
        },
        WriteLimits {
            max_values_per_attribute: 1_000_000,
            max_attributes_per_request: 100,
            max_subtree_delete: 100,
        },
    ));
    // The people, built as add requests' entries and placed in one write job.
    let people: Vec<_> = (0..=n)
        .map(|i| {
            let uid = format!("user.{i}");
            let input: Vec<dit::add::InputAttr<'_>> = person(&uid)
                .into_iter()
                .map(|(name, values)| {
                    (
                        Cow::Borrowed(name.as_bytes()),
                        values
                            .into_iter()
                            .map(|v| Cow::Owned(v.into_bytes()))
                            .collect(),
                    )
                })
                .collect();
            dit::add::build(&dit, member(i).as_bytes(), &input, false).unwrap()
        })
        .collect();
    let who = admin(&dit);
    change(&dit, move |d, txn| {
        let mut last = None;
        for e in people {
            last = Some(dit::write::write_job(d, txn, |txn| {
                dit::add::apply(d, txn, &who, e, None)
            })?);
        }
        Ok(last.unwrap_or_default())
    })
    .unwrap();
    let members: Vec<String> = (0..n).map(member).collect();
    let members: Vec<&str> = members.iter().map(String::as_str).collect();
    add(
        &dit,
        GROUP,
        &[
            ("objectClass", &["groupOfNames"]),
            ("cn", &["big"]),
            ("member", &members),
        ],
    )
    .unwrap();
    dit
}

/// What one change to the group's members cost: entries written, allocations made.
fn member_change(dit: &Arc<Dit>, feed: &mut Subscription, op: ModOp, who: &str) -> (usize, u64) {
    let schema = dit.schema();
    let ndn = norm(&schema, GROUP);
    let ty = schema.attr_by_name("member").unwrap();
    drop(schema);
    let mods = vec![Mod {
        op,
        ty,
        options: String::new(),
        name: "member".into(),
        values: vec![who.as_bytes().into()],
    }];
    let needs = dit::modify::needs(&mods);
    let admin = admin(dit);
    let before = dhat::HeapStats::get().total_blocks;
    change(dit, move |d, txn: &mut Txn| {
        dit::modify::apply(d, txn, &admin, &ndn, &needs, mods, None, false)
    })
    .unwrap();
    let allocations = dhat::HeapStats::get().total_blocks - before;
    // The batch is on the feed before its change is answered.
    let batch = feed.try_recv().unwrap().expect("the change's batch");
    (batch.changes.len(), allocations)
}

#[test]
fn one_member_change_costs_the_same_in_a_group_of_1000_and_of_20000() {
    // Built before counting starts: dhat records where each allocation comes from.
    let dits: Vec<(usize, Arc<Dit>)> = [1_000, 20_000].map(|n| (n, group_of(n))).into();
    let _profiler = dhat::Profiler::builder().testing().build();
    let mut costs = Vec::new();
    for (n, dit) in dits {
        let newcomer = member(n);
        assert_eq!(values_of(&dit, &member(0), "memberOf"), [GROUP]);
        let mut feed = dit.store.subscribe(16);
        // Warm up: the first change of a kind may grow buffers kept for the next.
        member_change(&dit, &mut feed, ModOp::Add, &newcomer);
        member_change(&dit, &mut feed, ModOp::Delete, &newcomer);
        let add = member_change(&dit, &mut feed, ModOp::Add, &newcomer);
        assert_eq!(values_of(&dit, &newcomer, "memberOf"), [GROUP]);
        let remove = member_change(&dit, &mut feed, ModOp::Delete, &newcomer);
        assert!(values_of(&dit, &newcomer, "memberOf").is_empty());
        assert_eq!(values_of(&dit, GROUP, "member").len(), n);
        println!("group of {n}: add one member {add:?}, remove it {remove:?} (entries written, allocations)");
        // The group and the member, nothing else.
        assert_eq!((add.0, remove.0), (2, 2), "group of {n}");
        costs.push((add.1, remove.1));
    }
    let (small, big) = (costs[0], costs[1]);
    // A few more for the deeper paths of the persistent maps of a bigger directory; nothing
    // per member (20,000 members would be tens of thousands).
    const SLACK: u64 = 16;
    assert!(
        big.0 <= small.0 + SLACK && big.1 <= small.1 + SLACK,
        "allocations per change grow with the group: {small:?} for 1,000 members, {big:?} for 20,000"
    );
}
