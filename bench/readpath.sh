#!/usr/bin/env bash
# The read hot path, measured as issue 17 states its aims: server CPU per search and per auth
# (search + bind), with the independent UnboundID rate tools and with `linden bench`, against
# slapd and one or two Linden binaries, all in one run.
#
#   bench/readpath.sh [N] [SECONDS] [ROUNDS]
#   LINDEN=/tmp/after/linden LINDEN_BEFORE=/tmp/before/linden bench/readpath.sh 100000 8 3
#
# Data: `linden gen` reference entries ({SSHA} passwords, so every server verifies the same
# hash), loaded into slapd (back-mdb, slapadd -q, equality indexes on objectClass, uid, cn, sn,
# mail, as compare.sh) and into Linden (linden import; a copy of the data directory per Linden
# binary). Each server runs alone on loopback while it is measured. Workloads (all bound as
# cn=admin, base dc=example,dc=com, subtree, (uid=user.<random>), all user attributes):
#
#   ub-search-8x1   UnboundID SearchRate, 8 threads, synchronous
#   ub-search-4x32  UnboundID SearchRate, 4 threads, --asynchronous --maxOutstandingRequests 32
#   ub-auth-8x1     UnboundID AuthRate, 8 threads (a search, then a bind as the entry found on
#                   a second connection, as one operation)
#   lb-search-8x1   linden bench search, 8 connections, depth 1
#   lb-search-8x32  linden bench search, 8 connections, depth 32
#   lb-auth-8x1     linden bench auth, 8 connections, depth 1 (search, then bind, on one
#                   connection)
#
# Every workload runs ROUNDS times against every server; the order of the servers rotates from
# one round to the next, so none is always first. Server CPU per operation is utime+stime of
# the server process (/proc/PID/stat) over the measured seconds (after the warm-up), divided by
# the operations the client reports for that time: it holds on a shared machine where rates
# do not. The table gives medians over the rounds and slapd's CPU per operation divided by
# each Linden's.
#
# Environment: LINDEN (the binary measured, and the `linden bench` client for every server;
# default target/release/linden, built if missing), LINDEN_BEFORE (a second Linden, shown as
# "before"), FLOOR (the `floor` example of the bench crate, `cargo build --release -p bench
# --example floor`: an LDAP responder that does no directory work, measured as one more server;
# its CPU per operation is the kernel's and the runtime's share that no server goes below, and
# "slapd/floor" the largest ratio any server could reach against slapd on this machine), WORKLOADS (comma-separated subset of the names above), WARMUP (s, default 3),
# UNBOUNDID_VERSION (7.0.1), KEEP=1 (keep the work directory with every raw output).
set -euo pipefail

N=${1:-100000}
SECS=${2:-8}
ROUNDS=${3:-3}
WARMUP=${WARMUP:-3}
WORKLOADS=${WORKLOADS:-ub-search-8x1,ub-search-4x32,ub-auth-8x1,lb-search-8x1,lb-search-8x32,lb-auth-8x1}
VERSION=${UNBOUNDID_VERSION:-7.0.1}
PORT_SLAPD=13491 PORT_AFTER=13492 PORT_BEFORE=13493 PORT_FLOOR=13494
SCRIPT=readpath.sh
# shellcheck source=bench/lib.sh
. "$(dirname "$0")/lib.sh"

# --- tools ------------------------------------------------------------------------------------
PATH=$PATH:/usr/sbin
command -v slapd >/dev/null || die "slapd not found (apt-get install slapd ldap-utils)"
command -v ldapsearch >/dev/null || die "ldapsearch not found (apt-get install ldap-utils)"
command -v java >/dev/null || die "java not found"
JAR="$HOME/.m2/repository/com/unboundid/unboundid-ldapsdk/$VERSION/unboundid-ldapsdk-$VERSION.jar"
if [ ! -f "$JAR" ]; then
  command -v mvn >/dev/null || die "mvn not found (apt-get install maven), needed to fetch $JAR"
  log "fetching com.unboundid:unboundid-ldapsdk:$VERSION from Maven Central"
  mvn -q dependency:get -Dartifact="com.unboundid:unboundid-ldapsdk:$VERSION" >&2
fi
linden_binary
[ -z "${LINDEN_BEFORE:-}" ] || [ -x "$LINDEN_BEFORE" ] || die "no linden binary at $LINDEN_BEFORE"
work_dir

