#!/usr/bin/env bash
# Linux login clients against Linden, end to end: SSSD 2.8 and nslcd 0.9 (Debian 12) resolve
# users and rfc2307bis groups, authenticate through PAM, read SSH keys and sudo rules from the
# directory; a burst of failed logins does not lock anyone else out; `ldapwhoami -Y EXTERNAL`
# over ldapi works as root. docs/login-clients.md has the results.
#
#   scripts/login-clients.sh [sssd] [nslcd]      (default: both)
#
# Needs root on Debian 12: it installs the packages (apt-get), writes /etc/sssd/sssd.conf,
# /etc/nslcd.conf and two PAM services (/etc/pam.d/linden-sss, /etc/pam.d/linden-ldap), and
# points /etc/nsswitch.conf at sss or ldap while it runs; it restores nsswitch.conf and stops the
# daemons it started when it exits. Not part of scripts/test.sh for that reason. LINDEN names
# the linden binary (default: target/debug/linden, built here). Work files go to
# LOGIN_CLIENTS_DIR (default /tmp/linden-login-clients). Exits 0 when every check passed, 1
# otherwise; each check prints one line "ok" or "FAIL".
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
WORK="${LOGIN_CLIENTS_DIR:-/tmp/linden-login-clients}"
SUFFIX="dc=example,dc=com"
ADMIN="cn=admin,$SUFFIX"
ADMIN_PW="admin-secret"
SVC="cn=nss,ou=services,$SUFFIX"
SVC_PW="nss-secret"
WAIT_TRIES=100              # polls of 0.1 s for a daemon to answer (10 s), then give up

log() { echo "login-clients: $*" >&2; }
die() { log "ERROR: $*"; exit 2; }
failures=0
check() {  # check NAME COMMAND...: runs COMMAND, prints ok/FAIL
    local name="$1"; shift
    local out
    if out="$("$@" 2>&1)"; then
        echo "ok    $name"
    else
        echo "FAIL  $name"
        echo "$out" | sed 's/^/      /' | head -20
        failures=$((failures + 1))
    fi
}

[ "$(id -u)" = 0 ] || die "run as root (it installs packages and configures NSS and PAM)"
clients=("$@")
[ ${#clients[@]} -gt 0 ] || clients=(sssd nslcd)
for c in "${clients[@]}"; do
    case "$c" in sssd|nslcd) ;; *) die "unknown client '$c' (sssd, nslcd)" ;; esac
done

# Packages. libnss-sss and libnss-ldapd add themselves to nsswitch.conf when installed; the
# original is kept first and restored at exit.
NSSWITCH_BACKUP="$WORK/nsswitch.conf.orig"
mkdir -p "$WORK"
[ -f "$NSSWITCH_BACKUP" ] || cp /etc/nsswitch.conf "$NSSWITCH_BACKUP"
need=()
for p in sssd-ldap libnss-sss libpam-sss sssd-tools libsss-sudo nslcd libnss-ldapd libpam-ldapd \
         pamtester sudo ldap-utils openssl; do
    dpkg -s "$p" >/dev/null 2>&1 || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
    log "installing ${need[*]}"
    apt-get update -qq || die "apt-get update failed"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null \
        || die "apt-get install ${need[*]} failed"
fi
# The package scripts may have started the daemons with their default configuration.
pkill -x sssd 2>/dev/null; pkill -x nslcd 2>/dev/null

if [ -z "${LINDEN:-}" ]; then
    (cd "$ROOT" && cargo build --quiet -p linden) || die "cargo build failed"
    LINDEN="${CARGO_TARGET_DIR:-$ROOT/target}/debug/linden"
fi
[ -x "$LINDEN" ] || die "no linden binary at $LINDEN"

pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
    pkill -x sssd 2>/dev/null; pkill -x nslcd 2>/dev/null
    cp "$NSSWITCH_BACKUP" /etc/nsswitch.conf
    rm -f /etc/pam.d/linden-sss /etc/pam.d/linden-ldap
}
trap cleanup EXIT

# A CA and a server certificate for 127.0.0.1: SSSD and nslcd check the server's certificate
# (tls_reqcert demand), as a real deployment does.
TLS="$WORK/tls"
if [ ! -f "$TLS/server.pem" ]; then
    mkdir -p "$TLS"
    openssl req -x509 -newkey rsa:2048 -nodes -days 30 -subj "/CN=Linden test CA" \
        -addext "basicConstraints=critical,CA:TRUE" -keyout "$TLS/ca.key" -out "$TLS/ca.pem" \
        2>/dev/null || die "openssl: CA"
    openssl req -newkey rsa:2048 -nodes -subj "/CN=127.0.0.1" -keyout "$TLS/server.key" \
        -out "$TLS/server.csr" 2>/dev/null || die "openssl: CSR"
    printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' > "$TLS/ext"
    openssl x509 -req -in "$TLS/server.csr" -CA "$TLS/ca.pem" -CAkey "$TLS/ca.key" \
        -CAcreateserial -days 30 -extfile "$TLS/ext" -out "$TLS/server.pem" 2>/dev/null \
        || die "openssl: server certificate"
    chmod 0644 "$TLS/ca.pem"
