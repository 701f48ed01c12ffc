#!/usr/bin/env bash
# How long a point-in-time restore takes (issue 30): N entries plus the changes of a durable
# modify run, restored from a file:// archive.
#
#   bench/restore-time.sh [N] [DURATION]   (defaults 1000000 20)
#
# Imports N `linden gen` entries, serves them with `archive = "file://WORK/archive"` and
# `archive_interval = 5`, waits until the import's snapshot is archived, runs the modify workload
# (C=8 × D=32, durable) for DURATION seconds (each modify one logged change), waits until the
# archive holds every batch (`linden_archive_lag_batches` 0), kills the server (-9: no shutdown
# snapshot, so the latest point is the import's snapshot plus every change), then times
# `linden restore` of the latest point into a new directory (the newest snapshot, then every log
# batch after it, then the `verify` check) and `linden restore --to-batch` of the batch halfway
# through the changes. It prints the changes logged, the archive's size, and each restore's own
# timing line and its peak resident memory (/usr/bin/time).
# Environment: LINDEN (prebuilt binary; else a release build), BASE_PORT (15589), KEEP=1.
set -euo pipefail
cd "$(dirname "$0")/.."

N=${1:-1000000}
DURATION=${2:-20}
BASE_PORT=${BASE_PORT:-15589}
SCRIPT=restore-time.sh
# shellcheck source=bench/lib.sh
. bench/lib.sh
linden_binary
work_dir
command -v /usr/bin/time >/dev/null || die "needs /usr/bin/time (apt-get install time)"

"$LINDEN" gen --count "$N" -o "$WORK/data.ldif" 2>/dev/null
mkdir -p "$WORK/archive"
printf 'data = "%s"\narchive = "file://%s"\narchive_interval = 5\nsnapshot_interval = 0\nsnapshot_log_bytes = 0\nmetrics_listen = "127.0.0.1:%d"\n' \
  "$WORK/data" "$WORK/archive" $((BASE_PORT + 100)) >"$WORK/linden.toml"
"$LINDEN" import --config "$WORK/linden.toml" "$WORK/data.ldif" >/dev/null 2>&1
rm -f "$WORK/data.ldif"
"$LINDEN" serve --config "$WORK/linden.toml" --listen "127.0.0.1:$BASE_PORT" \
  --admin-password "$SECRET" >"$WORK/serve.log" 2>&1 &
SERVER=$!
PIDS+=("$SERVER")
wait_ldap "ldap://127.0.0.1:$BASE_PORT" 1200
metric() { curl -s "http://127.0.0.1:$((BASE_PORT + 100))/metrics" | awk -v m="linden_$1" '$1 == m { print $2 + 0 }'; }
for _ in $(seq 1 1200); do f=$(metric archive_files_total); [ -n "$f" ] && [ "$f" != 0 ] && break; sleep 0.1; done
log "snapshot archived; modifying for $DURATION s"
"$LINDEN" bench modify --url "ldap://127.0.0.1:$BASE_PORT" --bind-dn "$ADMIN" --password "$SECRET" \
  --connections 8 --depth 32 --duration "$DURATION" --warmup 0 --range "$N" --quiet \
  --json "$WORK/modify.json" >/dev/null
CHANGES=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["total"]["ops"])' "$WORK/modify.json")
for _ in $(seq 1 600); do [ "$(metric archive_lag_batches)" = 0 ] && break; sleep 0.1; done
[ "$(metric archive_lag_batches)" = 0 ] || die "the archive did not catch up: $(metric archive_lag_batches) batches behind"
LAST=$(metric archive_last_batch)
kill -9 "$SERVER"; wait "$SERVER" 2>/dev/null || true   # no shutdown snapshot: the restore replays every change
log "$CHANGES modifies in $LAST batches; archive $(du -sh "$WORK/archive" | cut -f1)"
"$LINDEN" archive list --archive "file://$WORK/archive"
for point in latest half; do
  args=()
  [ "$point" = half ] && args=(--to-batch "$((LAST / 2))")
  /usr/bin/time -f "$point: peak resident %M KiB, %e s wall, %U s user, %S s system" \
    "$LINDEN" restore --archive "file://$WORK/archive" --data "$WORK/restored-$point" "${args[@]}"
done
