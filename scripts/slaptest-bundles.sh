#!/usr/bin/env bash
# Checks that every schema bundle, as `linden schema show NAME` prints it, loads into slapd
# (slaptest from Debian's slapd 2.5) on top of the schema files slapd users have: core, cosine,
# inetorgperson and (except for nis itself and rfc2307bis, which replaces it) nis.
#
# slapd refuses operational attribute types in schema files (its ppolicy overlay defines
# them), so those are left out of the ppolicy bundle for this check.
#
# Usage: scripts/slaptest-bundles.sh [path/to/linden]   (default target/debug/linden)
set -euo pipefail
linden=${1:-target/debug/linden}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
status=0
for name in $("$linden" schema list | awk '{print $1}'); do
    "$linden" schema show "$name" > "$work/$name.schema"
    if [ "$name" = ppolicy ]; then
        awk 'BEGIN { RS = ""; ORS = "\n\n" } !/USAGE/' "$work/$name.schema" > "$work/x" &&
            mv "$work/x" "$work/$name.schema"
    fi
    {
        for f in core cosine inetorgperson; do echo "include /etc/ldap/schema/$f.schema"; done
        case $name in nis | rfc2307bis) ;; *) echo "include /etc/ldap/schema/nis.schema" ;; esac
        echo "include $work/$name.schema"
    } > "$work/$name.conf"
    if out=$(slaptest -u -f "$work/$name.conf" 2>&1); then
        echo "$name: ok"
    else
        echo "$name: FAILED: $out"
        status=1
    fi
done
exit $status
