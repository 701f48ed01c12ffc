#!/usr/bin/env bash
# Adding one member to a big group, and removing one, with memberOf and referential integrity
# maintained: Linden (`memberof = true`, `refint`) against slapd 2.5 with the `memberof` and
# `refint` overlays, same data, same client, same run.
#
#   bench/memberof.sh [N] [K] [ROUNDS]
#   bench/memberof.sh 100000 200 5
#
# Data: `linden gen` makes N + K people; the first N are members of one groupOfNames
# (cn=big,ou=groups) and carry its DN in memberOf (as slapcat output of a slapd with the
# memberof overlay would), the K others are not members. Both servers load the same LDIF
# (slapadd -q; linden import). A round, for each server in turn (the order alternates between
# rounds): one `ldapmodify` connection sends K modify requests, each adding one of the K people
# to the group (`add: member`), then K requests removing them again (`delete: member`), one at a
# time (each waits for its answer, so each is its own durable write on both servers). For each
# phase: operations per second and the server's CPU per operation (utime+stime of the server
# process from /proc/PID/stat around the phase, all its threads). After the runs the script
# checks that both servers hold the same membership (N members; the K people without memberOf).
#
# Servers:
#   slapd     back-mdb as configured by default: the group is one entry, rewritten whole on
#             every change (the way back-mdb stores an entry unless `multival` is set).
#   slapd-mv  the same with `multival member,memberOf 100,10` (back-mdb keeps the values of an
#             attribute with more than 100 values as separate records, so a change adds or
#             deletes records instead of rewriting the entry) and `sortvals member memberOf`
#             (values kept sorted, so finding a value is a binary search).
#   linden    memberof = true; refint = member, uniqueMember, memberOf.
#   linden-base  the same with the binary LINDEN_BASE (e.g. a build of main, for before/after
#             runs that alternate with the others).
# SERVERS (default "slapd slapd-mv linden") picks among them.
#
# CALLGRIND=1 runs the Linden servers under valgrind's callgrind (instrumented during the
# phases only) and adds the instructions per operation (Ir, the admin bind each phase makes
# subtracted) to the table: counts that, unlike times, do not move with the machine's load;
# the CPU column is then valgrind's and means nothing. The inclusive profile of each Linden
# server's last add phase is written to WORK/SERVER-add.txt (callgrind_annotate), with KEEP=1
# to read it.
#
# Environment: LINDEN (a prebuilt binary; otherwise `cargo build --release`), LINDEN_BASE,
# LINDEN_SERVE_ARGS (extra flags for `linden serve`), SERVERS, PORT_BASE (13480), CALLGRIND,
# KEEP=1 (keep the work directory).
set -euo pipefail

SCRIPT=memberof.sh
# shellcheck source=bench/lib.sh
. "$(dirname "$0")/lib.sh"

N=${1:-100000}
K=${2:-200}
ROUNDS=${3:-5}
SERVERS=${SERVERS:-"slapd slapd-mv linden"}
PORT_BASE=${PORT_BASE:-13480}
GROUP="cn=big,ou=groups,$SUFFIX"

PATH=$PATH:/usr/sbin
command -v slapd >/dev/null || die "slapd not found (apt-get install slapd ldap-utils)"
command -v ldapmodify >/dev/null || die "ldapmodify not found (apt-get install ldap-utils)"
work_dir
linden_binary

# --- data ---------------------------------------------------------------------------------
log "generating $N members and $K others"
"$LINDEN" gen --count $((N + K)) --suffix "$SUFFIX" --output "$WORK/people.ldif"
DATA="$WORK/data.ldif"
# The first N people get memberOf; then ou=groups and the group naming them.
awk -v n="$N" -v group="$GROUP" '
  /^dn: uid=user\.[0-9]+,/ { split($2, a, /[.,]/); member = (a[2] + 0 < n) }
  /^$/ { if (member) print "memberOf: " group; member = 0 }
  { print }
  END { if (member) print "memberOf: " group }
