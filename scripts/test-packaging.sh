#!/usr/bin/env bash
# The packaging tests, which change this machine, run by scripts/test.sh:
#   - the Debian package (crates/linden/tests/package.rs): built with dpkg-deb from the debug
#     binary (packaging/build-deb.sh), installed with dpkg -i, started as its systemd unit would start it, answering
#     ldapsearch, then purged;
#   - the container image (crates/linden/tests/image.rs): built offline with podman (FROM
#     scratch), run as its non-root user with /healthz, a volume and a mounted configuration.
# Both need root and Debian. What they need and this machine lacks is installed: podman, runc
# and logrotate (apt). Where
# they cannot run, a line says "SKIPPED" and why. LINDEN_SKIP_PACKAGING=1 skips them.
set -euo pipefail
cd "$(dirname "$0")/.."

skip() { echo "packaging tests SKIPPED: $*"; }

if [ "${LINDEN_SKIP_PACKAGING:-0}" = 1 ]; then skip "LINDEN_SKIP_PACKAGING=1"; exit 0; fi
if [ "$(id -u)" -ne 0 ]; then skip "not root (dpkg -i and podman containers need it)"; exit 0; fi
if ! command -v dpkg >/dev/null || ! command -v apt-get >/dev/null; then
    skip "not a Debian system (no dpkg/apt-get)"; exit 0
fi
if dpkg-query -W -f '${Status}' linden 2>/dev/null | grep -q "install ok installed"; then
    skip "a linden package is installed on this machine; the test would replace it"; exit 0
fi
if [ -e /var/lib/linden ]; then
    skip "/var/lib/linden exists; the test would use and remove it"; exit 0
fi

missing=()
for p in podman runc logrotate ldap-utils; do
    dpkg-query -W -f '${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "test-packaging: apt-get install ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get -q -o DPkg::Lock::Timeout=600 update >/tmp/test-packaging.apt.log 2>&1 \
        && apt-get -y -q -o DPkg::Lock::Timeout=600 install --no-install-recommends "${missing[@]}" \
            >>/tmp/test-packaging.apt.log 2>&1 \
        || { tail -20 /tmp/test-packaging.apt.log >&2; echo "test-packaging: apt-get install failed" >&2; exit 1; }
fi

echo "== Debian package: build, dpkg -i, serve, purge"
LINDEN_TEST_PACKAGE=1 cargo test -p linden --test package -- --ignored

if podman info >/dev/null 2>&1; then
    echo "== container image: build (FROM scratch), run"
    LINDEN_TEST_IMAGE=1 cargo test -p linden --test image -- --ignored
else
    skip "container image: podman cannot run here ($(podman info 2>&1 | tail -1))"
fi
