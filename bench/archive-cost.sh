#!/usr/bin/env bash
# What continuous archiving costs (issue 30): durable modify throughput and server CPU per
# modify of a Linden archiving to a file:// archive against one that does not archive.
#
#   bench/archive-cost.sh [N] [DURATION] [ROUNDS] [INTERVAL]   (defaults 100000 10 5 1)
#
# Two `linden serve` on copies of one `linden import`, both `durability = "sync"` (the default):
# "on" has `archive = "file://WORK/archive"` on the same disk and `archive_interval = INTERVAL`
# (1 s: a log file sealed, copied, read back and checked every second, the dearest setting; the
# default is 60), "off" has no archive. For each round the modify workload (C=8 × D=32) runs
# against both, alternating which goes first; the server's utime+stime from /proc/PID/stat over
# the measured run (the archiver's thread included) divided by the modifies gives CPU µs per
# modify; medians are printed, with the bytes the archive received.
# Environment: LINDEN (prebuilt binary; else a release build), BASE_PORT (15489), KEEP=1.
set -euo pipefail
cd "$(dirname "$0")/.."

N=${1:-100000}
DURATION=${2:-10}
ROUNDS=${3:-5}
INTERVAL=${4:-1}
BASE_PORT=${BASE_PORT:-15489}
SCRIPT=archive-cost.sh
# shellcheck source=bench/lib.sh
. bench/lib.sh
linden_binary
work_dir

"$LINDEN" gen --count "$N" -o "$WORK/data.ldif" 2>/dev/null
mkdir -p "$WORK/archive"
printf 'data = "%s"\narchive = "file://%s"\narchive_interval = %d\nmetrics_listen = "127.0.0.1:%d"\n' \
  "$WORK/on" "$WORK/archive" "$INTERVAL" $((BASE_PORT + 100)) >"$WORK/on.toml"
printf 'data = "%s"\n' "$WORK/off" >"$WORK/off.toml"
"$LINDEN" import --config "$WORK/off.toml" "$WORK/data.ldif" >/dev/null 2>&1
cp -r "$WORK/off" "$WORK/on"
rm -f "$WORK/data.ldif"
declare -A PID PORT
PORT[on]=$BASE_PORT
PORT[off]=$((BASE_PORT + 1))
for s in on off; do
  "$LINDEN" serve --config "$WORK/$s.toml" --listen "127.0.0.1:${PORT[$s]}" \
    --admin-password "$SECRET" >"$WORK/$s.log" 2>&1 &
  PID[$s]=$!
  PIDS+=($!)
done
for s in on off; do wait_ldap "ldap://127.0.0.1:${PORT[$s]}" 600; done
metric() { curl -s "http://127.0.0.1:$((BASE_PORT + 100))/metrics" | awk -v m="linden_$1" '$1 == m { print $2 + 0 }'; }
# The import's snapshot goes to the archive first: measure only once it is there.
for _ in $(seq 1 600); do [ "$(metric archive_files_total)" != "" ] && [ "$(metric archive_files_total)" != 0 ] && break; sleep 0.1; done

: >"$WORK/cpu.tsv"
for round in $(seq 1 "$ROUNDS"); do
  order="on off"
  [ $((round % 2)) = 0 ] && order="off on"
  for s in $order; do
    before=$(cpu_ticks "${PID[$s]}")
    "$LINDEN" bench modify --url "ldap://127.0.0.1:${PORT[$s]}" --bind-dn "$ADMIN" \
      --password "$SECRET" --connections 8 --depth 32 --duration "$DURATION" --warmup 1 \
      --range "$N" --quiet --json "$WORK/$s-$round.json" >/dev/null
    after=$(cpu_ticks "${PID[$s]}")
    printf '%s\t%s\t%s\n' "$s" "$((after - before))" "$WORK/$s-$round.json" >>"$WORK/cpu.tsv"
  done
  log "round $round done"
done
log "archive: $(metric archive_files_total) files, $(metric archive_bytes_total) bytes, $(metric archive_failures_total) failures, lag $(metric archive_lag_batches) batches"

python3 - "$WORK/cpu.tsv" "$CLK_TCK" <<'EOF'
import json, statistics, sys
rows = {}
for line in open(sys.argv[1]):
    s, ticks, f = line.rstrip("\n").split("\t")
    j = json.load(open(f))
    ops = j["total"]["ops"]
    rows.setdefault(s, []).append((j["total"]["ops_per_sec"], int(ticks) / int(sys.argv[2]) * 1e6 / ops))
print("| archive | modify/s (median) | each round | server CPU µs/modify (median) | each round |")
print("|---|---:|---|---:|---|")
for s in ("off", "on"):
    r = rows[s]
    print(f"| {s} | {statistics.median(x for x, _ in r):,.0f} | {' · '.join(f'{x:,.0f}' for x, _ in r)} | "
          f"{statistics.median(c for _, c in r):.2f} | {' · '.join(f'{c:.2f}' for _, c in r)} |")
off, on = (statistics.median(x for x, _ in rows[s]) for s in ("off", "on"))
print(f"\nthroughput with the archive: {100 * (on - off) / off:+.1f} %")
EOF
