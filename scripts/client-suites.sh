#!/usr/bin/env bash
# Runs three LDAP client libraries' own test suites against OpenLDAP slapd 2.5 and against Linden,
# side by side, and compares them test by test (docs/client-suites.md has the results):
#
#   scripts/client-suites.sh [ldap3] [go-ldap] [net-ldap]     (default: all three)
#
#   ldap3     python ldap3 2.9.1, the test/ folder of its PyPI sdist, with a test/config.py of ours
#             (scripts/client-suites/ldap3_config.py); the rfc2307bis schema on both servers
#   go-ldap   github.com/go-ldap/ldap/v3 v3.4.15 from the Go module proxy, its *_test.go with the
#             server address and admin password they hard-code pointed at ours, and the entries
#             they name (scripts/client-suites/go-ldap.ldif)
#   net-ldap  perl-ldap 0.68, the Debian source package libnet-ldap-perl 1:0.6800+dfsg-1, whose
#             harness (t/common.pl) starts its own server per test file from data/slapd.conf.in:
#             /usr/sbin/slapd, or for Linden scripts/client-suites/netldap-linden
#
# Needs root on Debian 12 (apt-get, pip), the Go toolchain, network access to PyPI, the Go module
# proxy and Debian's archive. Downloads are kept in CLIENT_SUITES_DIR (default
# /tmp/linden-client-suites); results go to CLIENT_SUITES_DIR/results: SUITE.SERVER.tsv (one line
# per test: name, pass|fail|skip, message), comparison.tsv and summary.md. LINDEN names the
# linden binary (default: target/debug/linden, built here). Exits 0 when the runs completed,
# whatever the tests said; the comparison is the output.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
HERE="$ROOT/scripts/client-suites"
WORK="${CLIENT_SUITES_DIR:-/tmp/linden-client-suites}"
RESULTS="$WORK/results"
PY="${PYTHON:-python3}"
SCHEMADIR=/etc/ldap/schema
SUITE_TIMEOUT="${SUITE_TIMEOUT:-900}"   # seconds per suite and server

LDAP3_VERSION=2.9.1
PYASN1_VERSION=0.4.8                      # ldap3 2.9.1 predates pyasn1 0.6
GOLDAP_VERSION=v3.4.15
NETLDAP_DEB_VERSION=1:0.6800+dfsg-1
NETLDAP_DIR=perl-ldap-0.68

log() { echo "client-suites: $*" >&2; }
die() { log "ERROR: $*"; exit 2; }

suites=("$@")
[ ${#suites[@]} -gt 0 ] || suites=(ldap3 go-ldap net-ldap)
for s in "${suites[@]}"; do
    case "$s" in ldap3|go-ldap|net-ldap) ;; *) die "unknown suite '$s' (ldap3, go-ldap, net-ldap)" ;; esac
done

mkdir -p "$WORK/src" "$RESULTS"

if [ -z "${LINDEN:-}" ]; then
    (cd "$ROOT" && cargo build --quiet -p linden)
    LINDEN="${CARGO_TARGET_DIR:-$ROOT/target}/debug/linden"
fi
export LINDEN
[ -x "$LINDEN" ] || die "no linden binary at $LINDEN"

# One self-signed certificate for 127.0.0.1, used by both servers for StartTLS and LDAPS; the
# suites' TLS tests do not check it.
TLS_CERT="$WORK/tls/cert.pem" TLS_KEY="$WORK/tls/key.pem"
if [ ! -f "$TLS_CERT" ]; then
    mkdir -p "$WORK/tls"
    openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj /CN=127.0.0.1 \
        -addext subjectAltName=IP:127.0.0.1,DNS:localhost -keyout "$TLS_KEY" -out "$TLS_CERT" 2>/dev/null
fi

