#!/usr/bin/env bash
# Interop tests with OpenLDAP 2.5 on loopback (tests/interop): each test starts its own Linden
# and slapd in temporary directories and stops them. Exit status is pytest's.
#   scripts/run-interop.sh [extra pytest args...]
set -euo pipefail
cd "$(dirname "$0")/.."

cargo build --quiet -p linden
export LINDEN_BIN="$(pwd)/${CARGO_TARGET_DIR:-target}/debug/linden"
export PYTHONDONTWRITEBYTECODE=1
python3 -m pytest -q -p no:cacheprovider tests/interop "$@"
