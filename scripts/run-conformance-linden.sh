#!/usr/bin/env bash
# Starts Linden on a free loopback port with a temporary data directory and runs the python-ldap
# conformance suite (tests/conformance) against it. Exit status is pytest's.
set -euo pipefail
cd "$(dirname "$0")/.."

cargo build --quiet -p linden
bin="${CARGO_TARGET_DIR:-target}/debug/linden"
tmp="$(mktemp -d)"
log="$tmp/linden.log"
# The same access rules as the slapd the suite was checked against (scripts/slapd-reference.sh):
# everyone reads everything but userPassword, which serves binds and its owner's changes.
cat >"$tmp/linden.toml" <<'TOML'
size_limit_anonymous = 500
size_limit = 500
# The replication provider, as the reference slapd's syncprov overlay (test_syncrepl.py).
syncprov = true
# groupOfURLs and memberURL, for [[dynlist]] below (as the reference slapd's dyngroup.schema).
schemas = ["dyngroup"]

# As the reference slapd's ppolicy overlay (scripts/slapd-reference.sh; test_ppolicy.py): the
# default policy entry exists only while a test creates it.
ppolicy = true
ppolicy_default = "cn=default,ou=ppolicy,dc=example,dc=com"
ppolicy_use_lockout = true

# As the reference slapd's memberof (groupOfNames and groupOfUniqueNames, memberof-refint) and
# refint overlays (scripts/slapd-reference.sh; test_memberof.py).
memberof = true
refint = ["member", "uniqueMember", "owner", "manager", "seeAlso", "memberOf"]

# The reference slapd indexes objectClass, uid, cn, sn and mail for equality; these add
# substring and ordering indexes, so that test_search.py's substring and >=/<= filters are
# answered through them and still match slapd's answers.
[indexes]
objectClass = ["eq", "pres"]
uid = ["eq", "pres"]
cn = ["eq", "pres", "sub"]
sn = ["eq", "pres", "subinitial"]
mail = ["eq", "pres", "subany", "subfinal"]
telephoneNumber = ["eq", "sub"]
uidNumber = ["eq", "ord"]

# As the reference slapd's dynlist overlay (scripts/slapd-reference.sh; test_dynlist.py):
# groupOfURLs members from memberURL, with memberOf; dynamic lists on labeledURIObject
# (groupOfURLs is in the dyngroup bundle: `schemas`, at the top).

[[dynlist]]
object_class = "groupOfURLs"
url_attribute = "memberURL"
member_attribute = "member"
member_of_attribute = "memberOf"

[[dynlist]]
object_class = "labeledURIObject"
url_attribute = "labeledURI"

# As the reference slapd's unique overlay (scripts/slapd-reference.sh; test_unique.py).
[[unique]]
attributes = ["uid", "mail"]
base = "ou=unique,dc=example,dc=com"

[[access]]
attrs = ["userPassword"]
by = [
  { who = "self", rights = ["write", "auth"] },
  { who = "anonymous", rights = ["auth"] },
]

# As the reference slapd: entries described "hidden-entry" exist for nobody but the
# administrator; any user may act (proxied authorization) for an entry described
# "proxy-target", which slapd says with authzFrom (test_controls_more.py).
[[access]]
filter = "(description=hidden-entry)"
by = [{ who = "*", rights = ["none"] }]

[[access]]
filter = "(description=proxy-target)"
attrs = ["entry"]
by = [
  { who = "users", rights = ["read", "search", "compare", "proxy"] },
  { who = "*", rights = ["read", "search", "compare"] },
]

[[access]]
by = [{ who = "*", rights = ["read", "search", "compare"] }]
TOML
"$bin" serve --config "$tmp/linden.toml" --listen 127.0.0.1:0 --data "$tmp/data" --admin-password secret >"$log" 2>&1 &
pid=$!
cleanup() { kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; rm -rf "$tmp"; }
trap cleanup EXIT

port=""
for _ in $(seq 1 100); do
  port="$(grep -oE 'listening on [0-9.]+:[0-9]+' "$log" | head -n1 | sed -E 's/.*:([0-9]+)$/\1/' || true)"
  [ -n "$port" ] && break
  if ! kill -0 "$pid" 2>/dev/null; then echo "linden exited early:"; cat "$log"; exit 1; fi
  sleep 0.1
done
if [ -z "$port" ]; then echo "linden did not report its port:"; cat "$log"; exit 1; fi

export LDAP_URL="ldap://127.0.0.1:$port"
export LDAP_ADMIN_DN="cn=admin,dc=example,dc=com"
export LDAP_ADMIN_PASSWORD="secret"
python3 -m pytest -q tests/conformance "$@"
