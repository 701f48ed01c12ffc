#!/usr/bin/env bash
# Cross-check `linden bench` against an independent client: UnboundID's SearchRate and ModRate
# (examples in the UnboundID LDAP SDK, Maven artifact com.unboundid:unboundid-ldapsdk).
#
#   bench/unboundid.sh URL N [SECONDS]
#   bench/unboundid.sh ldap://127.0.0.1:13500 100000 10
#
# Against a server that holds the `linden gen` reference data (N entries uid=user.0 ..
# uid=user.N-1 under ou=people,dc=example,dc=com), runs one after the other, each for SECONDS
# measured seconds after WARMUP seconds of warm-up, all bound as cn=admin,dc=example,dc=com:
#
#   UnboundID SearchRate  8 threads, subtree search under dc=example,dc=com for
#                         (uid=user.[0-(N-1)]), all user attributes
#   linden bench search   --connections 8 --depth 1 --range N (same filter, base, attributes)
#   UnboundID ModRate     8 threads, replace description of uid=user.[0-(N-1)],ou=people,...
#                         with a 12-character random value
#   linden bench modify   --connections 8 --depth 1 --range N (replaces description)
#
# UnboundID's tools keep one request outstanding per thread (synchronous), hence --depth 1.
# UnboundID's ops/s is the mean of its per-second interval lines after the warm-up intervals.
# It prints a table: tool, workload, ops/s, the difference UnboundID vs linden in percent, and
# the CPU the client used during the measured part (percent of one core, from /proc/PID/stat),
# plus the server's if SERVER_PID is set: on a small machine the client shares the CPU with the
# server, and a client near its share of the cores is the bottleneck. "other CPU" is the rest of
# the machine's busy time in that window (loopback TCP softirq work, and any other process).
#
# Environment: LINDEN (default /work/target-rel/release/linden; built if missing),
# UNBOUNDID_VERSION (default 7.0.1), WARMUP (s, default 2), THREADS (default 8),
# SERVER_PID (the server's pid, to report its CPU too), BIND_DN, BIND_PW, KEEP_DIR (directory for
# the raw outputs; default a temporary one that is removed).
set -euo pipefail

URL=${1:?usage: bench/unboundid.sh URL N [SECONDS]}
N=${2:?usage: bench/unboundid.sh URL N [SECONDS]}
SECS=${3:-10}
WARMUP=${WARMUP:-2}
THREADS=${THREADS:-8}
VERSION=${UNBOUNDID_VERSION:-7.0.1}
LINDEN=${LINDEN:-/work/target-rel/release/linden}
BIND_DN=${BIND_DN:-cn=admin,dc=example,dc=com}
BIND_PW=${BIND_PW:-secret}
SERVER_PID=${SERVER_PID:-}
BASE="dc=example,dc=com"
ROOT=$(cd "$(dirname "$0")/.." && pwd)