fi
chmod 0755 "$WORK" "$TLS"

PORT="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
URI="ldap://127.0.0.1:$PORT"
LDAPI="$WORK/ldapi"
LDAPI_URI="ldapi://$(python3 -c 'import sys,urllib.parse; print(urllib.parse.quote(sys.argv[1], safe=""))' "$LDAPI")"
DATA="$WORK/data"
rm -rf "$DATA"
cat > "$WORK/linden.toml" <<EOF
listen = "127.0.0.1:$PORT"
ldapi = "$LDAPI"
data = "$DATA"
suffix = "$SUFFIX"
admin_dn = "$ADMIN"
admin_password = "$ADMIN_PW"
schemas = ["rfc2307bis", "openssh-lpk", "sudo"]
indexes = ["objectClass", "uid", "cn", "uidNumber", "gidNumber", "member", "memberUid", "sudoUser"]
tls_cert = "$TLS/server.pem"
tls_key = "$TLS/server.key"
require_tls_for_bind = true

[[authz_map]]
match = 'gidNumber=0\+uidNumber=0,cn=peercred,cn=external,cn=auth'
replace = "$ADMIN"
EOF
"$LINDEN" serve --config "$WORK/linden.toml" > "$WORK/linden.log" 2>&1 &
pids+=($!)
for _ in $(seq $WAIT_TRIES); do
    ldapsearch -x -H "$URI" -s base -b "" namingContexts >/dev/null 2>&1 && break
    sleep 0.1
done
ldapsearch -x -H "$URI" -s base -b "" namingContexts >/dev/null 2>&1 \
    || die "Linden did not start (log: $WORK/linden.log)"

export LDAPTLS_CACERT="$TLS/ca.pem"
SSH_KEY="ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFnT7f0bP1cZ2X7mJq8k2a3ZbUq1VjJq3yZQm3k7n9xW alice@example"
ldapadd -x -ZZ -H "$URI" -D "$ADMIN" -w "$ADMIN_PW" > "$WORK/load.log" 2>&1 <<EOF || die "loading the entries failed: $(cat "$WORK/load.log")"
dn: ou=people,$SUFFIX
objectClass: organizationalUnit
ou: people

dn: ou=groups,$SUFFIX
objectClass: organizationalUnit
ou: groups

dn: ou=services,$SUFFIX
objectClass: organizationalUnit
ou: services

dn: ou=SUDOers,$SUFFIX
objectClass: organizationalUnit
ou: SUDOers

dn: $SVC
objectClass: applicationProcess
objectClass: simpleSecurityObject
cn: nss
userPassword: $SVC_PW

dn: uid=alice,ou=people,$SUFFIX
objectClass: inetOrgPerson
objectClass: posixAccount
objectClass: ldapPublicKey
uid: alice
cn: Alice Example
sn: Example
uidNumber: 10001
gidNumber: 20000
homeDirectory: /home/alice
loginShell: /bin/bash
userPassword: alice-pw
sshPublicKey: $SSH_KEY

dn: uid=bob,ou=people,$SUFFIX
objectClass: inetOrgPerson
objectClass: posixAccount
uid: bob
cn: Bob Example
sn: Example
uidNumber: 10002
gidNumber: 20000
homeDirectory: /home/bob
loginShell: /bin/bash
userPassword: bob-pw

dn: uid=carol,ou=people,$SUFFIX
objectClass: inetOrgPerson
objectClass: posixAccount
uid: carol
cn: Carol Example
sn: Example
uidNumber: 10003
gidNumber: 20000
homeDirectory: /home/carol
loginShell: /bin/bash
userPassword: carol-pw

dn: cn=staff,ou=groups,$SUFFIX
objectClass: groupOfNames
objectClass: posixGroup
cn: staff
gidNumber: 20000
member: uid=alice,ou=people,$SUFFIX
member: uid=bob,ou=people,$SUFFIX
member: uid=carol,ou=people,$SUFFIX

dn: cn=devs,ou=groups,$SUFFIX
objectClass: groupOfNames
objectClass: posixGroup
cn: devs
gidNumber: 20001
member: uid=alice,ou=people,$SUFFIX
member: uid=bob,ou=people,$SUFFIX

dn: cn=alice-apt,ou=SUDOers,$SUFFIX
objectClass: sudoRole
cn: alice-apt
sudoUser: alice
sudoHost: ALL
sudoRunAsUser: root
sudoCommand: /usr/bin/apt

