#!/usr/bin/env bash
# Linden and OpenLDAP's slapd side by side, on one machine, with the same data and settings.
#
#   bench/compare.sh [N] [WORKLOADS] [CONNECTIONS] [DEPTHS] [DURATION] [ROUNDS]
#   bench/compare.sh 100000 search,modify,auth,compare,add,delete,mixed,search+modify 8 1,32 10 3
#
# Steps: install slapd + ldap-utils if absent (Debian/Ubuntu, needs root); build linden
# (release); `linden gen` the data once; load it into slapd (back-mdb, slapadd -q) and into
# Linden (linden import); start both on loopback; run every
# workload × connections × depth against both, alternating which goes first, ROUNDS times; print
# one table from the `--json` summaries: median ops/s and p99 over the rounds, the ratio
# Linden/slapd, and each server's CPU microseconds per operation (utime+stime from
# /proc/PID/stat over the measured part of the run, which holds even though the client shares
# the machine).
#
# Environment: WARMUP (s, default 2), SLAPD_PORT (13389), LINDEN_PORT (13390),
# PW_SCHEME (ssha: both servers verify the same salted SHA-1 on bind; "cleartext" otherwise),
# LINDEN (path of a prebuilt linden binary: skips the build), LINDEN_SERVE_ARGS (extra flags for
# `linden serve`, e.g. "--durability nosync"), KEEP=1 (keep the work directory), BENCH_ARGS
# (extra flags for every `linden bench`), SUB_INDEXES=1 (substring indexes on cn, sn and mail in
# both servers: slapd `index cn,sn,mail eq,sub`, Linden `cn = ["eq", "pres", "sub"]` and so on;
# for the `addressing` workload).
set -euo pipefail

N=${1:-100000}
WORKLOADS=${2:-search,modify,auth,compare,add,delete,mixed,search+modify}
CONNS=${3:-8}
DEPTHS=${4:-1,32}
DURATION=${5:-10}
ROUNDS=${6:-3}
WARMUP=${WARMUP:-2}

SCRIPT=compare.sh
# shellcheck source=bench/servers.sh
. "$(dirname "$0")/servers.sh"

# --- 6. runs ------------------------------------------------------------------------------
CLK_TCK=$(getconf CLK_TCK)

RESULTS="$WORK/results"
mkdir -p "$RESULTS"
: >"$RESULTS/cpu.tsv"

run_one() { # server url pid workload conns depth round
  local server=$1 url=$2 pid=$3 w=$4 c=$5 d=$6 r=$7
  local tag="${w//+/_}-c$c-d$d-r$r-$server"
  local extra=() warmup=$WARMUP
  case $w in
    add) extra+=(--name-prefix "r$r.c$c.d$d") ;;
    # delete removes what add made in this round and stops when they are gone; deletes are
    # faster than adds, so a warm-up could use them all up: measure from the first one.
    delete) extra+=(--name-prefix "r$r.c$c.d$d"); warmup=0 ;;
    mixed) extra+=(--name-prefix "m$r.c$c.d$d") ;;
  esac
  # shellcheck disable=SC2086
  "$LINDEN" bench "$w" --url "$url" --bind-dn "$ADMIN" --password "$SECRET" \
    --connections "$c" --depth "$d" --duration "$DURATION" --warmup "$warmup" \
    --range "$N" --allow-errors --quiet --json "$RESULTS/$tag.json" "${extra[@]}" \
    ${BENCH_ARGS:-} >"$RESULTS/$tag.out" 2>&1 &
  local bench=$!
  # CPU over the measured part: after the warm-up (plus connection set-up) to the end.
  sleep "$warmup"; sleep 0.05
  local before after
  before=$(cpu_ticks "$pid")
  wait "$bench" || { cat "$RESULTS/$tag.out" >&2; die "linden bench $w against $server failed"; }
  after=$(cpu_ticks "$pid")
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$w" "$c" "$d" "$r" "$server" \
    "$(( after - before ))" "$RESULTS/$tag.json" >>"$RESULTS/cpu.tsv"
  grep -q '"errors": 0,' "$RESULTS/$tag.json" || log "WARNING: $w on $server had errors (see $RESULTS/$tag.out)"
}