' "$WORK/people.ldif" >"$DATA"
{
  printf '\ndn: ou=groups,%s\nobjectClass: organizationalUnit\nou: groups\n\n' "$SUFFIX"
  printf 'dn: %s\nobjectClass: groupOfNames\ncn: big\n' "$GROUP"
  for ((i = 0; i < N; i++)); do printf 'member: uid=user.%d,ou=people,%s\n' "$i" "$SUFFIX"; done
} >>"$DATA"
rm -f "$WORK/people.ldif"
# The modify requests: add each of the K others, then remove them.
for op in add delete; do
  for ((i = N; i < N + K; i++)); do
    printf 'dn: %s\nchangetype: modify\n%s: member\nmember: uid=user.%d,ou=people,%s\n\n' \
      "$GROUP" "$op" "$i" "$SUFFIX"
  done >"$WORK/$op.ldif"
done

# --- servers ------------------------------------------------------------------------------
declare -A URL PID
port=$PORT_BASE
for s in $SERVERS; do
  port=$((port + 1))
  URL[$s]="ldap://127.0.0.1:$port"
  case $s in
    slapd | slapd-mv)
      d="$WORK/$s"
      mv=()
      [ "$s" = slapd-mv ] && mv=("sortvals member memberOf" "multival member,memberOf 100,10")
      slapd_conf "$d" "moduleload memberof" "moduleload refint" "${mv[@]}" \
        "index cn,sn,mail eq" "index member,uniqueMember,memberOf eq" \
        "overlay memberof" "memberof-refint TRUE" \
        "overlay refint" "refint_attributes member uniqueMember memberOf"
      log "loading $s (slapadd -q)"
      slapadd -q -f "$d/slapd.conf" -l "$DATA"
      slapd -f "$d/slapd.conf" -h "${URL[$s]}/"
      PID[$s]=$(cat "$d/slapd.pid")
      PIDS+=("${PID[$s]}")
      wait_ldap "${URL[$s]}"
      ;;
    linden | linden-base)
      bin=$LINDEN
      if [ "$s" = linden-base ]; then
        bin=${LINDEN_BASE:-}
        [ -x "$bin" ] || die "linden-base needs LINDEN_BASE, a linden binary"
      fi
      cat >"$WORK/linden.toml" <<EOF
memberof = true
refint = ["member", "uniqueMember", "memberOf"]
EOF
      log "loading $s (linden import)"
      "$bin" import --config "$WORK/linden.toml" --data "$WORK/$s" --suffix "$SUFFIX" "$DATA" \
        >"$WORK/$s-import.log" 2>&1 || { cat "$WORK/$s-import.log" >&2; die "linden import failed"; }
      run=()
      if [ "${CALLGRIND:-0}" = 1 ]; then
        run=(valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$WORK/$s.cg.%p")
      fi
      # shellcheck disable=SC2086
      "${run[@]}" "$bin" serve --config "$WORK/linden.toml" --listen "127.0.0.1:$port" --data "$WORK/$s" \
        --suffix "$SUFFIX" --admin-dn "$ADMIN" --admin-password "$SECRET" ${LINDEN_SERVE_ARGS:-} \
        >"$WORK/$s.log" 2>&1 &
      PID[$s]=$!
      PIDS+=("${PID[$s]}")
      wait_ldap "${URL[$s]}" 6000
      if [ "${CALLGRIND:-0}" = 1 ]; then callgrind_control -i on "${PID[$s]}" >/dev/null; fi
      ;;
    *) die "unknown server '$s' (slapd, slapd-mv, linden, linden-base)" ;;
  esac
done

members() { # url: how many values the group has (a search for the members' memberOf is indexed)
  ldapsearch -x -LLL -H "$1" -D "$ADMIN" -w "$SECRET" -b "ou=people,$SUFFIX" -z 0 \
    "(memberOf=$GROUP)" 1.1 | grep -c '^dn:' || true
}
for s in $SERVERS; do
  got=$(members "${URL[$s]}")
  [ "$got" = "$N" ] || die "$s: $got entries have memberOf $GROUP, expected $N"
done
log "every server holds the group with $N members"

# --- runs ---------------------------------------------------------------------------------
now() { date +%s.%N; }
: >"$WORK/results.tsv"

# Under callgrind: the instructions the server ran for `$@` (a client command), from a dump
# made right after it of counts zeroed right before it.
counted() { # server command...
  local s=$1 pid=${PID[$1]} dump
  shift
  callgrind_control -z "$pid" >/dev/null
  "$@" >/dev/null || die "$s: $* failed"
  callgrind_control -d "$pid" >/dev/null
  dump=$(ls -t "$WORK/$s.cg.$pid".* | head -n 1)
  cp "$dump" "$WORK/$s-last.cg"
  awk '/^totals:/ { print $2 }' "$dump"
}
declare -A BIND_IR
if [ "${CALLGRIND:-0}" = 1 ]; then
  for s in $SERVERS; do
    case $s in linden*)
      BIND_IR[$s]=$(counted "$s" ldapwhoami -x -H "${URL[$s]}" -D "$ADMIN" -w "$SECRET") ;;
    esac
  done
