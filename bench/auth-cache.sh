#!/usr/bin/env bash
# Logins with each server's default password storage: Linden with Argon2id (its default) and
# its credential cache, slapd with {SSHA}, measured by UnboundID's AuthRate (search for a random
# uid, then bind as the entry found), side by side in one run.
#
#   bench/auth-cache.sh [N] [SECONDS] [ROUNDS]
#   bench/auth-cache.sh 10000 10 3
#
# Steps: `linden gen --strong` (clear text; `linden import` hashes it with Argon2id on every
# core, timed) and `linden gen` ({SSHA}, the default; `slapadd -q` into slapd back-mdb, same
# indexes as bench/compare.sh); start both on loopback; then
#   1. cold: AuthRate against the fresh Linden (empty cache: nearly every bind is a user's first
#      and runs Argon2id), with `linden bench search` (2 connections, D=1) running beside it to
#      show whether other connections are held up;
#   2. one warm pass: `linden bench bind --warm-pass --range N` binds once as every user;
#   3. ROUNDS × (AuthRate against Linden, AuthRate against slapd), alternating which goes first.
# Server CPU per operation comes from utime+stime in /proc/PID/stat over each measured window
# (it holds while client and servers share the machine); "other" is the machine's remaining
# busy time in that window (other processes, loopback softirq), the noise indicator.
#
# Environment: LINDEN (default target/release/linden of this checkout, built if missing),
# UNBOUNDID_VERSION (7.0.1), THREADS (AuthRate threads, 8), WARMUP (s, 2), COLD_SECS (SECONDS),
# LINDEN_PORT (13410), SLAPD_PORT (13411), KEEP=1 keeps the work directory.
set -euo pipefail

N=${1:-10000}
SECS=${2:-10}
ROUNDS=${3:-3}
THREADS=${THREADS:-8}
WARMUP=${WARMUP:-2}
COLD_SECS=${COLD_SECS:-$SECS}
LINDEN_PORT=${LINDEN_PORT:-13410}
SLAPD_PORT=${SLAPD_PORT:-13411}
VERSION=${UNBOUNDID_VERSION:-7.0.1}
SUFFIX="dc=example,dc=com"
ADMIN="cn=admin,$SUFFIX"
SECRET=secret
ROOT=$(cd "$(dirname "$0")/.." && pwd)
LINDEN=${LINDEN:-$ROOT/target/release/linden}
JAR="$HOME/.m2/repository/com/unboundid/unboundid-ldapsdk/$VERSION/unboundid-ldapsdk-$VERSION.jar"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/linden-authcache.XXXXXX")
LINDEN_PID=
SLAPD_PID=

SCRIPT=auth-cache.sh
# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"
cleanup() {
  [ -n "$LINDEN_PID" ] && kill "$LINDEN_PID" 2>/dev/null || true
  [ -n "$SLAPD_PID" ] && kill "$SLAPD_PID" 2>/dev/null || true
  if [ "${KEEP:-0}" = 1 ]; then log "work directory kept: $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT

[ -f "$JAR" ] || { command -v mvn >/dev/null || die "mvn needed to fetch $JAR";
  mvn -q dependency:get -Dartifact="com.unboundid:unboundid-ldapsdk:$VERSION" >&2; }
if [ ! -x "$LINDEN" ]; then
  (cd "$ROOT" && cargo build --release -p linden) >&2
  LINDEN=$ROOT/target/release/linden
fi
CLK_TCK=$(getconf CLK_TCK)
busy() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 + $9 }' /proc/stat; }
# --- data ------------------------------------------------------------------------------------
"$LINDEN" gen --count "$N" --strong -o "$WORK/strong.ldif"
"$LINDEN" gen --count "$N" -o "$WORK/ssha.ldif"

log "linden import of $N clear-text passwords (Argon2id, every core)"
t0=$(date +%s.%N)
"$LINDEN" import --data "$WORK/linden" "$WORK/strong.ldif" >"$WORK/import.out"
IMPORT_SECS=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
log "import: ${IMPORT_SECS} s ($(awk -v n="$N" -v s="$IMPORT_SECS" 'BEGIN { printf "%.0f", n / s }') entries/s)"

slapd_conf "$WORK/slapd"
slapadd -q -f "$WORK/slapd/slapd.conf" -l "$WORK/ssha.ldif"
slapd -f "$WORK/slapd/slapd.conf" -h "ldap://127.0.0.1:$SLAPD_PORT/"
wait_ldap "ldap://127.0.0.1:$SLAPD_PORT"
SLAPD_PID=$(cat "$WORK/slapd/slapd.pid")

"$LINDEN" serve --listen "127.0.0.1:$LINDEN_PORT" --data "$WORK/linden" \
  --admin-password "$SECRET" >"$WORK/linden.log" 2>&1 &
LINDEN_PID=$!
wait_ldap "ldap://127.0.0.1:$LINDEN_PORT"

