#!/usr/bin/env bash
# Idempotent installer for the LDAP conformance-suite dependencies on Debian 12 (run as root).
#   - ldap-utils, slapd (Debian packages, noninteractive)
#   - python-ldap for the python3 first on PATH (Debian python3-ldap if importable,
#     otherwise `pip install python-ldap`, building against libldap-dev/libsasl2-dev)
#   - pytest for that python3
#   - chromium, chromium-driver and selenium (the web console's browser test)
#   - S3Proxy (Maven Central, via mvn; java) for the s3:// archive tests
set -euo pipefail

export DEBIAN_FRONTEND=noninteractive
PY="${PYTHON:-python3}"
LOCK_TIMEOUT="${APT_LOCK_TIMEOUT:-600}"

die() { echo "install-test-deps: ERROR: $*" >&2; exit 1; }
log() { echo "install-test-deps: $*"; }

[ "$(id -u)" -eq 0 ] || die "must run as root (apt-get install needs it)"
command -v apt-get >/dev/null || die "apt-get not found (Debian 12 expected)"
command -v "$PY" >/dev/null || die "$PY not found on PATH"

APT_OPTS=(-y -q -o "DPkg::Lock::Timeout=${LOCK_TIMEOUT}" -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold)

# Wait for a concurrently running apt/dpkg (e.g. a background install) to release its locks.
wait_for_dpkg() {
    local waited=0
    while fuser /var/lib/dpkg/lock-frontend /var/lib/dpkg/lock /var/lib/apt/lists/lock >/dev/null 2>&1; do
        if [ "$waited" -ge "$LOCK_TIMEOUT" ]; then
            die "dpkg/apt lock still held after ${LOCK_TIMEOUT}s"
        fi
        [ "$waited" -eq 0 ] && log "waiting for another apt/dpkg process to finish..."
        sleep 3; waited=$((waited + 3))
    done
}

is_installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }

UPDATED=0
apt_install() {
    local missing=()
    for p in "$@"; do is_installed "$p" || missing+=("$p"); done
    [ "${#missing[@]}" -eq 0 ] && return 0
    wait_for_dpkg
    if [ "$UPDATED" -eq 0 ]; then
        log "apt-get update"
        apt-get "${APT_OPTS[@]}" update >/tmp/install-test-deps.apt.log 2>&1 \
            || { tail -20 /tmp/install-test-deps.apt.log >&2; die "apt-get update failed"; }
        UPDATED=1
    fi
    wait_for_dpkg
    log "apt-get install ${missing[*]}"
    apt-get "${APT_OPTS[@]}" install --no-install-recommends "${missing[@]}" >/tmp/install-test-deps.apt.log 2>&1 \
        || { tail -20 /tmp/install-test-deps.apt.log >&2; die "apt-get install ${missing[*]} failed"; }
}

# psmisc provides fuser; install it first if absent (without lock waiting, apt's own timeout applies).
if ! command -v fuser >/dev/null; then
    fuser() { return 1; }   # cannot check; rely on DPkg::Lock::Timeout
    apt_install psmisc
    unset -f fuser
fi

# libsasl2-modules: the PLAIN mechanism for `ldapwhoami -Y PLAIN` in the TLS tests.
# curl: the monitoring test reads /metrics with it.
# iproute2: `ss` shows the listeners' accept queues (listen_backlog) in the linden tests.
# faketime: libfaketime, which the CSN clock tests preload to start a server with its clock set back.
apt_install ldap-utils slapd libsasl2-modules curl iproute2 faketime

# python-ldap for the python3 that will run the tests.
if "$PY" -c 'import ldap' >/dev/null 2>&1; then
    :
else
    # Debian's python3-ldap only helps if $PY is Debian's /usr/bin/python3.
    if [ "$(command -v "$PY")" = "/usr/bin/python3" ]; then
        apt_install python3-ldap
    fi
    if ! "$PY" -c 'import ldap' >/dev/null 2>&1; then
        apt_install gcc libldap-dev libsasl2-dev python3-dev
        if ! "$PY" -m pip --version >/dev/null 2>&1; then
            [ "$(command -v "$PY")" = "/usr/bin/python3" ] || die "$PY has no pip; install pip for it"
            apt_install python3-pip
        fi
        log "pip install python-ldap for $(command -v "$PY")"
        pip_flags=(-q --disable-pip-version-check)
        [ "$(command -v "$PY")" = "/usr/bin/python3" ] && pip_flags+=(--break-system-packages)
        # pyenv (and other non-Debian) pythons ship their own headers; Debian's needs python3-dev (above).
        "$PY" -m pip install "${pip_flags[@]}" python-ldap >/tmp/install-test-deps.pip.log 2>&1 \
            || { tail -30 /tmp/install-test-deps.pip.log >&2; die "pip install python-ldap failed"; }
    fi
    "$PY" -c 'import ldap' >/dev/null 2>&1 || die "python-ldap still not importable by $PY"
