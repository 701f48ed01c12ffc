#!/usr/bin/env bash
# What monitoring costs (issue 18): server CPU per search and per modify of a Linden with the
# metrics listener on and scraped against one with it off.
#
#   bench/monitor-cost.sh [N] [DURATION] [ROUNDS] [SCRAPE_EVERY]   (defaults 100000 10 5 1)
#
# Two `linden serve` on the same data (two copies of one `linden import`): "on" has
# `metrics_listen`, and while it is measured a loop reads `/metrics` (curl) and the whole of
# cn=Monitor (ldapsearch) every SCRAPE_EVERY seconds, as Prometheus and a monitoring script
# would; "off" has no metrics listener and nobody reads cn=Monitor. The per-operation counters
# behind both are compiled in and always bumped (relaxed atomics), so "off" still pays for
# them: this measures what turning monitoring on adds, and bounds what the counters cost by
# the run-to-run noise (BENCHMARKS.md). For each workload (search, modify; C=8, D=8) and round,
# both servers are run, alternating which goes first; the server's utime+stime from
# /proc/PID/stat over the measured run divided by the operations gives CPU µs per operation;
# medians over the rounds are printed.
# Environment: LINDEN (prebuilt binary; else a release build), BASE_PORT (15389), KEEP=1.
set -euo pipefail
cd "$(dirname "$0")/.."

N=${1:-100000}
DURATION=${2:-10}
ROUNDS=${3:-5}
SCRAPE_EVERY=${4:-1}
BASE_PORT=${BASE_PORT:-15389}
SCRIPT=monitor-cost.sh
# shellcheck source=bench/lib.sh
. bench/lib.sh
linden_binary
work_dir

"$LINDEN" gen --count "$N" -o "$WORK/data.ldif" 2>/dev/null
printf 'data = "%s"\nmetrics_listen = "127.0.0.1:%d"\n' "$WORK/on" $((BASE_PORT + 100)) >"$WORK/on.toml"
printf 'data = "%s"\n' "$WORK/off" >"$WORK/off.toml"
"$LINDEN" import --config "$WORK/on.toml" "$WORK/data.ldif" >/dev/null 2>&1
cp -r "$WORK/on" "$WORK/off"
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
for s in on off; do
  for _ in $(seq 1 600); do grep -q "listening on" "$WORK/$s.log" && break; sleep 0.1; done
done

scrape() {
  while :; do
    curl -s "http://127.0.0.1:$((BASE_PORT + 100))/metrics" >/dev/null
    ldapsearch -LLL -x -H "ldap://127.0.0.1:${PORT[on]}" -D "$ADMIN" -w "$SECRET" \
      -b cn=Monitor -s sub '(objectClass=*)' '*' '+' >/dev/null
    sleep "$SCRAPE_EVERY"
  done
}

: >"$WORK/cpu.tsv"
for round in $(seq 1 "$ROUNDS"); do
  order="on off"
  [ $((round % 2)) = 0 ] && order="off on"
  for w in search modify; do
    for s in $order; do
      scraper=
      if [ "$s" = on ]; then scrape & scraper=$!; fi
      before=$(cpu_ticks "${PID[$s]}")
      "$LINDEN" bench "$w" --url "ldap://127.0.0.1:${PORT[$s]}" --bind-dn "$ADMIN" \
        --password "$SECRET" --connections 8 --depth 8 --duration "$DURATION" --warmup 0 \
        --range "$N" --quiet --json "$WORK/$w-$s-$round.json" >/dev/null
      after=$(cpu_ticks "${PID[$s]}")
      [ -n "$scraper" ] && { kill "$scraper"; wait "$scraper" 2>/dev/null || true; }
      printf '%s\t%s\t%s\t%s\n' "$w" "$s" "$((after - before))" "$WORK/$w-$s-$round.json" >>"$WORK/cpu.tsv"
    done
  done
  log "round $round done"
done

python3 - "$WORK/cpu.tsv" "$CLK_TCK" <<'EOF'
import json, statistics, sys
rows = {}
for line in open(sys.argv[1]):
    w, s, ticks, f = line.rstrip("\n").split("\t")
    j = json.load(open(f))
    ops = j["total"]["ops"]
    rows.setdefault((w, s), []).append((j["total"]["ops_per_sec"], int(ticks) / int(sys.argv[2]) * 1e6 / ops))
print("| workload | monitoring | ops/s (median) | server CPU µs/op (median) | CPU µs/op, each round |")
print("|---|---|---|---|---|")
for w in ("search", "modify"):
    for s in ("off", "on"):
        r = rows[(w, s)]
        print(f"| {w} | {s} | {statistics.median(x for x, _ in r):,.0f} | "
              f"{statistics.median(c for _, c in r):.2f} | {' · '.join(f'{c:.2f}' for _, c in r)} |")
EOF