hostport=${URL#ldap://}
hostport=${hostport%%/*}
HOST=${hostport%:*}
PORT=${hostport##*:}
[ "$HOST" != "$hostport" ] || PORT=389

log() { echo "unboundid.sh: $*" >&2; }
die() { log "$*"; exit 1; }

# --- the jar ----------------------------------------------------------------------------------
JAR="$HOME/.m2/repository/com/unboundid/unboundid-ldapsdk/$VERSION/unboundid-ldapsdk-$VERSION.jar"
if [ ! -f "$JAR" ]; then
  command -v mvn >/dev/null || die "mvn not found (apt-get install maven), needed to fetch $JAR"
  log "fetching com.unboundid:unboundid-ldapsdk:$VERSION from Maven Central"
  mvn -q dependency:get -Dartifact="com.unboundid:unboundid-ldapsdk:$VERSION" >&2
  [ -f "$JAR" ] || die "mvn did not produce $JAR"
fi
command -v java >/dev/null || die "java not found"

# --- linden -----------------------------------------------------------------------------------
if [ ! -x "$LINDEN" ]; then
  log "building linden (release) into /work/target-rel"
  (cd "$ROOT" && CARGO_TARGET_DIR=/work/target-rel cargo build --release -p linden) >&2
  LINDEN=/work/target-rel/release/linden
fi

if [ -n "${KEEP_DIR:-}" ]; then
  OUT=$KEEP_DIR; mkdir -p "$OUT"
else
  OUT=$(mktemp -d "${TMPDIR:-/tmp}/linden-unboundid.XXXXXX")
  trap 'rm -rf "$OUT"' EXIT
fi

CLK_TCK=$(getconf CLK_TCK)
ticks() { awk '{ sub(/^.*\) /, ""); print $12 + $13 }' "/proc/$1/stat" 2>/dev/null || echo; }
# all CPUs' busy ticks (user nice system irq softirq steal), to show what else ran meanwhile
busy() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 + $9 }' /proc/stat; }

# run TAG CMD...: runs the client in the background; samples its CPU ticks (and the server's) at
# the end of the warm-up and then every 0.2 s until it exits (the last sample before the exit
# stands for the end). Writes TAG.out and TAG.cpu ("client_ticks server_ticks measured_secs
# machine_busy_ticks").
run() {
  local tag=$1; shift
  "$@" >"$OUT/$tag.out" 2>&1 &
  local pid=$! c0 s0=0 c1 s1=0 t0 t1 x m0 m1
  sleep "$WARMUP"; sleep 0.3   # connection set-up / JVM start, then the warm-up
  c0=$(ticks "$pid"); [ -z "$SERVER_PID" ] || s0=$(ticks "$SERVER_PID")
  t0=$(date +%s.%N); m0=$(busy); c1=$c0; s1=$s0; t1=$t0; m1=$m0
  while kill -0 "$pid" 2>/dev/null; do
    x=$(ticks "$pid"); [ -z "$x" ] && break
    c1=$x; [ -z "$SERVER_PID" ] || s1=$(ticks "$SERVER_PID"); t1=$(date +%s.%N); m1=$(busy)
    sleep 0.2
  done
  wait "$pid" || { cat "$OUT/$tag.out" >&2; die "$tag failed"; }
  echo "$((c1 - c0)) $((s1 - s0)) $(echo "$t1 - $t0" | bc) $((m1 - m0))" >"$OUT/$tag.cpu"
}

J=(java -cp "$JAR")
COMMON_UB=(--hostname "$HOST" --port "$PORT" --bindDN "$BIND_DN" --bindPassword "$BIND_PW"
  --numThreads "$THREADS" --intervalDuration 1 --numIntervals "$SECS" --warmUpIntervals "$WARMUP"
  --csv)
COMMON_LB=(--url "$URL" --bind-dn "$BIND_DN" --password "$BIND_PW" --connections "$THREADS"
  --depth 1 --duration "$SECS" --warmup "$WARMUP" --range "$N" --quiet)

log "UnboundID SearchRate, $THREADS threads, ${SECS}s (+${WARMUP}s warm-up)"
run ub-search "${J[@]}" com.unboundid.ldap.sdk.examples.SearchRate "${COMMON_UB[@]}" \
  --baseDN "$BASE" --scope sub --filter "(uid=user.[0-$((N - 1))])"
log "linden bench search, C=$THREADS D=1, ${SECS}s (+${WARMUP}s warm-up)"
run lb-search "$LINDEN" bench search "${COMMON_LB[@]}" --json "$OUT/lb-search.json"
log "UnboundID ModRate, $THREADS threads, ${SECS}s (+${WARMUP}s warm-up)"
run ub-modify "${J[@]}" com.unboundid.ldap.sdk.examples.ModRate "${COMMON_UB[@]}" \
  --entryDN "uid=user.[0-$((N - 1))],ou=people,$BASE" --attribute description --valueLength 12
log "linden bench modify, C=$THREADS D=1, ${SECS}s (+${WARMUP}s warm-up)"
run lb-modify "$LINDEN" bench modify "${COMMON_LB[@]}" --json "$OUT/lb-modify.json"

python3 - "$OUT" "$WARMUP" "$CLK_TCK" "${SERVER_PID:+1}" <<'EOF'
import csv, json, sys
out, warmup, clk, have_server = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "1"

def num(s):
    try:
        return float(s.replace(",", ""))
    except ValueError:
        return None

def unboundid(tag):
    # --csv interval lines: recent ops/s, recent avg ms, [recent entries/search,] recent
    # errors/s, overall ops/s, overall avg ms. During the warm-up the overall columns say
    # "warming up"; if they do not, drop the first WARMUP interval lines instead.
    lines = [r for r in csv.reader(open(f"{out}/{tag}.out")) if len(r) > 2 and num(r[0]) is not None]
    after = [r for r in lines if not any("warm" in f.lower() for f in r)]
    if len(after) == len(lines):
        after = lines[warmup:]
    if not after:
        sys.exit(f"no interval lines after the warm-up in {out}/{tag}.out")
    errs = [num(r[3] if tag == "ub-search" else r[2]) or 0 for r in after]
    return sum(num(r[0]) for r in after) / len(after), len(after), sum(errs) / len(after)

def linden(tag):
    s = json.load(open(f"{out}/{tag}.json"))
    return s["total"]["ops_per_sec"], s["duration_secs"], s["total"]["errors"]

def cpu(tag):
    c, s, secs, m = open(f"{out}/{tag}.cpu").read().split()
    secs = float(secs) or float("nan")
    pct = lambda t: f"{t / clk / secs * 100:.0f} %"
    # "other": busy time of the whole machine not spent in client or server (kernel softirq
    # work for loopback TCP is partly counted here; other processes show up as a large value)
    other = pct(int(m) - int(c) - int(s)) if have_server else "-"
    return pct(int(c)), (pct(int(s)) if have_server else "-"), other

print("| tool | workload | ops/s | UnboundID vs linden | errors | client CPU | server CPU | other CPU |")
print("|---|---|---:|---:|---:|---:|---:|---:|")
for w in ("search", "modify"):
    u, _, ue = unboundid(f"ub-{w}")
    l, _, le = linden(f"lb-{w}")
    uc, us, uo = cpu(f"ub-{w}")
    lc, ls, lo = cpu(f"lb-{w}")
    diff = (u - l) / l * 100 if l else float("nan")
    print(f"| UnboundID {'SearchRate' if w == 'search' else 'ModRate'} | {w} | {u:.0f} | {diff:+.1f} % | {ue:.0f}/s | {uc} | {us} | {uo} |")
    print(f"| linden bench | {w} | {l:.0f} | | {le} | {lc} | {ls} | {lo} |")
EOF