fi

if ! "$PY" -m pytest --version >/dev/null 2>&1; then
    if [ "$(command -v "$PY")" = "/usr/bin/python3" ]; then
        apt_install python3-pytest
    else
        "$PY" -m pip install -q --disable-pip-version-check pytest >/tmp/install-test-deps.pip.log 2>&1 \
            || { tail -30 /tmp/install-test-deps.pip.log >&2; die "pip install pytest failed"; }
    fi
    "$PY" -m pytest --version >/dev/null 2>&1 || die "pytest still not runnable by $PY"
fi

# The web console's browser test (tests/console/browser_test.py): Debian's headless Chromium and
# its WebDriver, driven by selenium.
apt_install chromium chromium-driver
if ! "$PY" -c 'import selenium' >/dev/null 2>&1; then
    if ! "$PY" -m pip --version >/dev/null 2>&1; then
        [ "$(command -v "$PY")" = "/usr/bin/python3" ] || die "$PY has no pip; install pip for it"
        apt_install python3-pip
    fi
    log "pip install selenium for $(command -v "$PY")"
    pip_flags=(-q --disable-pip-version-check)
    [ "$(command -v "$PY")" = "/usr/bin/python3" ] && pip_flags+=(--break-system-packages)
    "$PY" -m pip install "${pip_flags[@]}" selenium >/tmp/install-test-deps.pip.log 2>&1 \
        || { tail -30 /tmp/install-test-deps.pip.log >&2; die "pip install selenium failed"; }
    "$PY" -c 'import selenium' >/dev/null 2>&1 || die "selenium still not importable by $PY"
fi

# S3Proxy (an S3-compatible server backed by a directory) for the s3:// archive tests
# (crates/linden/tests/archive.rs, LINDEN_TEST_S3=1): its jar-with-dependencies from Maven
# Central, fetched once by Maven (cached in ~/.m2) and kept under $DEPS_DIR.
S3PROXY_VERSION="${S3PROXY_VERSION:-2.6.0}"
DEPS_DIR="${LINDEN_TEST_DEPS_DIR:-/var/cache/linden-test-deps}"
S3PROXY_JAR="$DEPS_DIR/s3proxy-jar-with-dependencies.jar"
if [ ! -s "$S3PROXY_JAR" ] || [ "$(cat "$DEPS_DIR/s3proxy.version" 2>/dev/null)" != "$S3PROXY_VERSION" ]; then
    command -v java >/dev/null || apt_install default-jre-headless
    command -v mvn >/dev/null || apt_install maven
    mkdir -p "$DEPS_DIR"
    log "fetching S3Proxy $S3PROXY_VERSION with Maven"
    mvn -q -B dependency:get -Dtransitive=false \
        -Dartifact="org.gaul:s3proxy:${S3PROXY_VERSION}:jar:jar-with-dependencies" >/tmp/install-test-deps.mvn.log 2>&1 \
        || { tail -30 /tmp/install-test-deps.mvn.log >&2; die "fetching S3Proxy $S3PROXY_VERSION failed"; }
    m2="${MAVEN_REPO:-$HOME/.m2/repository}/org/gaul/s3proxy/$S3PROXY_VERSION/s3proxy-$S3PROXY_VERSION-jar-with-dependencies.jar"
    [ -s "$m2" ] || die "S3Proxy jar not found at $m2 after mvn dependency:get"
    cp "$m2" "$S3PROXY_JAR.tmp" && mv "$S3PROXY_JAR.tmp" "$S3PROXY_JAR"
    echo "$S3PROXY_VERSION" > "$DEPS_DIR/s3proxy.version"
fi
command -v java >/dev/null || apt_install default-jre-headless

command -v slapd >/dev/null || [ -x /usr/sbin/slapd ] || die "slapd binary not found after install"
command -v slapadd >/dev/null || [ -x /usr/sbin/slapadd ] || die "slapadd not found after install"
log "ok (python: $(command -v "$PY"), python-ldap $("$PY" -c 'import ldap; print(ldap.__version__)'))"
