//! What one password verification costs per scheme at the default cost: the CPU a simple bind
//! spends on the password. `cargo bench -p pwhash`.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "benchmark harness: a failed setup step ends the run"
)]

use criterion::{criterion_group, criterion_main, Criterion};

fn verify(c: &mut Criterion) {
    let mut g = c.benchmark_group("verify");
    g.sample_size(10);
    for scheme in [
        pwhash::Scheme::Argon2,
        pwhash::Scheme::Pbkdf2Sha512,
        pwhash::Scheme::Crypt,
        pwhash::Scheme::Ssha512,
    ] {
        let stored = pwhash::hash(scheme, b"correct horse battery staple");
        g.bench_function(scheme.name(), |b| {
            b.iter(|| pwhash::verify(&stored, b"correct horse battery staple"))
        });
    }
    g.finish();
}

criterion_group!(benches, verify);
criterion_main!(benches);
