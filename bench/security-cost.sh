#!/usr/bin/env bash
# What the security features cost: search and modify rates with the access log, the audit log
# and both, against neither; and search rate bound as an ordinary user (every entry goes through
# the access rules) against bound as the administrator (who bypasses them).
#
#   bench/security-cost.sh [N] [DURATION] [ROUNDS]      (defaults 100000 5 3)
#
# Linden only (these are Linden-internal costs), release build, `linden gen` data with {SSHA}
# passwords, C=8 connections, D=32 requests in flight, loopback. Logs go to files in the work
# directory (a tmpfs-backed /tmp would flatter them: the numbers below are on the data disk).
# Prints one table: median ops/s and median server CPU µs/op over ROUNDS, and the change against
# the baseline. On a shared 2-core machine ops/s moves ±15 % between runs; CPU per op is the
# steadier measure of what a feature costs.
set -euo pipefail
cd "$(dirname "$0")/.."

N=${1:-100000}
DURATION=${2:-5}
ROUNDS=${3:-3}
WARMUP=${WARMUP:-2}
PORT=${PORT:-13391}
LINDEN=${LINDEN:-}
if [ -z "$LINDEN" ]; then
  cargo build --release -q -p linden
  LINDEN="${CARGO_TARGET_DIR:-target}/release/linden"
fi
WORK=$(mktemp -d "${WORKDIR:-$PWD}/.security-cost.XXXXXX")
PID=""
cleanup() { [ -n "$PID" ] && kill "$PID" 2>/dev/null; wait 2>/dev/null || true; [ -n "${KEEP:-}" ] || rm -rf "$WORK"; }
trap cleanup EXIT
ADMIN="cn=admin,dc=example,dc=com"
SECRET=secret
URL="ldap://127.0.0.1:$PORT"

"$LINDEN" gen --count "$N" --password-scheme ssha -o "$WORK/data.ldif"
"$LINDEN" import --data "$WORK/seed" "$WORK/data.ldif" >/dev/null 2>&1

start() { # name, extra config lines
  rm -rf "$WORK/data" && cp -a "$WORK/seed" "$WORK/data"
  printf '%s\n' "$2" >"$WORK/$1.toml"
  "$LINDEN" serve --config "$WORK/$1.toml" --listen "127.0.0.1:$PORT" --data "$WORK/data" \
    --admin-password "$SECRET" >"$WORK/$1.log" 2>&1 &
  PID=$!
  for _ in $(seq 1 200); do
    grep -q "listening on" "$WORK/$1.log" 2>/dev/null && return 0
    sleep 0.1
  done
  cat "$WORK/$1.log" >&2; exit 1
}
stop() { kill "$PID"; wait "$PID" 2>/dev/null || true; PID=""; }

CLK_TCK=$(getconf CLK_TCK)
cpu_ticks() { awk '{ sub(/^.*\) /, ""); print $12 + $13 }' "/proc/$1/stat"; }

# One run: prints "ops/s cpu-µs/op", the server's own CPU (all its threads, the log writer
# included) over the measured part divided by the operations. The CPU figure holds even though
# the load generator shares the machine; ops/s moves with whatever else the machine does.
run() { # workload, bind dn, bind password
  "$LINDEN" bench "$1" --url "$URL" --bind-dn "$2" --password "$3" --connections 8 \
    --depth 32 --duration "$DURATION" --warmup "$WARMUP" --range "$N" --quiet \
    --json "$WORK/r.json" >"$WORK/bench.out" 2>&1 &
  local bench=$!
  sleep "$WARMUP"; sleep 0.05
  local before after
  before=$(cpu_ticks "$PID")
  wait "$bench" || { cat "$WORK/bench.out" >&2; exit 1; }
  after=$(cpu_ticks "$PID")
  python3 -c 'import json,sys
s = json.load(open(sys.argv[1]))["total"]
print(round(s["ops_per_sec"]), round((int(sys.argv[2]) / int(sys.argv[3])) * 1e6 / s["ops"], 2))' \
    "$WORK/r.json" "$(( after - before ))" "$CLK_TCK"
}

median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

declare -A RATES CPUS
record() { # label, "ops cpu"
  RATES["$1"]="${RATES[$1]:-} ${2%% *}"
  CPUS["$1"]="${CPUS[$1]:-} ${2##* }"
  echo "$1: $2" >&2
}

USER_DN="uid=user.1,ou=people,dc=example,dc=com"
# Rounds interleave the configurations, so that drift on a shared machine hits them alike.
for round in $(seq 1 "$ROUNDS"); do
  for cfg in none access audit both; do
    case $cfg in
      none) conf="" ;;
      access) conf="access_log = \"$WORK/access.log\"" ;;
      audit) conf="audit_log = \"$WORK/audit.log\"" ;;
      both) conf=$(printf 'access_log = "%s"\naudit_log = "%s"' "$WORK/access.log" "$WORK/audit.log") ;;
    esac
    start "$cfg" "$conf"
    record "search/$cfg" "$(run search "$ADMIN" "$SECRET")"
    if [ "$cfg" = none ]; then
      # Right after the administrator's search, on the same unchanged data.
      record "search-as-user/none" "$(run search "$USER_DN" password)"
    fi
    record "modify/$cfg" "$(run modify "$ADMIN" "$SECRET")"
    stop
    rm -f "$WORK/access.log" "$WORK/audit.log"
  done
  echo "round $round done" >&2
done

pct() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%+.1f %%", (a - b) * 100 / b }'; }
row() { # label, baseline label, text
  # shellcheck disable=SC2086
  local r c br bc
  r=$(median ${RATES[$1]}); c=$(median ${CPUS[$1]})
  br=$(median ${RATES[$2]}); bc=$(median ${CPUS[$2]})
  echo "| $3 | $r | $(pct "$r" "$br") | $c | $(pct "$c" "$bc") |"
}
echo
echo "| workload | ops/s (median) | vs. baseline | server CPU µs/op (median) | vs. baseline |"
echo "|---|---|---|---|---|"
for w in search modify; do
  for cfg in none access audit both; do
    row "$w/$cfg" "$w/none" "$w, logs: $cfg"
  done
done
row "search-as-user/none" "search/none" "search bound as a user (rules evaluated per entry) vs. as the administrator"
