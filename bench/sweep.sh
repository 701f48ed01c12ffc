#!/usr/bin/env bash
# Latency under load, Linden and slapd on one chart: `linden bench sweep` against both servers
# set up as bench/compare.sh sets them up (same data, same indexes, {SSHA} passwords).
#
#   bench/sweep.sh [N] [WORKLOADS] [OUT] [STEP_SECONDS]
#   bench/sweep.sh 100000 search,modify,auth bench/sweep-results/sweep.html 5
#
# For each workload, a closed-loop probe finds each server's maximum rate at CONNECTIONS ×
# DEPTH, then open-loop steps offer FRACTIONS of it (the servers taking turns at each step)
# until a server no longer keeps up. Writes OUT (a self-contained HTML page: one chart per
# workload, p50/p99/p99.9 against offered load, and the numbers) and OUT's .json beside it.
#
# Latency is counted from each request's intended send time; the page and the JSON also give
# latency from the actual send, the client's send lag and its CPU time per step.
#
# Environment: CONNECTIONS (8), DEPTH (64), FRACTIONS (0.1,...,1.0), PROBE (s, 3), WARMUP (s, 1),
# PACER (thread; `timer` is tokio's 1 ms timer, the pacing of sweeps before 2026-11-27 noon),
# PACE_RESOLUTION (µs, 200), SLAPD_PORT (13389), LINDEN_PORT (13390), LINDEN (a prebuilt binary),
# KEEP=1, and the other knobs of bench/servers.sh.
set -euo pipefail

N=${1:-100000}
WORKLOADS=${2:-search,modify,auth}
OUT=${3:-sweep.html}
STEP=${4:-5}
CONNECTIONS=${CONNECTIONS:-8}
DEPTH=${DEPTH:-64}
FRACTIONS=${FRACTIONS:-0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8,0.9,1.0}
PROBE=${PROBE:-3}
WARMUP=${WARMUP:-1}
PACER=${PACER:-thread}
PACE_RESOLUTION=${PACE_RESOLUTION:-200}
OUT=$(realpath -m "$OUT")
mkdir -p "$(dirname "$OUT")"

SCRIPT=sweep.sh
# shellcheck source=bench/servers.sh
. "$(dirname "$0")/servers.sh"

SLAPD_VERSION=$(slapd -VVV 2>&1 | grep -o 'slapd [0-9.]*' | head -1 || true)
"$LINDEN" bench sweep --target "linden=$LINDEN_URL" --target "slapd=$SLAPD_URL" \
  --workloads "$WORKLOADS" --fractions "$FRACTIONS" --connections "$CONNECTIONS" --depth "$DEPTH" \
  --probe-duration "$PROBE" --step-duration "$STEP" --warmup "$WARMUP" --range "$N" \
  --pacer "$PACER" --pace-resolution "$PACE_RESOLUTION" \
  --bind-dn "$ADMIN" --password "$SECRET" --out "$OUT" --json "${OUT%.html}.json" \
  --note "$N reference entries ({SSHA} passwords, equality indexes on objectClass, uid, cn, sn, mail), \
slapd back-mdb ($SLAPD_VERSION) and Linden $("$LINDEN" --version | cut -d' ' -f2) on loopback, \
durable writes on both; $(nproc) cores shared by client and servers; load average before the \
run $(cut -d' ' -f1-3 /proc/loadavg); $(date -u +%Y-%m-%d)."
