#!/usr/bin/env bash
# Import of N reference entries ({SSHA}): `slapadd -q` (back-mdb, the reference indexes of
# design.md, bench/lib.sh slapd_conf) and `linden import` on the same file, alternating, ROUNDS
# rounds, each under /usr/bin/time; then the median wall ratio and each side's CPU.
#
#   bench/import.sh [N] [ROUNDS]          (default 1000000 entries, 4 rounds)
#
# Environment: LINDEN (binary; default this checkout's release build), WORK (directory for the
# LDIF file and both databases, kept; default a temporary one, removed), LDIF (an existing file
# to load instead of generating one). Prints the load average before each run: on a shared
# machine wall times mean little above 1, and CPU (user+sys) is the figure to compare.
set -euo pipefail
SCRIPT=import.sh
. "$(dirname "$0")/lib.sh"
N=${1:-1000000}
ROUNDS=${2:-4}
command -v slapadd >/dev/null || die "slapadd not found (apt-get install -y slapd)"
linden_binary
if [ -n "${WORK:-}" ]; then mkdir -p "$WORK"; PIDS=(); else work_dir; fi
FILE=${LDIF:-$WORK/ref-$N.ldif}
[ -s "$FILE" ] || "$LINDEN" gen --count "$N" --password-scheme ssha -o "$FILE" 2>/dev/null
slapd_conf "$WORK/slapd"
TIME='%e %U %S %M'
run() { # name command...: prints "name wall user sys maxrss_kb"
  local name=$1; shift
  /usr/bin/time -o "$WORK/time.txt" -f "$TIME" "$@" >/dev/null 2>"$WORK/$name.err" \
    || die "$name failed: $(tail -3 "$WORK/$name.err")"
  echo "$name $(tail -1 "$WORK/time.txt")"
}
results=()
for r in $(seq 1 "$ROUNDS"); do
  order=(slapadd linden)
  [ $((r % 2)) -eq 0 ] && order=(linden slapadd)
  for who in "${order[@]}"; do
    echo "load $(cut -d' ' -f1-3 /proc/loadavg)"
    if [ "$who" = slapadd ]; then
      rm -rf "$WORK/slapd/db" && mkdir -p "$WORK/slapd/db"
      line=$(run slapadd slapadd -q -f "$WORK/slapd/slapd.conf" -l "$FILE")
    else
      rm -rf "$WORK/linden"
      line=$(run linden "$LINDEN" import --data "$WORK/linden" "$FILE")
    fi
    echo "round $r $line" | awk '{printf "round %s %-8s wall %6.2f s  user %6.2f s  sys %5.2f s  peak RSS %4d MB\n", $2, $3, $4, $5, $6, $7/1024}'
    results+=("$r $line")
  done
done
median() { sort -g | awk '{ v[NR] = $1 } END { m = int((NR + 1) / 2); print (NR % 2) ? v[m] : (v[m] + v[m + 1]) / 2 }'; }
ratios=$(printf '%s\n' "${results[@]}" | awk '
  $2 == "slapadd" { sw[$1] = $3; sc[$1] = $4 + $5 }
  $2 == "linden"  { lw[$1] = $3; lc[$1] = $4 + $5 }
  END { for (r in sw) print sw[r] / lw[r], sc[r] / lc[r], lc[r], lw[r] }')
printf 'median of %s rounds: wall ratio slapadd/linden %.1fx, CPU ratio %.1fx; linden %.2f s wall, %.2f s CPU\n' \
  "$ROUNDS" "$(cut -d' ' -f1 <<<"$ratios" | median)" "$(cut -d' ' -f2 <<<"$ratios" | median)" \
  "$(cut -d' ' -f4 <<<"$ratios" | median)" "$(cut -d' ' -f3 <<<"$ratios" | median)"
