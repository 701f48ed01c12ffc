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
# Prints one table: median ops/s over ROUNDS and the change against the baseline.
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

run() { # workload, bind dn, bind password -> ops/s
  local out
  out=$("$LINDEN" bench "$1" --url "$URL" --bind-dn "$2" --password "$3" --connections 8 \
    --depth 32 --duration "$DURATION" --warmup "$WARMUP" --range "$N" --quiet \
    --json "$WORK/r.json" 2>&1) || { echo "$out" >&2; exit 1; }
  python3 -c 'import json,sys; print(round(json.load(open(sys.argv[1]))["total"]["ops_per_sec"]))' "$WORK/r.json"
}

median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

declare -A RESULT
measure() { # label, config, workload, dn, password
  local rates=()
  for _ in $(seq 1 "$ROUNDS"); do rates+=("$(run "$3" "$4" "$5")"); done
  RESULT["$1"]=$(median "${rates[@]}")
  echo "$1: ${RESULT[$1]} ops/s (rounds: ${rates[*]})" >&2
}

USER_DN="uid=user.1,ou=people,dc=example,dc=com"
for cfg in none access audit both; do
  case $cfg in
    none) conf="" ;;
    access) conf="access_log = \"$WORK/access.log\"" ;;
    audit) conf="audit_log = \"$WORK/audit.log\"" ;;
    both) conf=$(printf 'access_log = "%s"\naudit_log = "%s"' "$WORK/access.log" "$WORK/audit.log") ;;
  esac
  start "$cfg" "$conf"
  measure "search/$cfg" "$cfg" search "$ADMIN" "$SECRET"
  measure "modify/$cfg" "$cfg" modify "$ADMIN" "$SECRET"
  if [ "$cfg" = none ]; then
    measure "search-as-user/none" "$cfg" search "$USER_DN" password
  fi
  stop
  rm -f "$WORK/access.log" "$WORK/audit.log"
done

pct() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%+.1f %%", (a - b) * 100 / b }'; }
echo
echo "| workload | logs | ops/s | vs. no logs |"
echo "|---|---|---|---|"
for w in search modify; do
  for cfg in none access audit both; do
    echo "| $w (admin) | $cfg | ${RESULT[$w/$cfg]} | $(pct "${RESULT[$w/$cfg]}" "${RESULT[$w/none]}") |"
  done
done
echo "| search as a user (access rules evaluated per entry) | none | ${RESULT[search-as-user/none]} | $(pct "${RESULT[search-as-user/none]}" "${RESULT[search/none]}") vs. admin |"