dn: cn=devs-journal,ou=SUDOers,$SUFFIX
objectClass: sudoRole
cn: devs-journal
sudoUser: %devs
sudoHost: ALL
sudoCommand: /usr/bin/journalctl
sudoOption: !authenticate
EOF

for u in $(seq -w 1 12); do
    printf 'dn: uid=user%s,ou=people,%s\nobjectClass: inetOrgPerson\nobjectClass: posixAccount\nuid: user%s\ncn: User %s\nsn: User\nuidNumber: 200%s\ngidNumber: 20000\nhomeDirectory: /home/user%s\nuserPassword: user%s-pw\n\n' \
        "$u" "$SUFFIX" "$u" "$u" "$u" "$u" "$u"
done | ldapadd -x -ZZ -H "$URI" -D "$ADMIN" -w "$ADMIN_PW" >> "$WORK/load.log" 2>&1 \
    || die "loading the burst users failed: $(cat "$WORK/load.log")"

# Failed logins of others from this host must not stop the right ones: 60 failed logins spread
# over twelve users (five each, under the per-DN limit, over the per-address limit of 50), then
# alice's right password must work at once.
burst() {  # burst PAM_SERVICE
    local svc="$1" i u
    for i in $(seq 5); do
        for u in $(seq -w 1 12); do
            echo wrong | pamtester "$svc" "user$u" authenticate >/dev/null 2>&1
        done
    done
    echo alice-pw | pamtester "$svc" alice authenticate
}

# Someone else fails binds as the service account: its own binds still work.
svc_not_locked() {
    local i
    for i in $(seq 10); do
        ldapwhoami -x -ZZ -H "$URI" -D "$SVC" -w wrong >/dev/null 2>&1
    done
    ldapwhoami -x -ZZ -H "$URI" -D "$SVC" -w "$SVC_PW"
}

nsswitch() {  # nsswitch SOURCE: passwd, group, shadow and sudoers from files then SOURCE
    sed -E -e "s/^(passwd|group|shadow):.*/\1: files $1/" -e '/^sudoers:/d' \
        "$NSSWITCH_BACKUP" > /etc/nsswitch.conf
    [ "$1" = sss ] && echo "sudoers: files sss" >> /etc/nsswitch.conf
    true
}

wait_for_user() {
    local _
    for _ in $(seq $WAIT_TRIES); do
        getent passwd "$1" >/dev/null 2>&1 && return 0
        sleep 0.1
    done
    return 1
}

members_of() { getent group "$1" | cut -d: -f4 | tr , '\n' | sort | tr '\n' ' '; }

expect() {  # expect WANT COMMAND...: the command's output (trimmed) is WANT
    local want="$1"; shift
    local got
    got="$("$@" 2>&1 | sed -e 's/[[:space:]]*$//')"
    [ "$got" = "$want" ] || { echo "want: $want"; echo "got:  $got"; return 1; }
}
contains() {  # contains NEEDLE COMMAND...
    local needle="$1"; shift
    local got
    got="$("$@" 2>&1)"
    grep -qF -- "$needle" <<<"$got" || { echo "no '$needle' in:"; echo "$got"; return 1; }
}

check "ldapwhoami -Y EXTERNAL over ldapi as root maps to the administrator" \
    expect "dn:$ADMIN" ldapwhoami -Q -Y EXTERNAL -H "$LDAPI_URI"