# --- data and servers -------------------------------------------------------------------------
log "generating $N entries"
"$LINDEN" gen --count "$N" --suffix "$SUFFIX" --password password --password-scheme ssha \
  --output "$WORK/data.ldif" 2>/dev/null

slapd_conf "$WORK/slapd"
log "loading slapd (slapadd -q) and linden (linden import)"
slapadd -q -f "$WORK/slapd/slapd.conf" -l "$WORK/data.ldif"
"$LINDEN" import --data "$WORK/linden" --suffix "$SUFFIX" "$WORK/data.ldif" >"$WORK/import.log" 2>&1 \
  || { cat "$WORK/import.log" >&2; die "linden import failed"; }

slapd -f "$WORK/slapd/slapd.conf" -h "ldap://127.0.0.1:$PORT_SLAPD/"
wait_ldap "ldap://127.0.0.1:$PORT_SLAPD"
SERVERS=(slapd)
declare -A PID PORT
PID[slapd]=$(cat "$WORK/slapd/slapd.pid"); PORT[slapd]=$PORT_SLAPD; PIDS+=("${PID[slapd]}")

start_linden() { # name binary port
  cp -r "$WORK/linden" "$WORK/data-$1"
  "$2" serve --listen "127.0.0.1:$3" --data "$WORK/data-$1" --suffix "$SUFFIX" \
    --admin-dn "$ADMIN" --admin-password "$SECRET" >"$WORK/$1.log" 2>&1 &
  PID[$1]=$!; PORT[$1]=$3; PIDS+=("$!")
  wait_ldap "ldap://127.0.0.1:$3"
  SERVERS+=("$1")
}
start_linden after "$LINDEN" "$PORT_AFTER"
[ -z "${LINDEN_BEFORE:-}" ] || start_linden before "$LINDEN_BEFORE" "$PORT_BEFORE"
if [ -n "${FLOOR:-}" ]; then
  [ -x "$FLOOR" ] || die "no floor binary at $FLOOR"
  "$FLOOR" "127.0.0.1:$PORT_FLOOR" multi >"$WORK/floor.log" 2>&1 &
  PID[floor]=$!; PORT[floor]=$PORT_FLOOR; PIDS+=("$!")
  wait_ldap "ldap://127.0.0.1:$PORT_FLOOR"
  SERVERS+=(floor)
fi
log "servers: ${SERVERS[*]} (pids ${PIDS[*]})"

# --- runs -------------------------------------------------------------------------------------
# utime of a process in clock ticks (cpu_ticks gives utime+stime)
user_ticks() { awk '{ sub(/^.*\) /, ""); print $12 }' "/proc/$1/stat"; }
RES="$WORK/results.tsv"
: >"$RES"

# run WORKLOAD SERVER ROUND: the client in the background; server CPU ticks from the end of the
# warm-up to the end of the measured seconds. Appends "workload server round tag ticks secs
# user_ticks".
run() {
  local w=$1 s=$2 r=$3 port=${PORT[$2]} spid=${PID[$2]} tag="$1-$2-$3"
  local ub=(--hostname 127.0.0.1 --port "$port" --bindDN "$ADMIN" --bindPassword "$SECRET"
    --baseDN "$SUFFIX" --scope sub --filter "(uid=user.[0-$((N - 1))])" --intervalDuration 1
    --numIntervals "$((WARMUP + SECS + 1))" --warmUpIntervals 0 --csv)
  local lb=(--url "ldap://127.0.0.1:$port" --bind-dn "$ADMIN" --password "$SECRET" --range "$N"
    --warmup "$WARMUP" --duration "$SECS" --quiet --json "$WORK/$tag.json")
  local cmd
  case $w in
    ub-search-8x1) cmd=(java -cp "$JAR" com.unboundid.ldap.sdk.examples.SearchRate "${ub[@]}" --numThreads 8) ;;
    ub-search-4x32) cmd=(java -cp "$JAR" com.unboundid.ldap.sdk.examples.SearchRate "${ub[@]}" --numThreads 4
      --asynchronous --maxOutstandingRequests 32) ;;
    ub-auth-8x1) cmd=(java -cp "$JAR" com.unboundid.ldap.sdk.examples.AuthRate "${ub[@]}" --numThreads 8
      --credentials password) ;;
    lb-search-8x1) cmd=("$LINDEN" bench search "${lb[@]}" --connections 8 --depth 1) ;;
    lb-search-8x32) cmd=("$LINDEN" bench search "${lb[@]}" --connections 8 --depth 32) ;;
    lb-auth-8x1) cmd=("$LINDEN" bench auth "${lb[@]}" --connections 8 --depth 1) ;;
    *) die "unknown workload $w" ;;
  esac
  "${cmd[@]}" >"$WORK/$tag.out" 2>&1 &
  local c=$! t0 t1 s0 s1 u0 u1
  # UnboundID: the JVM starts and connects in about a second; its interval lines say when.
  if [[ $w == ub-* ]]; then
    for _ in $(seq 1 100); do grep -q '^[0-9]' "$WORK/$tag.out" 2>/dev/null && break; sleep 0.1; done
  fi
  sleep "$WARMUP"
  s0=$(cpu_ticks "$spid"); u0=$(user_ticks "$spid"); t0=$(date +%s.%N)
  sleep "$SECS"
  s1=$(cpu_ticks "$spid"); u1=$(user_ticks "$spid"); t1=$(date +%s.%N)
  wait "$c" || { cat "$WORK/$tag.out" >&2; die "$tag failed"; }
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$w" "$s" "$r" "$tag" "$((s1 - s0))" \
    "$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')" "$((u1 - u0))" >>"$RES"
}

