# shellcheck shell=bash
# Helpers the bench/ scripts share (sourced). SCRIPT names the caller in messages. It sets ROOT
# (the checkout), SUFFIX, ADMIN and SECRET (the directory's suffix and administrator, unless
# already set) and CLK_TCK.

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SUFFIX=${SUFFIX:-dc=example,dc=com}
ADMIN=${ADMIN:-cn=admin,$SUFFIX}
SECRET=${SECRET:-secret}
CLK_TCK=$(getconf CLK_TCK)

log() { printf '== %s\n' "$*" >&2; }
die() { printf '%s: %s\n' "${SCRIPT:-bench}" "$*" >&2; exit 1; }

# work_dir: WORK, a new temporary directory, and PIDS, processes to stop at exit; at exit they
# are stopped (and children waited for: a stopping Linden writes a snapshot first) and WORK is
# removed unless KEEP=1.
work_dir() {
  WORK=$(mktemp -d "${TMPDIR:-/tmp}/linden-${SCRIPT%.sh}.XXXXXX")
  PIDS=()
  trap stop_all EXIT
}
stop_all() {
  local p
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  if [ "${KEEP:-0}" = 1 ]; then log "work directory kept: $WORK"; else rm -rf "$WORK"; fi
}

# linden_binary: LINDEN, the given binary or this checkout's release build (built if needed).
linden_binary() {
  if [ -z "${LINDEN:-}" ]; then
    log "building linden (release)"
    (cd "$ROOT" && cargo build --release -q -p linden)
    LINDEN="${CARGO_TARGET_DIR:-$ROOT/target}/release/linden"
  fi
  [ -x "$LINDEN" ] || die "no linden binary at $LINDEN"
}

wait_ldap() { # url [tries, 0.1 s apart; default 300]
  for _ in $(seq 1 "${2:-300}"); do
    ldapsearch -x -H "$1" -s base -b "" 1.1 >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  die "no LDAP server answering at $1"
}

# utime+stime of process $1 in clock ticks (getconf CLK_TCK a second): a server's own CPU,
# which holds while client and servers share the machine.
cpu_ticks() { awk '{ sub(/^.*\) /, ""); print $12 + $13 }' "/proc/$1/stat"; }

# slapd_conf DIR [INDEX_LINE...]: DIR/slapd.conf for back-mdb under SUFFIX with the standard
# schema files, its database in DIR/db and its pid in DIR/slapd.pid; equality indexes on
# objectClass and uid, then the given index lines (default: equality on cn, sn and mail) — the
# indexes of design.md's reference workloads.
slapd_conf() {
  local dir=$1; shift
  [ $# -gt 0 ] || set -- "index cn eq" "index sn eq" "index mail eq"
  mkdir -p "$dir/db"
  {
    cat <<EOF
include /etc/ldap/schema/core.schema
include /etc/ldap/schema/cosine.schema
include /etc/ldap/schema/inetorgperson.schema
include /etc/ldap/schema/nis.schema
pidfile $dir/slapd.pid
argsfile $dir/slapd.args
loglevel 0
modulepath /usr/lib/ldap
moduleload back_mdb
sizelimit unlimited

database mdb
maxsize 34359738368
suffix "$SUFFIX"
rootdn "$ADMIN"
rootpw $SECRET
directory $dir/db
index objectClass eq
index uid eq
EOF
    printf '%s\n' "$@"
  } >"$dir/slapd.conf"
}
