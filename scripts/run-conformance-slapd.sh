#!/usr/bin/env bash
# Run the LDAP conformance suite (tests/conformance) against a throwaway OpenLDAP slapd.
#   scripts/run-conformance-slapd.sh [extra pytest args...]
# Installs the dependencies (scripts/install-test-deps.sh, needs root), starts slapd on a
# free 127.0.0.1 port in a temp dir, runs pytest, stops slapd, exits with pytest's status.
# Set SKIP_INSTALL=1 to skip the dependency installer; KEEP_SLAPD_DIR=1 to keep the temp dir.
set -uo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
PY="${PYTHON:-python3}"

if [ "${SKIP_INSTALL:-0}" != "1" ]; then
    "$HERE/install-test-deps.sh" || { echo "run-conformance-slapd: dependency install failed" >&2; exit 2; }
fi

PORT="$("$PY" - <<'PYEOF'
import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])
s.close()
PYEOF
)" || { echo "run-conformance-slapd: could not pick a free port" >&2; exit 2; }
DIR="$(mktemp -d /tmp/linden-slapd-ref.XXXXXX)"

cleanup() {
    "$HERE/slapd-reference.sh" stop "$DIR" "$PORT" >/dev/null 2>&1 || true
    if [ "${KEEP_SLAPD_DIR:-0}" = "1" ]; then
        echo "run-conformance-slapd: slapd files kept in $DIR" >&2
    else
        rm -rf "$DIR"
    fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

"$HERE/slapd-reference.sh" start "$DIR" "$PORT" || { echo "run-conformance-slapd: slapd failed to start" >&2; exit 2; }

cd "$ROOT/tests/conformance" || exit 2
export LDAP_URL="ldap://127.0.0.1:$PORT"
export LDAP_ADMIN_DN="cn=admin,dc=example,dc=com"
export LDAP_ADMIN_PASSWORD="secret"
export LDAP_REFERENCE=slapd
export PYTHONDONTWRITEBYTECODE=1
"$PY" -m pytest "$@"
rc=$?
exit $rc