fi

phase() { # server op round
  local s=$1 op=$2 r=$3 t0 t1 c0 c1 ir=-
  local cmd=(ldapmodify -x -H "${URL[$s]}" -D "$ADMIN" -w "$SECRET" -f "$WORK/$op.ldif")
  c0=$(cpu_ticks "${PID[$s]}")
  t0=$(now)
  if [ -n "${BIND_IR[$s]:-}" ]; then
    ir=$(counted "$s" "${cmd[@]}")
    ir=$(((ir - BIND_IR[$s]) / K))
    [ "$op" = add ] && callgrind_annotate --inclusive=yes "$WORK/$s-last.cg" >"$WORK/$s-add.txt" 2>&1
  else
    "${cmd[@]}" >/dev/null || die "$s: ldapmodify ($op) failed"
  fi
  t1=$(now)
  c1=$(cpu_ticks "${PID[$s]}")
  awk -v s="$s" -v op="$op" -v r="$r" -v k="$K" -v t0="$t0" -v t1="$t1" -v c0="$c0" -v c1="$c1" \
    -v hz="$CLK_TCK" -v ir="$ir" 'BEGIN { printf "%s\t%s\t%d\t%.1f\t%.0f\t%s\n", s, op, r, k / (t1 - t0), (c1 - c0) / hz * 1e6 / k, ir }' \
    >>"$WORK/results.tsv"
}

read -r -a order <<<"$SERVERS"
for ((r = 1; r <= ROUNDS; r++)); do
  # Alternate the order: odd rounds as given, even rounds reversed.
  list=("${order[@]}")
  if ((r % 2 == 0)); then
    list=()
    for ((i = ${#order[@]} - 1; i >= 0; i--)); do list+=("${order[$i]}"); done
  fi
  for s in "${list[@]}"; do
    phase "$s" add "$r"
    phase "$s" delete "$r"
  done
  log "round $r of $ROUNDS done ($(tail -n $((2 * ${#order[@]})) "$WORK/results.tsv" | awk -F'\t' '{ printf "%s %s %s/s %sus; ", $1, $2, $4, $5 }'))"
done

# The K people are members of nothing again, and the group has its N members, on every server.
for s in $SERVERS; do
  got=$(members "${URL[$s]}")
  [ "$got" = "$N" ] || die "$s: after the runs $got entries have memberOf $GROUP, expected $N"
done

# --- table --------------------------------------------------------------------------------
echo
echo "Group of $N members, $K single-member modifies per phase, $ROUNDS rounds (medians)."
echo
if [ "${CALLGRIND:-0}" = 1 ]; then
  echo "| server | add member: ops/s | add: CPU µs/op | add: instructions/op | remove member: ops/s | remove: CPU µs/op | remove: instructions/op |"
  echo "|---|---:|---:|---:|---:|---:|---:|"
else
  echo "| server | add member: ops/s | add: CPU µs/op | remove member: ops/s | remove: CPU µs/op |"
  echo "|---|---:|---:|---:|---:|"
fi
median() { sort -n | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else printf "%.1f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
for s in $SERVERS; do
  row="| $s"
  for op in add delete; do
    ops=$(awk -F'\t' -v s="$s" -v op="$op" '$1 == s && $2 == op { print $4 }' "$WORK/results.tsv" | median)
    cpu=$(awk -F'\t' -v s="$s" -v op="$op" '$1 == s && $2 == op { print $5 }' "$WORK/results.tsv" | median)
    row="$row | $ops | $cpu"
    if [ "${CALLGRIND:-0}" = 1 ]; then
      case $s in
        linden*) row="$row | $(awk -F'\t' -v s="$s" -v op="$op" '$1 == s && $2 == op { print $6 }' "$WORK/results.tsv" | median)" ;;
        *) row="$row | -" ;;
      esac
    fi
  done
  echo "$row |"
done
echo
echo "Every run (server, phase, round, ops/s, CPU µs/op, instructions/op or -):"
sed 's/^/    /' "$WORK/results.tsv"