IFS=, read -r -a WL <<<"$WORKLOADS"
for r in $(seq 1 "$ROUNDS"); do
  # Rotate the servers' order each round.
  order=("${SERVERS[@]:$(((r - 1) % ${#SERVERS[@]}))}" "${SERVERS[@]:0:$(((r - 1) % ${#SERVERS[@]}))}")
  for w in "${WL[@]}"; do
    for s in "${order[@]}"; do
      log "round $r: $w against $s"
      run "$w" "$s" "$r"
    done
  done
done

# --- table ------------------------------------------------------------------------------------
python3 - "$RES" "$WORK" "$CLK_TCK" "$WARMUP" "$SECS" "${SERVERS[*]}" <<'EOF'
import csv, json, statistics, sys
res, work, clk, warmup, secs, servers = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), sys.argv[6].split()

def num(s):
    try:
        return float(s.replace(",", ""))
    except ValueError:
        return None

def rate(w, tag):
    """Operations per second over the measured seconds, as the client reports them."""
    if w.startswith("lb-"):
        return json.load(open(f"{work}/{tag}.json"))["total"]["ops_per_sec"]
    # UnboundID --csv interval lines: the first column is the interval's ops/s. Drop the
    # warm-up intervals and the last one (cut by the measurement's end).
    rows = [r for r in csv.reader(open(f"{work}/{tag}.out")) if len(r) > 2 and num(r[0]) is not None]
    rows = rows[warmup:warmup + secs]
    return sum(num(r[0]) for r in rows) / len(rows)

data = {}
order = []
for w, s, r, tag, ticks, dur, user in csv.reader(open(res), delimiter="\t"):
    ops = rate(w, tag)
    per_op = lambda t: int(t) / clk / float(dur) / ops * 1e6 if ops else float("nan")
    data.setdefault(w, {}).setdefault(s, []).append((ops, per_op(ticks), per_op(user)))
    if w not in order:
        order.append(w)

med = lambda xs: statistics.median(xs) if xs else float("nan")
lindens = [s for s in servers if s != "slapd"]
hdr = ["workload"] + [f"{s} ops/s" for s in servers] + [f"{s} CPU µs/op" for s in servers] + [f"slapd/{s} CPU" for s in lindens]
print("| " + " | ".join(hdr) + " |")
print("|" + "---|" * len(hdr))
for w in order:
    ops = {s: med([x[0] for x in data[w].get(s, [])]) for s in servers}
    us = {s: med([x[1] for x in data[w].get(s, [])]) for s in servers}
    cells = [w] + [f"{ops[s]:,.0f}" for s in servers] + [f"{us[s]:.1f}" for s in servers]
    cells += [f"{us['slapd'] / us[s]:.2f}×" for s in lindens]
    print("| " + " | ".join(cells) + " |")
print()
print("Every run (ops/s, server CPU µs/op, of which user space):")
for w in order:
    for s in servers:
        runs = ", ".join(f"{o:,.0f} / {u:.1f} ({usr:.1f})" for o, u, usr in data[w].get(s, []))
        print(f"  {w} {s}: {runs}")
EOF