run_sssd() {
    log "SSSD $(sssd --version)"
    pkill -x sssd 2>/dev/null
    rm -f /var/lib/sss/db/* /var/lib/sss/mc/* 2>/dev/null
    install -m 0600 /dev/stdin /etc/sssd/sssd.conf <<EOF
[sssd]
services = nss, pam, sudo, ssh
domains = LINDEN

[nss]
[pam]
[sudo]
[ssh]

[domain/LINDEN]
id_provider = ldap
auth_provider = ldap
chpass_provider = ldap
sudo_provider = ldap
ldap_uri = $URI
ldap_search_base = $SUFFIX
ldap_schema = rfc2307bis
ldap_default_bind_dn = $SVC
ldap_default_authtok = $SVC_PW
ldap_id_use_start_tls = true
ldap_tls_reqcert = demand
ldap_tls_cacert = $TLS/ca.pem
ldap_sudo_search_base = ou=SUDOers,$SUFFIX
ldap_user_ssh_public_key = sshPublicKey
cache_credentials = false
entry_cache_timeout = 1
EOF
    cat > /etc/pam.d/linden-sss <<EOF
auth     required pam_sss.so
account  required pam_sss.so
password required pam_sss.so
EOF
    nsswitch sss
    sssd -i --logger=files -d 2 > "$WORK/sssd.log" 2>&1 &
    pids+=($!)
    check "sssd: getent passwd alice" \
        bash -c "$(declare -f wait_for_user); WAIT_TRIES=$WAIT_TRIES wait_for_user alice && getent passwd alice | cut -d: -f1,3- | grep -qx 'alice:10001:20000:Alice Example:/home/alice:/bin/bash'"
    check "sssd: rfc2307bis group members (member DNs)" expect "alice bob" members_of devs
    check "sssd: id alice lists the primary and the rfc2307bis groups" \
        expect "uid=10001(alice) gid=20000(staff) groups=20000(staff),20001(devs)" id alice
    check "sssd: SSH key of alice (sss_ssh_authorizedkeys)" expect "$SSH_KEY" sss_ssh_authorizedkeys alice
    check "sssd: sudo rule for alice by uid" contains "/usr/bin/apt" sudo -l -U alice
    check "sssd: sudo rule for devs by group (bob)" contains "/usr/bin/journalctl" sudo -l -U bob
    check "sssd: carol has no sudo rule" contains "not allowed to run sudo" sudo -l -U carol
    check "sssd: PAM login with the right password" \
        bash -c "echo alice-pw | pamtester linden-sss alice authenticate"
    check "sssd: PAM login with a wrong password fails" \
        bash -c "! (echo nope | pamtester linden-sss alice authenticate)"
    check "sssd: PAM account check" pamtester linden-sss alice acct_mgmt
    check "sssd: after 60 failed logins of others from this host, alice logs in" \
        bash -c "$(declare -f burst); burst linden-sss"
    check "sssd: the service account is not locked by a stranger's failures" \
        bash -c "URI='$URI' SVC='$SVC' SVC_PW='$SVC_PW'; $(declare -f svc_not_locked); svc_not_locked"
    check "sssd: and lookups through it go on (a user not seen before)" \
        bash -c "sss_cache -E; getent passwd carol"
    pkill -x sssd; rm -f /etc/pam.d/linden-sss
}

run_nslcd() {
    log "nslcd $(dpkg-query -W -f '${Version}' nslcd)"
    pkill -x nslcd 2>/dev/null
    install -m 0640 -g nslcd /dev/stdin /etc/nslcd.conf <<EOF
uid nslcd
gid nslcd
uri $URI
base $SUFFIX
binddn $SVC
bindpw $SVC_PW
ssl start_tls
tls_reqcert demand
tls_cacertfile $TLS/ca.pem
nss_nested_groups yes
EOF
    cat > /etc/pam.d/linden-ldap <<EOF
auth     required pam_ldap.so
account  required pam_ldap.so
EOF
    nsswitch ldap
    nslcd -d > "$WORK/nslcd.log" 2>&1 &
    pids+=($!)
    check "nslcd: getent passwd alice" \
        bash -c "$(declare -f wait_for_user); WAIT_TRIES=$WAIT_TRIES wait_for_user alice && getent passwd alice | cut -d: -f1,3- | grep -qx 'alice:10001:20000:Alice Example:/home/alice:/bin/bash'"
    check "nslcd: rfc2307bis group members (member DNs)" expect "alice bob" members_of devs
    check "nslcd: id alice lists the primary and the rfc2307bis groups" \
        expect "uid=10001(alice) gid=20000(staff) groups=20000(staff),20001(devs)" id alice
    check "nslcd: PAM login with the right password" \
        bash -c "echo alice-pw | pamtester linden-ldap alice authenticate"
    check "nslcd: PAM login with a wrong password fails" \
        bash -c "! (echo nope | pamtester linden-ldap alice authenticate)"
    check "nslcd: after 60 failed logins of others from this host, alice logs in" \
        bash -c "$(declare -f burst); burst linden-ldap"
    check "nslcd: the service account is not locked by a stranger's failures" \
        bash -c "URI='$URI' SVC='$SVC' SVC_PW='$SVC_PW'; $(declare -f svc_not_locked); svc_not_locked"
    # nslcd has no SSH key map: an AuthorizedKeysCommand reads them as the service account.
    check "nslcd host: SSH key of alice for AuthorizedKeysCommand (ldapsearch as the service account)" \
        contains "$SSH_KEY" ldapsearch -LLL -o ldif-wrap=no -x -ZZ -H "$URI" -D "$SVC" -w "$SVC_PW" \
            -b "ou=people,$SUFFIX" "(&(objectClass=ldapPublicKey)(uid=alice))" sshPublicKey
    pkill -x nslcd; rm -f /etc/pam.d/linden-ldap
}

for c in "${clients[@]}"; do "run_$c"; done
if [ "$failures" -gt 0 ]; then
    log "$failures check(s) failed; logs in $WORK"
    exit 1
fi
log "all checks passed"
