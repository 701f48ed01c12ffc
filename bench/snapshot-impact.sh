#!/usr/bin/env bash
# How much search and modify rates drop while a snapshot is being written (issue 4's aim:
# ≤ 10 %; M-Vault R16 lost 11 % of searches and 38 % of modifies).
#
#   bench/snapshot-impact.sh [N] [DURATION]          (defaults 1000000 40)
#
# Loads N `linden gen` entries, starts Linden (durability = sync), and for each of search and
# modify runs `linden bench` (C=8, D=32) for DURATION seconds with one-second interval lines;
# a few seconds in, `linden snapshot` asks for a snapshot and returns when it is durable. The
# script prints the mean rate of the whole seconds inside the snapshot against the mean of the
# seconds before and after it (first 3 s and the second after the snapshot left out).
set -euo pipefail
cd "$(dirname "$0")/.."

N=${1:-1000000}
DURATION=${2:-40}
PORT=${PORT:-13392}
SNAP_AT=${SNAP_AT:-10}
LINDEN=${LINDEN:-}
if [ -z "$LINDEN" ]; then
  cargo build --release -q -p linden
  LINDEN="${CARGO_TARGET_DIR:-target}/release/linden"
fi
WORK=$(mktemp -d "${WORKDIR:-$PWD}/.snapshot-impact.XXXXXX")
PID=""
cleanup() { [ -n "$PID" ] && kill "$PID" 2>/dev/null; wait 2>/dev/null || true; [ -n "${KEEP:-}" ] || rm -rf "$WORK"; }
trap cleanup EXIT
ADMIN="cn=admin,dc=example,dc=com"
SECRET=secret
URL="ldap://127.0.0.1:$PORT"

"$LINDEN" gen --count "$N" --password-scheme ssha -o "$WORK/data.ldif"
"$LINDEN" import --data "$WORK/data" "$WORK/data.ldif" >/dev/null 2>&1
rm -f "$WORK/data.ldif"
"$LINDEN" serve --listen "127.0.0.1:$PORT" --data "$WORK/data" --admin-password "$SECRET" \
  >"$WORK/serve.log" 2>&1 &
PID=$!
for _ in $(seq 1 600); do
  grep -q "listening on" "$WORK/serve.log" 2>/dev/null && break
  sleep 0.1
done
grep -q "listening on" "$WORK/serve.log" || { cat "$WORK/serve.log" >&2; exit 1; }

echo "| workload | ops/s outside the snapshot | ops/s while it is written | change | snapshot |"
echo "|---|---|---|---|---|"
for w in search modify; do
  # Some changes first, so that the snapshot has something to write (a server whose newest
  # version is already on disk answers a snapshot request at once).
  "$LINDEN" bench modify --url "$URL" --bind-dn "$ADMIN" --password "$SECRET" --connections 8 \
    --depth 32 --duration 2 --warmup 0 --range "$N" --quiet >/dev/null 2>&1
  t0=$(date +%s.%N)
  "$LINDEN" bench "$w" --url "$URL" --bind-dn "$ADMIN" --password "$SECRET" --connections 8 \
    --depth 32 --duration "$DURATION" --warmup 0 --interval 1 --range "$N" \
    >"$WORK/$w.out" 2>&1 &
  bench=$!
  sleep "$SNAP_AT"
  s0=$(date +%s.%N)
  "$LINDEN" snapshot --url "$URL" --password "$SECRET" >"$WORK/snap-$w.out" 2>&1
  s1=$(date +%s.%N)
  wait "$bench"
  python3 - "$WORK/$w.out" "$t0" "$s0" "$s1" "$w" <<'PY'
import re, sys
path, t0, s0, s1, w = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
start, end = s0 - t0, s1 - t0
inside, outside = [], []
for line in open(path):
    m = re.match(r"t=(\d+)s ops/s=(\d+)", line)
    if not m:
        continue
    t, rate = int(m.group(1)), int(m.group(2))   # the second (t-1, t]
    if t - 1 >= start and t <= end:
        inside.append(rate)
    elif t > 3 and (t <= start or t - 1 >= end + 1):
        outside.append(rate)
if not inside:
    print(f"| {w} | - | - | - | {end - start:.1f} s: shorter than one whole second, no interval falls inside |")
else:
    a, b = sum(outside) / len(outside), sum(inside) / len(inside)
    print(f"| {w} | {a:,.0f} | {b:,.0f} | {(b - a) * 100 / a:+.1f} % | {end - start:.1f} s ({len(inside)} whole seconds inside) |")
PY
done
grep -E "snapshot .* written" "$WORK/serve.log" | sed 's/^/  server: /' >&2 || true
