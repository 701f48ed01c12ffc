#!/usr/bin/env bash
# One size of the "50 million entries" run (BENCHMARKS.md): import, start-up, memory, then the
# eight rates (8 connections × 32 outstanding, durability sync) with the server's CPU per
# operation, on N reference entries.
#
#   bench/scale.sh N [SECONDS]             (default 1000000 entries, 10 s a workload; 0: no rates)
#   bench/scale.sh 50000000                (needs ~24 GiB of memory and ~35 GB of disk)
#
# Environment: LINDEN (binary; default this checkout's release build), WORK (directory for the
# LDIF file and the data, kept; default a temporary one, removed), LDIF (an existing file to
# load instead of generating one), PORT (default 13398), DROP_CACHES=1 (as root: drop the page
# cache before the import and before the start, so that the start reads the snapshot from the
# disk as after a reboot).
#
# Prints: the import's wall time and peak RSS; seconds from `linden serve` to the first answered
# search, the server's own load line, its peak RSS and its resident memory 20 s after the first
# answer (bytes per entry); then one line per workload: operations per second, latency
# percentiles, server CPU µs per operation and the load average before it.
set -euo pipefail
SCRIPT=scale.sh
. "$(dirname "$0")/lib.sh"
N=${1:-1000000}
SECONDS_EACH=${2:-10}
PORT=${PORT:-13398}
linden_binary
if [ -n "${WORK:-}" ]; then mkdir -p "$WORK"; PIDS=(); KEEP=1; trap stop_all EXIT; else work_dir; fi
FILE=${LDIF:-$WORK/ref-$N.ldif}
URL="ldap://127.0.0.1:$PORT"
drop_caches() { [ "${DROP_CACHES:-0}" = 1 ] && sync && echo 3 >/proc/sys/vm/drop_caches || true; }

[ -s "$FILE" ] || "$LINDEN" gen --count "$N" -o "$FILE" 2>/dev/null
COUNT=$(($(grep -c '^dn: ' "$FILE") - 2))
rm -rf "$WORK/data"
drop_caches
echo "load $(cut -d' ' -f1-3 /proc/loadavg)"
/usr/bin/time -f "import: %e s wall, %U s user, %S s sys, peak RSS %M KB" \
  "$LINDEN" import --data "$WORK/data" "$FILE" 2>&1 | grep -E '^import:|^imported .* in '

drop_caches
t0=$(date +%s.%N)
"$LINDEN" serve --data "$WORK/data" --listen "127.0.0.1:$PORT" --admin-password "$SECRET" \
  >"$WORK/serve.log" 2>&1 &
PID=$!
PIDS+=("$PID")
wait_ldap "$URL" 6000
echo "start to first answer: $(echo "$(date +%s.%N) - $t0" | bc) s"
grep -o 'loaded .*' "$WORK/serve.log" || true
sleep 20
rss=$(awk '/VmRSS/ {print $2}' "/proc/$PID/status")
hwm=$(awk '/VmHWM/ {print $2}' "/proc/$PID/status")
echo "peak RSS while starting: $hwm KB; resident 20 s later: $rss KB = $((rss * 1024 / COUNT)) bytes/entry"

[ "$SECONDS_EACH" = 0 ] && exit 0
for w in search compare bind auth modify add delete mixed; do
  extra=() warmup=2
  case $w in
    add | mixed) extra=(--name-prefix "scale.$w") ;;
    # delete removes what add made and stops when they are gone: measure from the first one.
    delete) extra=(--name-prefix "scale.add"); warmup=0 ;;
  esac
  load=$(cut -d' ' -f1 /proc/loadavg)
  c0=$(cpu_ticks "$PID")
  out=$("$LINDEN" bench "$w" --url "$URL" --bind-dn "$ADMIN" --password "$SECRET" \
    --connections 8 --depth 32 --duration "$SECONDS_EACH" --warmup "$warmup" --range "$COUNT" \
    --quiet --json "$WORK/$w.json" "${extra[@]}" 2>&1 | grep -o 'ops/s=[0-9]*.*p99=[0-9]*' | head -1)
  c1=$(cpu_ticks "$PID")
  ops=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["total"]["ops"])' "$WORK/$w.json")
  cpu=$(python3 -c 'import sys; t, hz, n = map(float, sys.argv[1:]); print(f"{t / hz * 1e6 / max(n, 1):.2f}")' \
    "$((c1 - c0))" "$CLK_TCK" "$ops")
  echo "$w: $out, server CPU $cpu µs/op (load $load)"
done
