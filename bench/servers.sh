# shellcheck shell=bash
# Sourced by bench/compare.sh and bench/sweep.sh: the side-by-side set-up they share (the
# helpers every bench script uses are in bench/lib.sh). Given
# N and SCRIPT (the caller's name for messages), and optionally SLAPD_PORT (13389), LINDEN_PORT
# (13390), PW_SCHEME (ssha), SUFFIX, ADMIN and SECRET, it installs slapd and ldap-utils if absent (Debian/Ubuntu, needs root), builds
# linden (release) unless LINDEN names a binary, generates N reference entries once, loads them
# into slapd (back-mdb, slapadd -q, equality indexes on objectClass, uid, cn, sn and mail) and
# into Linden (linden import, its default indexes), starts both on loopback and checks both hold
# N entries. It leaves WORK, DATA, LINDEN, SLAPD_URL/SLAPD_PID, LINDEN_URL/LINDEN_PID and the
# load times (SLAPADD_SECS, IMPORT_SECS, STARTUP_SECS) set, and stops both servers on exit
# (KEEP=1 keeps the work directory). SUB_INDEXES=1 adds substring indexes on cn, sn and mail to
# both; LINDEN_SERVE_ARGS adds flags to `linden serve`.

# shellcheck source=bench/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
SLAPD_PORT=${SLAPD_PORT:-13389}
LINDEN_PORT=${LINDEN_PORT:-13390}
PW_SCHEME=${PW_SCHEME:-ssha}
work_dir

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

# --- 1. tools -----------------------------------------------------------------------------
need=()
command -v slapd >/dev/null || [ -x /usr/sbin/slapd ] || need+=(slapd)
command -v ldapadd >/dev/null || need+=(ldap-utils)
command -v python3 >/dev/null || need+=(python3)
if [ ${#need[@]} -gt 0 ]; then
  log "installing ${need[*]}"
  as_root apt-get update -q
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${need[@]}"
fi
PATH=$PATH:/usr/sbin
SCHEMA_DIR=/etc/ldap/schema
[ -f "$SCHEMA_DIR/inetorgperson.schema" ] || die "no OpenLDAP schema files in $SCHEMA_DIR"

# --- 2. linden ----------------------------------------------------------------------------
linden_binary

# --- 3. data ------------------------------------------------------------------------------
DATA="$WORK/data.ldif"
log "generating $N entries"
"$LINDEN" gen --count "$N" --suffix "$SUFFIX" --password password \
  --password-scheme "$PW_SCHEME" --output "$DATA"

count_people() { # url
  ldapsearch -x -LLL -H "$1" -D "$ADMIN" -w "$SECRET" -b "ou=people,$SUFFIX" -s one \
    -z 0 "(objectClass=inetOrgPerson)" 1.1 | grep -c '^dn:' || true
}

# --- 4. slapd (back-mdb) ------------------------------------------------------------------
SLAPD_URL="ldap://127.0.0.1:$SLAPD_PORT"
if [ "${SUB_INDEXES:-0}" = 1 ]; then
  slapd_conf "$WORK/slapd" "index cn,sn,mail eq,sub"
else
  slapd_conf "$WORK/slapd"
fi
log "loading slapd (slapadd -q)"
t0=$(date +%s.%N)
slapadd -q -f "$WORK/slapd/slapd.conf" -l "$DATA"
SLAPADD_SECS=$(awk -v t0="$t0" -v t1="$(date +%s.%N)" 'BEGIN { printf "%.1f", t1 - t0 }')
slapd -f "$WORK/slapd/slapd.conf" -h "$SLAPD_URL/"
wait_ldap "$SLAPD_URL"
SLAPD_PID=$(cat "$WORK/slapd/slapd.pid")
PIDS+=("$SLAPD_PID")

# --- 5. linden ----------------------------------------------------------------------------
LINDEN_URL="ldap://127.0.0.1:$LINDEN_PORT"
# Linden's default indexes (eq and pres on objectClass, uid, cn, sn, mail), plus sub if asked.
if [ "${SUB_INDEXES:-0}" = 1 ]; then
  cat >"$WORK/linden.toml" <<EOF
[indexes]
objectClass = ["eq", "pres"]
uid = ["eq", "pres"]
cn = ["eq", "pres", "sub"]
sn = ["eq", "pres", "sub"]
mail = ["eq", "pres", "sub"]
EOF
else
  : >"$WORK/linden.toml"
fi
log "loading linden (linden import)"
t0=$(date +%s.%N)
"$LINDEN" import --config "$WORK/linden.toml" --data "$WORK/linden" --suffix "$SUFFIX" "$DATA" >"$WORK/import.log" 2>&1 \
  || { cat "$WORK/import.log" >&2; die "linden import failed"; }
IMPORT_SECS=$(awk -v t0="$t0" -v t1="$(date +%s.%N)" 'BEGIN { printf "%.1f", t1 - t0 }')
t0=$(date +%s.%N)
# shellcheck disable=SC2086
"$LINDEN" serve --config "$WORK/linden.toml" --listen "127.0.0.1:$LINDEN_PORT" --data "$WORK/linden" --suffix "$SUFFIX" \
  --admin-dn "$ADMIN" --admin-password "$SECRET" ${LINDEN_SERVE_ARGS:-} \
  >"$WORK/linden.log" 2>&1 &
LINDEN_PID=$!
PIDS+=("$LINDEN_PID")
wait_ldap "$LINDEN_URL"
STARTUP_SECS=$(awk -v t0="$t0" -v t1="$(date +%s.%N)" 'BEGIN { printf "%.1f", t1 - t0 }')
log "load times: slapadd -q ${SLAPADD_SECS}s, linden import ${IMPORT_SECS}s; linden startup to first answer ${STARTUP_SECS}s"
for url in "$SLAPD_URL" "$LINDEN_URL"; do
  got=$(count_people "$url")
  [ "$got" = "$N" ] || die "$url holds $got people entries, expected $N"
done
log "both servers hold $N entries"

