#!/usr/bin/env bash
# Import, start-up and memory of one Linden binary on one LDIF file, then (unless BENCH_SECONDS
# is 0) the eight rates: bench/scale.sh with the binary and the file given as arguments, so that
# two binaries can be compared on the same file.
#
#   bench/load.sh LINDEN FILE.ldif [BENCH_SECONDS]
#   bench/load.sh target/release/linden 1m.ldif 8        (make the file with
#                                                         linden gen --count 1000000 -o 1m.ldif)
#
# Environment: as bench/scale.sh (PORT, WORK, DROP_CACHES).
set -euo pipefail
LINDEN=${1:?usage: bench/load.sh LINDEN FILE.ldif [BENCH_SECONDS]}
LDIF=${2:?usage: bench/load.sh LINDEN FILE.ldif [BENCH_SECONDS]}
N=$(($(grep -c '^dn: ' "$LDIF") - 2))
LINDEN=$LINDEN LDIF=$LDIF exec "$(dirname "$0")/scale.sh" "$N" "${3:-8}"