free_port() {
    "$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

# ---- the two servers for ldap3 and go-ldap ------------------------------------------------------

# Each start sets PORT (plain LDAP, StartTLS) and LDAPS_PORT.
SLAPD_DIR="" LINDEN_PID="" LINDEN_TMP="" PORT="" LDAPS_PORT=""

start_slapd() { # SCHEMA_FILES...
    PORT="$(free_port)"; LDAPS_PORT="$(free_port)"
    SLAPD_DIR="$(mktemp -d /tmp/linden-suites-slapd.XXXXXX)"
    SLAPD_SCHEMAS="$*" SLAPD_TLS_CERT="$TLS_CERT" SLAPD_TLS_KEY="$TLS_KEY" SLAPD_LDAPS_PORT="$LDAPS_PORT" \
        "$ROOT/scripts/slapd-reference.sh" start "$SLAPD_DIR" "$PORT" >&2
}

stop_slapd() {
    [ -n "$SLAPD_DIR" ] || return 0
    "$ROOT/scripts/slapd-reference.sh" stop "$SLAPD_DIR" >/dev/null 2>&1 || true
    rm -rf "$SLAPD_DIR"; SLAPD_DIR=""
}

start_linden() { # TOML-EXTRA (prepended to the access rules of scripts/slapd-reference.sh)
    LINDEN_TMP="$(mktemp -d /tmp/linden-suites-linden.XXXXXX)"
    LDAPS_PORT="$(free_port)"
    cat >"$LINDEN_TMP/linden.toml" <<TOML
size_limit = 500
tls_cert = "$TLS_CERT"
tls_key = "$TLS_KEY"
ldaps_listen = "127.0.0.1:$LDAPS_PORT"
$1

# As scripts/slapd-reference.sh: userPassword serves binds and its owner's changes; the rest
# is readable by everyone.
[[access]]
attrs = ["userPassword"]
by = [
  { who = "self", rights = ["write", "auth"] },
  { who = "anonymous", rights = ["auth"] },
]

[[access]]
by = [{ who = "*", rights = ["read", "search", "compare"] }]
TOML
    "$LINDEN" serve --config "$LINDEN_TMP/linden.toml" --listen 127.0.0.1:0 --data "$LINDEN_TMP/data" \
        --admin-password secret >"$LINDEN_TMP/linden.log" 2>&1 &
    LINDEN_PID=$!
    PORT=""
    for _ in $(seq 1 100); do
        PORT="$(grep -oE 'listening on [0-9.]+:[0-9]+' "$LINDEN_TMP/linden.log" | head -n1 | sed -E 's/.*:([0-9]+)$/\1/' || true)"
        [ -n "$PORT" ] && break
        kill -0 "$LINDEN_PID" 2>/dev/null || { cat "$LINDEN_TMP/linden.log" >&2; die "linden exited early"; }
        sleep 0.1
    done
    [ -n "$PORT" ] || { cat "$LINDEN_TMP/linden.log" >&2; die "linden did not report its port"; }
}

stop_linden() {
    [ -n "$LINDEN_PID" ] || return 0
    kill "$LINDEN_PID" 2>/dev/null || true
    wait "$LINDEN_PID" 2>/dev/null || true
    LINDEN_PID=""
    rm -rf "$LINDEN_TMP"
}

cleanup() { stop_slapd; stop_linden; }
trap cleanup EXIT
trap 'exit 130' INT TERM

admin_add() { # PORT LDIF-FILE
    ldapadd -x -c -H "ldap://127.0.0.1:$1" -D "cn=admin,dc=example,dc=com" -w secret -f "$2" >/dev/null
}

# ---- ldap3 -------------------------------------------------------------------------------------

run_ldap3() {
    local src="$WORK/src/ldap3-$LDAP3_VERSION" venv="$WORK/venv-ldap3"
    if [ ! -d "$src/test" ]; then
        log "ldap3: downloading the $LDAP3_VERSION sdist"
        "$PY" -m pip download -q --disable-pip-version-check --no-deps --no-binary :all: \
            -d "$WORK/src" "ldap3==$LDAP3_VERSION"
        tar -xzf "$WORK/src/ldap3-$LDAP3_VERSION.tar.gz" -C "$WORK/src"
    fi
    if [ ! -x "$venv/bin/python" ]; then
        "$PY" -m venv "$venv"
        "$venv/bin/pip" install -q --disable-pip-version-check "pyasn1==$PYASN1_VERSION" pytest==9.2.0 pytest-timeout==2.4.0
    fi
    cp "$HERE/ldap3_config.py" "$src/test/config.py"
    touch "$src/test/__init__.py"   # `test.config` must not resolve to the standard library's test
    # test_add_binary adds this certificate file, which the sdist lacks: any DER certificate does.
    openssl x509 -in "$TLS_CERT" -outform der -out "$src/test/512b-rsa-example-cert.der"

    local fixtures="$WORK/ldap3-fixtures.ldif"
    printf 'dn: ou=ldap3-fixtures,dc=example,dc=com\nobjectClass: organizationalUnit\nou: ldap3-fixtures\n\ndn: ou=ldap3-moved,dc=example,dc=com\nobjectClass: organizationalUnit\nou: ldap3-moved\n' >"$fixtures"

    local server
    for server in slapd linden; do
        if [ "$server" = slapd ]; then
            start_slapd "$SCHEMADIR/core.schema" "$SCHEMADIR/cosine.schema" "$SCHEMADIR/inetorgperson.schema" \
                "$ROOT/crates/schema/src/bundles/rfc2307bis.schema"
        else
            start_linden 'schemas = ["rfc2307bis"]'
        fi
        admin_add "$PORT" "$fixtures"
        log "ldap3: running its suite against $server (port $PORT)"
        (cd "$src" && LDAP3_PORT="$PORT" LDAP3_PORT_SSL="$LDAPS_PORT" PYTHONPATH="$src" PYTHONDONTWRITEBYTECODE=1 \
            timeout "$SUITE_TIMEOUT" "$venv/bin/python" -m pytest -v -p no:cacheprovider -o 'python_files=test*.py' \
            --timeout=60 --junitxml="$RESULTS/ldap3.$server.xml" test >"$RESULTS/ldap3.$server.log" 2>&1) || true
        tail -n1 "$RESULTS/ldap3.$server.log" >&2
        "$PY" "$HERE/results.py" pytest "$RESULTS/ldap3.$server.xml" "$RESULTS/ldap3.$server.tsv"
        if [ "$server" = slapd ]; then stop_slapd; else stop_linden; fi
    done
}

# ---- go-ldap -----------------------------------------------------------------------------------

run_goldap() {
    local src="$WORK/src/go-ldap-$GOLDAP_VERSION"
    export GOPATH="$WORK/gopath" GOFLAGS=-mod=mod
    if [ ! -d "$src" ]; then
        log "go-ldap: downloading github.com/go-ldap/ldap/v3@$GOLDAP_VERSION"
        local dir
        dir="$(go mod download -json "github.com/go-ldap/ldap/v3@$GOLDAP_VERSION" | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')"
        cp -r "$dir" "$src"
        chmod -R u+w "$src"
    fi
    local server
    for server in slapd linden; do
        if [ "$server" = slapd ]; then start_slapd; else start_linden ""; fi
        admin_add "$PORT" "$HERE/go-ldap.ldif"
        # The tests hard-code ldap://127.0.0.1:3389, ldaps://127.0.0.1:3636 and the administrator
        # password admin123.
        local run="$WORK/go-ldap-run"
        rm -rf "$run"; cp -r "$src" "$run"
        sed -i -e "s#ldap://127.0.0.1:3389#ldap://127.0.0.1:$PORT#" \
            -e "s#ldaps://127.0.0.1:3636#ldaps://127.0.0.1:$LDAPS_PORT#" -e 's#"admin123"#"secret"#' "$run"/*_test.go
        log "go-ldap: running its suite against $server (port $PORT)"
        (cd "$run" && timeout "$SUITE_TIMEOUT" go test -count=1 -json . >"$RESULTS/go-ldap.$server.json" 2>"$RESULTS/go-ldap.$server.log") || true
        "$PY" "$HERE/results.py" gotest "$RESULTS/go-ldap.$server.json" "$RESULTS/go-ldap.$server.tsv"
        if [ "$server" = slapd ]; then stop_slapd; else stop_linden; fi
    done
}

# ---- Net::LDAP ---------------------------------------------------------------------------------

run_netldap() {
    local src="$WORK/src/$NETLDAP_DIR"
    if [ ! -d "$src/t" ]; then
        log "net-ldap: downloading the Debian source package libnet-ldap-perl $NETLDAP_DEB_VERSION"
        # A private apt state that knows Debian's source index, so the system's lists stay as they are.
        local apt="$WORK/apt"
        mkdir -p "$apt/lists/partial" "$apt/cache/archives/partial"
        echo "deb-src http://deb.debian.org/debian bookworm main" >"$apt/sources.list"
        local opts=(-o "Dir::Etc::SourceList=$apt/sources.list" -o Dir::Etc::SourceParts=/nonexistent
                    -o "Dir::State::Lists=$apt/lists" -o "Dir::Cache=$apt/cache")
        apt-get "${opts[@]}" -q update >/dev/null
        # The Debian packaging tarball may be gone from the archive; the upstream one is what counts.
        (cd "$WORK/src" && apt-get "${opts[@]}" -q source --download-only "libnet-ldap-perl=$NETLDAP_DEB_VERSION" >/dev/null 2>&1) || true
        local orig="$WORK/src/libnet-ldap-perl_${NETLDAP_DEB_VERSION#1:}"
        orig="${orig%-1}.orig.tar.xz"
        [ -f "$orig" ] || die "net-ldap: $orig was not downloaded"
        tar -xJf "$orig" -C "$WORK/src"
    fi
    # Its dependency, and IO::Socket::SSL for the LDAPS and StartTLS tests; the tests load
    # Net::LDAP from the source's lib/.
    if ! perl -MConvert::ASN1 -MIO::Socket::SSL -e1 2>/dev/null; then
        apt-get install -y -q --no-install-recommends libconvert-asn1-perl libio-socket-ssl-perl >/dev/null
    fi

    local server exe
    for server in slapd linden; do
        if [ "$server" = slapd ]; then exe="$(command -v slapd || echo /usr/sbin/slapd)"; else exe="$HERE/netldap-linden"; fi
        # The harness listens on 127.0.0.1:9009 and 9010 (LDAPS), fixed in t/common.pl, and on
        # ldapi://./temp/ldapi_sock.
        local p
        for p in 9009 9010; do
            if (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then die "net-ldap: port $p is in use"; fi
        done
        cat >"$src/test.cfg" <<CFG
\$SERVER_EXE = '$exe';
\$SERVER_TYPE = 'openldap+ssl+ipc';
\$HOST = '127.0.0.1';
\$SLAPD_SCHEMA_DIR = '$SCHEMADIR';
\$SLAPD_DB = 'mdb';
\$SLAPD_MODULE_DIR = '/usr/lib/ldap';
\$EXTERNAL_TESTS = 0;
1;
CFG
        local tap="$RESULTS/net-ldap.$server.tap"
        rm -rf "$tap" "$src/temp"; mkdir -p "$tap"
        log "net-ldap: running its suite against $server"
        local t
        for t in "$src"/t/*.t; do
            local name; name="$(basename "$t" .t)"
            rm -f "$src"/temp/*-out.ldif
            (cd "$src" && timeout 120 perl -I. -Ilib "t/$name.t" >"$tap/$name.tap" 2>&1) || true
            # The LDIF the file compared with data/*-cmp.ldif, for the userPassword note below.
            for f in "$src"/temp/*-out.ldif; do
                [ -e "$f" ] && cp "$f" "$tap/$name.$(basename "$f")"
            done
        done
        NETLDAP_DATA="$src/data" "$PY" "$HERE/results.py" tap "$tap" "$RESULTS/net-ldap.$server.tsv"
    done
}

for s in "${suites[@]}"; do
    case "$s" in
        ldap3) run_ldap3 ;;
        go-ldap) run_goldap ;;
        net-ldap) run_netldap ;;
    esac
done

"$PY" "$HERE/results.py" compare "$RESULTS" "$RESULTS/summary.md"
cat "$RESULTS/summary.md"
