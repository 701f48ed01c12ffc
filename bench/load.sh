#!/usr/bin/env bash
# Import, start-up and memory of one Linden binary on one LDIF file (issue 4's numbers), then
# search and modify rates against the started server.
#
#   bench/load.sh LINDEN FILE.ldif [BENCH_SECONDS]
#   bench/load.sh target/release/linden 1m.ldif 8        (make the file with
#                                                         linden gen --count 1000000 --password-scheme ssha -o 1m.ldif)
#
# Prints: `linden import` wall time and peak RSS; seconds from `linden serve` to the first
# answered search and the server's own load line; resident memory 20 s after start-up (so that
# memory freed during loading has been returned); then, unless BENCH_SECONDS is 0, `linden bench`
# search and modify (C=8, D=1 and 32, durability sync, 2 s warm-up) with the server's CPU ticks
# over each run. Environment: PORT (default 13394), WORK (directory for the data, default a
# temporary one, removed afterwards).
set -euo pipefail

LINDEN=${1:?usage: bench/load.sh LINDEN FILE.ldif [BENCH_SECONDS]}
LDIF=${2:?usage: bench/load.sh LINDEN FILE.ldif [BENCH_SECONDS]}
SECONDS_EACH=${3:-8}
PORT=${PORT:-13394}
WORK=${WORK:-$(mktemp -d)}
DATA="$WORK/data"
ADMIN="cn=admin,dc=example,dc=com"
URL="ldap://127.0.0.1:$PORT"
PID=""
cleanup() { [ -n "$PID" ] && kill "$PID" 2>/dev/null; wait 2>/dev/null || true; rm -rf "$DATA"; }
trap cleanup EXIT

COUNT=$(grep -c '^dn: ' "$LDIF")
rm -rf "$DATA"
/usr/bin/time -f "import: %e s wall, peak RSS %M KB" "$LINDEN" import --data "$DATA" "$LDIF" \
  2>&1 | grep -E '^import:|^imported .* in '

"$LINDEN" serve --data "$DATA" --listen "127.0.0.1:$PORT" --admin-password secret \
  >"$WORK/serve.log" 2>&1 &
PID=$!
t0=$(date +%s.%N)
for _ in $(seq 1 6000); do
  ldapsearch -x -H "$URL" -D "$ADMIN" -w secret -b "uid=user.5,ou=people,dc=example,dc=com" \
    -s base dn >/dev/null 2>&1 && break
  sleep 0.05
done
t1=$(date +%s.%N)
echo "start to first answer: $(echo "$t1 - $t0" | bc) s"
grep -o 'loaded .*' "$WORK/serve.log"
sleep 20
rss=$(awk '/VmRSS/ {print $2}' "/proc/$PID/status")
echo "resident: $rss KB for $COUNT entries = $((rss * 1024 / COUNT)) bytes/entry"

[ "$SECONDS_EACH" = 0 ] && exit 0
for w in search modify; do
  for d in 1 32; do
    c0=$(awk '{print $14 + $15}' "/proc/$PID/stat")
    out=$("$LINDEN" bench "$w" --url "$URL" --bind-dn "$ADMIN" --password secret \
      --connections 8 --depth "$d" --duration "$SECONDS_EACH" --warmup 2 --range "$COUNT" \
      --quiet 2>&1 | grep -o 'ops/s=[0-9]*.*p99=[0-9]*')
    c1=$(awk '{print $14 + $15}' "/proc/$PID/stat")
    echo "$w C=8 D=$d: $out (server CPU $((c1 - c0)) ticks)"
  done
done