IFS=, read -r -a WL <<<"$WORKLOADS"
IFS=, read -r -a CL <<<"$CONNS"
IFS=, read -r -a DL <<<"$DEPTHS"
for r in $(seq 1 "$ROUNDS"); do
  for c in "${CL[@]}"; do
    for d in "${DL[@]}"; do
      for w in "${WL[@]}"; do
        log "round $r: $w C=$c D=$d"
        if [ $((r % 2)) = 1 ]; then
          run_one slapd "$SLAPD_URL" "$SLAPD_PID" "$w" "$c" "$d" "$r"
          run_one linden "$LINDEN_URL" "$LINDEN_PID" "$w" "$c" "$d" "$r"
        else
          run_one linden "$LINDEN_URL" "$LINDEN_PID" "$w" "$c" "$d" "$r"
          run_one slapd "$SLAPD_URL" "$SLAPD_PID" "$w" "$c" "$d" "$r"
        fi
      done
    done
  done
done

# Resident memory after the runs (the runs only read unless writes were asked for): Linden's
# heap holds entries and indexes; slapd's RSS counts the pages of its memory-mapped database
# that the runs touched, so its database size on disk is given too.
rss_kb() { awk '/VmRSS/ {print $2}' "/proc/$1/status"; }
L_RSS=$(rss_kb "$LINDEN_PID"); S_RSS=$(rss_kb "$SLAPD_PID")
S_DB=$(du -sk "$WORK/slapd/db" | cut -f1)
log "memory: linden RSS ${L_RSS} KB ($((L_RSS * 1024 / N)) B/entry); slapd RSS ${S_RSS} KB ($((S_RSS * 1024 / N)) B/entry), database ${S_DB} KB on disk ($((S_DB * 1024 / N)) B/entry)"
grep -o 'loaded .*' "$WORK/linden.log" >&2 || true

# --- 7. table -----------------------------------------------------------------------------
python3 - "$RESULTS/cpu.tsv" "$CLK_TCK" "$N" <<'EOF'
import json, statistics, sys
from collections import defaultdict

tsv, clk, n = sys.argv[1], int(sys.argv[2]), sys.argv[3]
rows = defaultdict(lambda: defaultdict(list))  # (workload, op, c, d) -> server -> [(ops/s, p99, cpu)]
order = []
for line in open(tsv):
    w, c, d, r, server, ticks, path = line.rstrip("\n").split("\t")
    s = json.load(open(path))
    parts = [("all", s["total"])]
    if w == "search+modify":
        parts += [(o["name"], o) for o in s["operations"]]
    for name, o in parts:
        key = (w, name, int(c), int(d))
        if key not in order:
            order.append(key)
        # CPU per op over all operations of the run (both populations for search+modify).
        cpu_us = int(ticks) / clk * 1e6 / s["total"]["ops"] if s["total"]["ops"] else float("nan")
        rows[key][server].append((o["ops_per_sec"], o["latency_us"]["p99"], cpu_us, o["errors"]))

def med(xs):
    return statistics.median(xs) if xs else float("nan")

print(f"\nN={n}; medians over rounds; CPU = server utime+stime per operation")
hdr = ("workload", "C", "D", "slapd ops/s", "slapd p99us", "linden ops/s", "linden p99us",
       "ratio L/S", "slapd cpu us/op", "linden cpu us/op", "errors S/L")
print("| " + " | ".join(hdr) + " |")
print("|" + "---|" * len(hdr))
for key in order:
    w, name, c, d = key
    label = w if name == "all" else f"{w} ({name})"
    s, l = rows[key]["slapd"], rows[key]["linden"]
    so, lo = med([x[0] for x in s]), med([x[0] for x in l])
    ratio = lo / so if so else float("nan")
    cpu = (f"{med([x[2] for x in s]):.1f}", f"{med([x[2] for x in l]):.1f}") if name == "all" else ("", "")
    print(f"| {label} | {c} | {d} | {so:.0f} | {med([x[1] for x in s]):.0f} | {lo:.0f} | "
          f"{med([x[1] for x in l]):.0f} | {ratio:.2f} | {cpu[0]} | {cpu[1]} | "
          f"{sum(x[3] for x in s)}/{sum(x[3] for x in l)} |")
EOF
