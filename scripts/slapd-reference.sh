#!/usr/bin/env bash
# Throwaway OpenLDAP slapd used as the conformance reference.
#   slapd-reference.sh start DIR PORT   -> slapd on ldap://127.0.0.1:PORT, data/config in DIR
#   slapd-reference.sh stop  DIR [PORT] -> stops the slapd whose pid file is in DIR
# Suffix dc=example,dc=com, rootdn cn=admin,dc=example,dc=com / secret (override with
# SLAPD_ROOTPW). Runs as the current user; does not touch Debian's own slapd instance.
# SLAPD_SCHEMAS (space-separated .schema files) replaces the default core, cosine,
# inetorgperson and nis (scripts/client-suites.sh loads rfc2307bis instead of nis).
# SLAPD_TLS_CERT and SLAPD_TLS_KEY (PEM files) enable StartTLS; SLAPD_LDAPS_PORT then also
# listens for LDAPS on that 127.0.0.1 port.
set -euo pipefail

die() { echo "slapd-reference: ERROR: $*" >&2; exit 1; }

CMD="${1:-}"; DIR="${2:-}"; PORT="${3:-}"
[ -n "$CMD" ] && [ -n "$DIR" ] || die "usage: $0 start|stop DIR PORT"

SUFFIX="dc=example,dc=com"
ROOTDN="cn=admin,${SUFFIX}"
ROOTPW="${SLAPD_ROOTPW:-secret}"
SLAPD="$(command -v slapd || echo /usr/sbin/slapd)"
SLAPADD="$(command -v slapadd || echo /usr/sbin/slapadd)"
MODDIR=/usr/lib/ldap
SCHEMADIR=/etc/ldap/schema

stop() {
    local pidfile="$DIR/slapd.pid"
    [ -f "$pidfile" ] || { echo "slapd-reference: not running (no $pidfile)"; return 0; }
    local pid; pid="$(cat "$pidfile")"
    if kill -0 "$pid" 2>/dev/null; then
        kill -TERM "$pid"
        for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
        if kill -0 "$pid" 2>/dev/null; then kill -KILL "$pid" 2>/dev/null || true; fi
    fi
    rm -f "$pidfile"
    echo "slapd-reference: stopped (pid $pid)"
}

