#!/usr/bin/env bash
# The whole test suite: what README calls "run all tests" and what CI runs (.ci/run).
# Installs what the tests need (OpenLDAP client tools, python-ldap, pytest), then: formatting,
# lints, the Rust tests (unit, property, end-to-end over sockets), and the python-ldap
# conformance suite against a freshly started Linden, the interop tests with slapd, and the
# packaging tests (Debian package, container image: scripts/test-packaging.sh).
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

echo "== conformance suite (python-ldap) against Linden"
./scripts/run-conformance-linden.sh

echo "== interop with OpenLDAP slapd (replication)"
./scripts/run-interop.sh

echo "== packaging: the Debian package and the container image (skipped where they cannot run)"
./scripts/test-packaging.sh
