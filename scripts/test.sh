#!/usr/bin/env bash
# The whole test suite: what README calls "run all tests" and what CI runs (.ci/run).
# Installs what the tests need (OpenLDAP client tools and slapd, libfaketime, python-ldap,
# pytest), then: formatting, lints, the Rust tests (unit, property, end-to-end over sockets;
# then the #[ignore]d ones that need slapd, libfaketime or lloadd, and the full-disk ones where a
# tmpfs can be mounted), the python-ldap conformance suite against a freshly started Linden, the
# interop tests with slapd, and the packaging tests (Debian package, container image:
# scripts/test-packaging.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== installing test dependencies"
./scripts/install-test-deps.sh

echo "== cargo fmt --check"
cargo fmt --all -- --check

echo "== cargo clippy"
cargo clippy --workspace --all-targets --quiet -- -D warnings

echo "== cargo test"
cargo test --workspace

echo "== tests that need programs from outside the workspace (#[ignore]d in the run above)"
# install-test-deps.sh installed slapd and libfaketime: their tests run now, opted in.
LINDEN_TEST_SLAPD=1 cargo test -p server --test syncrepl_slapd -- --ignored
LINDEN_TEST_SLAPD=1 cargo test -p linden --test migrate -- --ignored
LINDEN_TEST_SLAPD=1 cargo test -p server --test partitions -- --ignored
LINDEN_TEST_FAKETIME=1 cargo test -p linden --test clock -- --ignored
# ... and S3Proxy: the s3:// archive tests.
LINDEN_TEST_S3=1 cargo test -p linden --test archive -- --ignored
# No package ships OpenLDAP's load balancer lloadd: its tests run where one is found.
if [ -n "${LLOADD:-}" ] || command -v lloadd >/dev/null || [ -x /usr/sbin/lloadd ] || [ -x /usr/local/libexec/lloadd ]; then
    LINDEN_TEST_LLOADD=1 cargo test -p server --test scale_out -- --ignored
else
    echo "skipped: lloadd is not installed (built from OpenLDAP's source, LLOADD=/path/to/lloadd: docs/replication.md); the lloadd tests of crates/server/tests/scale_out.rs did not run"
fi

echo "== full-disk tests on a small tmpfs (crates/linden/tests/storage.rs)"
# They mount a tmpfs, which needs root: run where that works, say so where it does not.
probe=$(mktemp -d)
if mount -t tmpfs -o size=1m tmpfs "$probe" 2>/dev/null; then
    umount "$probe"
    rmdir "$probe"
    LINDEN_TEST_MOUNTS=1 cargo test -p linden --test storage -- --ignored
else
    rmdir "$probe"
    echo "skipped: cannot mount a tmpfs here (needs root); the full-disk tests of crates/linden/tests/storage.rs did not run"
fi

echo "== conformance suite (python-ldap) against Linden"
./scripts/run-conformance-linden.sh

echo "== web console in headless Chromium (tests/console/browser_test.py)"
cargo build -p linden --quiet
python3 tests/console/browser_test.py --linden "${CARGO_TARGET_DIR:-target}/debug/linden"

echo "== interop with OpenLDAP slapd (replication)"
./scripts/run-interop.sh

echo "== packaging: the Debian package and the container image (skipped where they cannot run)"
./scripts/test-packaging.sh