start() {
    [ -n "$PORT" ] || die "PORT required for start"
    [ -x "$SLAPD" ] || die "slapd not found (run scripts/install-test-deps.sh)"
    [ -x "$SLAPADD" ] || die "slapadd not found"
    if [ -f "$DIR/slapd.pid" ] && kill -0 "$(cat "$DIR/slapd.pid")" 2>/dev/null; then
        die "a slapd is already running from $DIR (pid $(cat "$DIR/slapd.pid"))"
    fi
    if (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null; then
        die "port $PORT on 127.0.0.1 is already in use"
    fi
    mkdir -p "$DIR"
    DIR="$(cd "$DIR" && pwd)"
    rm -rf "$DIR/data"; mkdir -p "$DIR/data"

    local modules="moduleload back_mdb"
    local overlays=""
    if [ -e "$MODDIR/ppolicy.la" ] || [ -e "$MODDIR/ppolicy.so" ]; then
        # Hashes cleartext userPassword values on add/modify, and enforces password policies
        # (test_ppolicy.py): an entry's pwdPolicySubentry, else the default policy, which
        # only exists while a test creates it, so that other tests run under no policy.
        # As Linden: ppolicy = true, ppolicy_default, ppolicy_use_lockout = true.
        modules="$modules
moduleload ppolicy"
        overlays="overlay ppolicy
ppolicy_hash_cleartext
ppolicy_default \"cn=default,ou=ppolicy,$SUFFIX\"
ppolicy_use_lockout"
    fi
    if [ -e "$MODDIR/unique.la" ] || [ -e "$MODDIR/unique.so" ]; then
        # As the Linden the conformance suite runs against (run-conformance-linden.sh):
        # uid and mail unique under ou=unique (test_unique.py).
        modules="$modules
moduleload unique"
        overlays="$overlays
overlay unique
unique_uri ldap:///ou=unique,$SUFFIX?uid,mail?sub"
    fi
    if [ -e "$MODDIR/memberof.la" ] || [ -e "$MODDIR/memberof.so" ]; then
        # Group membership, as Linden's memberof = true with its default memberof_groups
        # (test_memberof.py): one instance per kind of group, each following deleted and
        # renamed members into its groups (memberof-refint).
        modules="$modules
moduleload memberof"
        overlays="$overlays
overlay memberof
memberof-refint TRUE
overlay memberof
memberof-group-oc groupOfUniqueNames
memberof-member-ad uniqueMember
memberof-refint TRUE"
    fi
    if [ -e "$MODDIR/refint.la" ] || [ -e "$MODDIR/refint.so" ]; then
        # Referential integrity, as Linden's refint (run-conformance-linden.sh). memberOf is
        # among the attributes so that a renamed parent of groups renames the memberOf values
        # naming them (the memberof overlay follows renames of the group entry only).
        modules="$modules
moduleload refint"
        overlays="$overlays
overlay refint
refint_attributes member uniqueMember owner manager seeAlso memberOf"
    fi
    if [ -e "$MODDIR/sssvlv.la" ] || [ -e "$MODDIR/sssvlv.so" ]; then
        # Server-side sort and virtual list view (test_sort_vlv.py).
        modules="$modules
moduleload sssvlv"
        overlays="$overlays
overlay sssvlv"
    fi
    if [ -e "$MODDIR/deref.la" ] || [ -e "$MODDIR/deref.so" ]; then
        # The dereference control (draft-masarati-ldap-deref), as Linden answers it.
        modules="$modules
moduleload deref"
        overlays="$overlays
overlay deref"
    fi
    if [ -e "$MODDIR/syncprov.la" ] || [ -e "$MODDIR/syncprov.so" ]; then
        # Content synchronization provider (RFC 4533), as Linden's syncprov = true
        # (test_syncrepl.py).
        modules="$modules
moduleload syncprov"
        overlays="$overlays
overlay syncprov
syncprov-sessionlog 10000"
    fi
    local extra_schemas=""
    if [ -e "$MODDIR/dynlist.la" ] || [ -e "$MODDIR/dynlist.so" ]; then
        # Dynamic groups, as Linden's [[dynlist]] (run-conformance-linden.sh;
        # test_dynlist.py): groupOfURLs members from memberURL, with memberOf; and dynamic
        # lists on labeledURIObject entries (the attributes their labeledURI names).
        modules="$modules
moduleload dynlist"
        overlays="$overlays
overlay dynlist
dynlist-attrset groupOfURLs memberURL member+memberOf
dynlist-attrset labeledURIObject labeledURI"
        extra_schemas="$SCHEMADIR/dyngroup.schema"
    fi
    if [ -e "$MODDIR/pw-sha2.la" ] || [ -e "$MODDIR/pw-sha2.so" ]; then
        modules="$modules
moduleload pw-sha2"
    fi
    local hashed; hashed="$(slappasswd -s "$ROOTPW" 2>/dev/null || echo "$ROOTPW")"

    local includes="" f tls="" urls="ldap://127.0.0.1:$PORT/"
    if [ -n "${SLAPD_TLS_CERT:-}" ]; then
        tls="TLSCertificateFile    $SLAPD_TLS_CERT
TLSCertificateKeyFile $SLAPD_TLS_KEY"
        [ -z "${SLAPD_LDAPS_PORT:-}" ] || urls="$urls ldaps://127.0.0.1:$SLAPD_LDAPS_PORT/"
    fi
    for f in ${SLAPD_SCHEMAS:-$SCHEMADIR/core.schema $SCHEMADIR/cosine.schema $SCHEMADIR/inetorgperson.schema $SCHEMADIR/nis.schema} $extra_schemas; do
        includes="${includes}include     $f
"
    done

    cat > "$DIR/slapd.conf" <<CONF
# generated by scripts/slapd-reference.sh
$includes
pidfile     $DIR/slapd.pid
argsfile    $DIR/slapd.args
modulepath  $MODDIR
$modules

loglevel    stats
$tls
# Proxied authorization (RFC 4370): who may act for an entry is listed in its authzFrom
# (Linden: the proxy right on the entry); u:NAME maps to the one entry whose uid is NAME, as
# Linden maps it; a non-critical proxied authorization or dontUseCopy control is a
# protocolError (RFC 4370 section 3, RFC 6171 section 3), as Linden answers.
authz-policy from
authz-regexp "^uid=([^,]*)(,cn=[^,]*)?,cn=auth$" "ldap:///$SUFFIX??sub?(uid=\$1)"
disallow    proxy_authz_non_critical dontusecopy_non_critical
sizelimit   500
password-hash {SSHA}

database    mdb
maxsize     268435456
suffix      "$SUFFIX"
rootdn      "$ROOTDN"
rootpw      $hashed
directory   $DIR/data
index       objectClass eq
index       uid,cn,sn,mail eq

$overlays

# Mirrors Linden's intended policy: userPassword is returned only to the administrator
# (rootdn bypasses ACLs); its owner may change it (=w) and authenticate with it (=x) but
# not read it. Plain "by self write" would also grant read (slapd access levels are cumulative).
access to attrs=userPassword
    by self =wx
    by anonymous auth
    by * none
# As Linden's conformance rules (run-conformance-linden.sh): entries described
# "hidden-entry" exist for nobody but the rootdn.
access to filter=(description=hidden-entry)
    by * none
access to *
    by * read

# cn=Monitor (test_monitor.py), readable by the administrator only, as Linden's by default.
database    monitor
access to dn.subtree="cn=Monitor"
    by dn.exact="$ROOTDN" read
    by * none
CONF

    "$SLAPD" -Tt -u -f "$DIR/slapd.conf" >"$DIR/slaptest.log" 2>&1 \
        || { cat "$DIR/slaptest.log" >&2; die "generated slapd.conf failed slaptest"; }

    cat > "$DIR/base.ldif" <<LDIF
dn: $SUFFIX
objectClass: top
objectClass: dcObject
objectClass: organization
dc: example
o: Example
LDIF
    "$SLAPADD" -f "$DIR/slapd.conf" -l "$DIR/base.ldif" >"$DIR/slapadd.log" 2>&1 \
        || { cat "$DIR/slapadd.log" >&2; die "slapadd of suffix entry failed"; }

    "$SLAPD" -f "$DIR/slapd.conf" -h "$urls" >"$DIR/slapd.log" 2>&1 \
        || { cat "$DIR/slapd.log" >&2; die "slapd failed to start"; }

    for _ in $(seq 1 50); do
        if ldapsearch -x -LLL -H "ldap://127.0.0.1:$PORT" -s base -b "" "(objectClass=*)" namingContexts >/dev/null 2>&1; then
            echo "slapd-reference: running on ldap://127.0.0.1:$PORT (pid $(cat "$DIR/slapd.pid"), dir $DIR)"
            return 0
        fi
        sleep 0.2
    done
    cat "$DIR/slapd.log" >&2
    die "slapd did not answer on ldap://127.0.0.1:$PORT"
}

case "$CMD" in
    start) start ;;
    stop) stop ;;
    *) die "usage: $0 start|stop DIR PORT" ;;
esac