# authrate TAG PORT SERVER_PID SECONDS: AuthRate for SECONDS after WARMUP; writes TAG.out and
# TAG.cpu ("server_ticks machine_busy_ticks seconds client_ticks").
authrate() {
  local tag=$1 port=$2 spid=$3 secs=$4
  java -cp "$JAR" com.unboundid.ldap.sdk.examples.AuthRate --hostname 127.0.0.1 --port "$port" \
    --bindDN "$ADMIN" --bindPassword "$SECRET" --baseDN "$SUFFIX" --scope sub \
    --filter "(uid=user.[0-$((N - 1))])" --credentials password --numThreads "$THREADS" \
    --intervalDuration 1 --numIntervals "$secs" --warmUpIntervals "$WARMUP" --csv \
    >"$WORK/$tag.out" 2>&1 &
  local pid=$! s0 s1 m0 m1 c0 c1 t0 t1 x
  sleep "$WARMUP"; sleep 1   # JVM start and the warm-up intervals
  s0=$(cpu_ticks "$spid"); m0=$(busy); c0=$(cpu_ticks "$pid"); t0=$(date +%s.%N)
  s1=$s0; m1=$m0; c1=$c0; t1=$t0
  while kill -0 "$pid" 2>/dev/null; do
    x=$(cpu_ticks "$pid" 2>/dev/null) || break
    c1=$x; s1=$(cpu_ticks "$spid"); m1=$(busy); t1=$(date +%s.%N)
    sleep 0.2
  done
  wait "$pid" || { cat "$WORK/$tag.out" >&2; die "$tag failed"; }
  echo "$((s1 - s0)) $((m1 - m0)) $(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }') $((c1 - c0))" >"$WORK/$tag.cpu"
}

log "cold: AuthRate against the fresh Linden (empty cache), linden bench search beside it"
"$LINDEN" bench search --url "ldap://127.0.0.1:$LINDEN_PORT" --bind-dn "$ADMIN" --password "$SECRET" \
  --connections 2 --depth 1 --duration "$COLD_SECS" --warmup "$((WARMUP + 1))" --range "$N" \
  --quiet --json "$WORK/cold-search.json" >"$WORK/cold-search.out" &
SEARCH_PID=$!
authrate cold "$LINDEN_PORT" "$LINDEN_PID" "$COLD_SECS"
wait "$SEARCH_PID"
# A search alone for comparison, same settings.
"$LINDEN" bench search --url "ldap://127.0.0.1:$LINDEN_PORT" --bind-dn "$ADMIN" --password "$SECRET" \
  --connections 2 --depth 1 --duration "$COLD_SECS" --warmup "$WARMUP" --range "$N" \
  --quiet --json "$WORK/alone-search.json" >"$WORK/alone-search.out"

log "warm pass: one bind as each of the $N users"
"$LINDEN" bench bind --url "ldap://127.0.0.1:$LINDEN_PORT" --warm-pass --range "$N" \
  --connections "$THREADS" --duration 0.5 --warmup 0 --quiet | tee "$WORK/warm.out" >&2

for r in $(seq 1 "$ROUNDS"); do
  if [ $((r % 2)) = 1 ]; then order="linden slapd"; else order="slapd linden"; fi
  for s in $order; do
    log "round $r: AuthRate against $s"
    if [ "$s" = linden ]; then authrate "linden-$r" "$LINDEN_PORT" "$LINDEN_PID" "$SECS"
    else authrate "slapd-$r" "$SLAPD_PORT" "$SLAPD_PID" "$SECS"; fi
  done
done

python3 - "$WORK" "$ROUNDS" "$CLK_TCK" "$IMPORT_SECS" "$N" <<'EOF'
import csv, json, statistics, sys
work, rounds, clk, import_secs, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5])

def num(s):
    try:
        return float(s.replace(",", ""))
    except ValueError:
        return None

def run(tag):
    rows = [r for r in csv.reader(open(f"{work}/{tag}.out")) if len(r) > 2 and num(r[0]) is not None]
    after = [r for r in rows if not any("warm" in f.lower() for f in r)] or rows
    ops = sum(num(r[0]) for r in after) / len(after)
    errs = sum(num(r[2]) or 0 for r in after) / len(after)
    s, m, secs, c = open(f"{work}/{tag}.cpu").read().split()
    secs = float(secs)
    srv_us = int(s) / clk / (ops * secs) * 1e6 if ops and secs else float("nan")
    other = (int(m) - int(s) - int(c)) / clk / secs * 100 if secs else float("nan")
    return ops, srv_us, errs, int(s) / clk / secs * 100, other

print(f"linden import of {n} clear-text passwords (Argon2id): {import_secs:.1f} s, {n / import_secs:.0f} entries/s")
print()
print("| run | AuthRate ops/s | server CPU µs/op | server CPU % | other CPU % | errors/s |")
print("|---|---:|---:|---:|---:|---:|")
res = {"linden": [], "slapd": []}
for r in range(1, rounds + 1):
    for s in ("linden", "slapd"):
        ops, us, errs, srv, other = run(f"{s}-{r}")
        res[s].append((ops, us))
        print(f"| {s} round {r} | {ops:,.0f} | {us:.1f} | {srv:.0f} | {other:.0f} | {errs:.1f} |")
ops, us, errs, srv, other = run("cold")
# The server's CPU in this window also serves the linden bench search running beside it.
print(f"| linden cold (first logins; CPU includes the search beside it) | {ops:,.0f} | {us:.0f} | {srv:.0f} | {other:.0f} | {errs:.1f} |")
lo = statistics.median(o for o, _ in res["linden"]); so = statistics.median(o for o, _ in res["slapd"])
lu = statistics.median(u for _, u in res["linden"]); su = statistics.median(u for _, u in res["slapd"])
print()
print(f"median: Linden (Argon2id, warm cache) {lo:,.0f}/s, {lu:.1f} µs/op; slapd ({{SSHA}}) {so:,.0f}/s, {su:.1f} µs/op; "
      f"ratio {lo / so:.2f}x by rate, {su / lu:.2f}x by server CPU per op")
for tag, what in (("alone-search", "alone"), ("cold-search", "beside cold logins")):
    t = json.load(open(f"{work}/{tag}.json"))["total"]
    lat = t["latency_us"]
    print(f"linden bench search (2 connections, D=1) {what}: {t['ops_per_sec']:,.0f}/s, p50 {lat['p50']} µs, p99 {lat['p99']} µs, max {lat['max']} µs")
EOF
