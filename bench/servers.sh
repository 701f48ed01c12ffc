# Sourced by bench scripts that run several `linden serve` processes (scale-out.sh,
# monitor-cost.sh): after `NAME=...`, `. bench/servers.sh` gives LINDEN (a release build unless
# LINDEN names a binary), ADMIN and SECRET, a work directory WORK (removed at exit unless
# KEEP=1), PIDS (processes killed at exit), log, and cpu_ticks PID (utime+stime, in CLK_TCK).
LINDEN=${LINDEN:-}
if [ -z "$LINDEN" ]; then
  cargo build --release -q -p linden
  LINDEN="${CARGO_TARGET_DIR:-target}/release/linden"
fi
ADMIN="cn=admin,dc=example,dc=com"
SECRET=secret
WORK=$(mktemp -d "${TMPDIR:-/tmp}/linden-$NAME.XXXXXX")
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  if [ "${KEEP:-0}" = 1 ]; then echo "work directory kept: $WORK" >&2; else rm -rf "$WORK"; fi
}
trap cleanup EXIT
log() { printf '== %s\n' "$*" >&2; }
cpu_ticks() { awk '{ sub(/^.*\) /, ""); print $12 + $13 }' "/proc/$1/stat"; }
CLK_TCK=$(getconf CLK_TCK)
