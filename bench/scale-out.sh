#!/usr/bin/env bash
# Scale-out reads and replication lag (issue 18): a Linden provider and up to two read replicas.
#
#   bench/scale-out.sh [N] [DURATION] [ROUNDS] [RATE]        (defaults 100000 10 3 200)
#
# 1. Aggregate read rate of 1, 2 and 3 servers: `linden bench search` (C=8 in all, D=8) as
#    three `linden bench` processes (3+3+2 connections) at the same time, their ops/s added
#    (one process cannot drive more than ~70,000 searches/s here, so the client is the same
#    whatever k is). When LLOADD names OpenLDAP's load balancer daemon, all three go to one
#    lloadd whose backends are servers 0..k-1 (a new lloadd for each k); without it (Debian
#    12's slapd does not ship lloadd) the client spreads the connections itself, process j on
#    server j mod k. Each k is run ROUNDS times (k = 1, 2, 3, then again), medians reported,
#    with the servers' CPU per search (utime+stime of every server process from /proc over the
#    run) and, through lloadd, lloadd's own CPU per search and the clients' errors (busy
#    answers of lloadd: not fatal, left out of the rate and the CPU per search).
# 2. Replication lag under a modify load: `linden bench modify --rate RATE` on the provider
#    for DURATION seconds while the replicas' /metrics `linden_replication_lag_seconds` (how
#    old each change was when the replica applied it) is read every 0.2 s; median and max of
#    the readings, and the time after the last write until both replicas hold the provider's
#    contextCSN.
#
# Everything runs on this machine, so the servers and the client share its cores: the read
# rate cannot grow with k beyond what the cores give (see BENCHMARKS.md).
# Environment: LINDEN (prebuilt binary; else a release build), LLOADD, LLOADD_IO_THREADS
# (lloadd's io-threads; its default is 1), BASE_PORT (14389), KEEP=1 (keep the work directory).
set -euo pipefail
cd "$(dirname "$0")/.."

N=${1:-100000}
DURATION=${2:-10}
ROUNDS=${3:-3}
RATE=${4:-200}
BASE_PORT=${BASE_PORT:-14389}
SCRIPT=scale-out.sh
# shellcheck source=bench/lib.sh
. bench/lib.sh
linden_binary
work_dir

port() { echo $((BASE_PORT + $1)); }          # LDAP port of server i (0 = provider)
mport() { echo $((BASE_PORT + 100 + $1)); }   # its metrics port

"$LINDEN" gen --count "$N" -o "$WORK/data.ldif" 2>/dev/null
for i in 0 1 2; do
  sid=$((i + 1))
  {
    printf 'data = "%s"\nsuffix = "dc=example,dc=com"\nserver_id = %d\n' "$WORK/s$i" "$sid"
    printf 'metrics_listen = "127.0.0.1:%d"\ndurability = "sync"\n' "$(mport $i)"
    if [ "$i" = 0 ]; then
      printf 'syncprov = true\n'
    else
      printf 'updateref = ["ldap://127.0.0.1:%d"]\n\n[[syncrepl]]\nprovider = "ldap://127.0.0.1:%d"\n' "$(port 0)" "$(port 0)"
      printf 'rid = 1\nsearch_base = "dc=example,dc=com"\nbind_dn = "%s"\nbind_password = "%s"\nretry = "1 +"\n' "$ADMIN" "$SECRET"
    fi
  } >"$WORK/s$i.toml"
done
# The provider holds the data; the replicas start empty and take it in a full refresh.
"$LINDEN" import --config "$WORK/s0.toml" "$WORK/data.ldif" >/dev/null 2>&1
rm -f "$WORK/data.ldif"

for i in 0 1 2; do
  "$LINDEN" serve --config "$WORK/s$i.toml" --listen "127.0.0.1:$(port $i)" \
    --admin-password "$SECRET" >"$WORK/s$i.log" 2>&1 &
  PIDS+=($!)
  SPID[$i]=$!
done
log "waiting for the replicas to be ready (/readyz)"
for i in 1 2; do
  for _ in $(seq 1 3000); do
    curl -sf "http://127.0.0.1:$(mport $i)/readyz" >/dev/null && break
    sleep 0.1
  done
  curl -sf "http://127.0.0.1:$(mport $i)/readyz" >/dev/null || { tail "$WORK/s$i.log" >&2; exit 1; }
done

bench_search() { # url connections json [option...]
  "$LINDEN" bench search --url "$1" --bind-dn "$ADMIN" --password "$SECRET" --connections "$2" \
    --depth 8 --duration "$DURATION" --warmup 2 --range "$N" --quiet --json "$3" "${@:4}" >/dev/null
}

LLOADD_PID=
LLOADD_URL=
start_lloadd() { # k: backends are servers 0..k-1; sets LLOADD_PID and LLOADD_URL
  local conf="$WORK/lloadd-$1.conf" lport=$((BASE_PORT + 50))
  printf 'pidfile %s/lloadd.pid\nargsfile %s/lloadd.args\nloglevel 0\n%s\nbindconf\n    bindmethod=simple\n    binddn=%s\n    credentials=%s\n' \
    "$WORK" "$WORK" "${LLOADD_IO_THREADS:+io-threads $LLOADD_IO_THREADS}" "$ADMIN" "$SECRET" >"$conf"
  for i in $(seq 0 $(($1 - 1))); do
    printf '\nbackend-server\n    uri=ldap://127.0.0.1:%d\n    numconns=4\n    bindconns=2\n    retry=1000\n    max-pending-ops=128\n    conn-max-pending=32\n' "$(port $i)" >>"$conf"
  done
  LLOADD_URL="ldap://127.0.0.1:$lport"
  "$LLOADD" -d 0 -f "$conf" -h "$LLOADD_URL/" >>"$WORK/lloadd.log" 2>&1 &
  LLOADD_PID=$!
  PIDS+=("$LLOADD_PID")
  for _ in $(seq 1 100); do
    ldapwhoami -x -H "$LLOADD_URL" -D "$ADMIN" -w "$SECRET" >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  tail "$WORK/lloadd.log" >&2
  die "lloadd did not answer a bind at $LLOADD_URL"
}

: >"$WORK/reads.tsv"
for round in $(seq 1 "$ROUNDS"); do
  for k in 1 2 3; do
    [ -n "${LLOADD:-}" ] && start_lloadd "$k"
    before=0
    for i in $(seq 0 $((k - 1))); do before=$((before + $(cpu_ticks "${SPID[$i]}"))); done
    lb_before=0
    [ -n "${LLOADD:-}" ] && lb_before=$(cpu_ticks "$LLOADD_PID")
    clients=()
    for j in 0 1 2; do
      conns=3; [ "$j" = 2 ] && conns=2
      if [ -n "${LLOADD:-}" ]; then
        # lloadd answers busy when its connections to the backends are full: counted, not fatal.
        bench_search "$LLOADD_URL" "$conns" "$WORK/r$round-k$k-$j.json" --allow-errors &
      else
        bench_search "ldap://127.0.0.1:$(port $((j % k)))" "$conns" "$WORK/r$round-k$k-$j.json" &
      fi
      clients+=($!)
    done
    for c in "${clients[@]}"; do wait "$c"; done
    after=0
    for i in $(seq 0 $((k - 1))); do after=$((after + $(cpu_ticks "${SPID[$i]}"))); done
    lb=0
    if [ -n "${LLOADD:-}" ]; then
      lb=$(($(cpu_ticks "$LLOADD_PID") - lb_before))
      kill "$LLOADD_PID"; wait "$LLOADD_PID" 2>/dev/null || true
    fi
    printf '%s\t%s\t%s\t%s\n' "$k" "$((after - before))" "$lb" "$WORK/r$round-k$k-" >>"$WORK/reads.tsv"
    log "round $round, $k server(s) done"
  done
done

log "replication lag: modify at $RATE/s on the provider for $DURATION s"
: >"$WORK/lag.tsv"
"$LINDEN" bench modify --url "ldap://127.0.0.1:$(port 0)" --bind-dn "$ADMIN" --password "$SECRET" \
  --connections 4 --rate "$RATE" --duration "$DURATION" --warmup 0 --range "$N" --quiet \
  --json "$WORK/modify.json" >/dev/null &
MOD=$!
while kill -0 "$MOD" 2>/dev/null; do
  for i in 1 2; do
    curl -s "http://127.0.0.1:$(mport $i)/metrics" |
      awk -v i="$i" '/^linden_replication_lag_seconds\{/ { print i "\t" $2 }' >>"$WORK/lag.tsv"
  done
  sleep 0.2
done
wait "$MOD"
end=$(date +%s.%N)
ctx() { ldapsearch -LLL -x -H "ldap://127.0.0.1:$(port "$1")" -D "$ADMIN" -w "$SECRET" \
  -b dc=example,dc=com -s base contextCSN | awk '/^contextCSN:/ {print $2}' | sort | tr '\n' ' '; }
want=$(ctx 0)
caught=""
for _ in $(seq 1 600); do
  if [ "$(ctx 1)" = "$want" ] && [ "$(ctx 2)" = "$want" ]; then caught=$(date +%s.%N); break; fi
  sleep 0.05
done

python3 - "$WORK/reads.tsv" "$CLK_TCK" "$WORK/lag.tsv" "$WORK/modify.json" "$end" "${caught:-}" "${LLOADD:+lloadd}" <<'EOF'
import glob, json, statistics, sys
reads, clk, lag, modify, end, caught, via = sys.argv[1:8]
clk = int(clk)
by_k = {}
for line in open(reads):
    k, ticks, lb_ticks, prefix = line.split("\t")
    ops = rate = errors = 0.0
    for f in glob.glob(prefix.strip() + "*.json"):
        s = json.load(open(f))
        t = s["total"]
        ok = t["ops"] - t["errors"]
        ops += ok
        rate += t["ops_per_sec"] * ok / t["ops"] if t["ops"] else 0.0
        errors += t["errors"]
    per = lambda t: int(t) / clk * 1e6 / ops if ops else float("nan")
    by_k.setdefault(int(k), []).append((rate, per(ticks), per(lb_ticks), errors))
med = lambda runs, i: statistics.median(r[i] for r in runs)
if via:
    print("reads through lloadd (three linden bench processes, 3+3+2 connections, against lloadd)")
    print("| servers | search ops/s (median) | runs | servers' CPU µs/search | lloadd CPU µs/search | errors |")
    print("|---|---|---|---|---|---|")
else:
    print("reads spread by the client (no lloadd)")
    print("| servers | search ops/s (median) | runs | servers' CPU µs/search |")
    print("|---|---|---|---|")
for k in sorted(by_k):
    runs = by_k[k]
    row = (f"| {k} | {med(runs, 0):,.0f} | {' · '.join(f'{r[0]:,.0f}' for r in runs)} | "
           f"{med(runs, 1):.1f} |")
    if via:
        row += f" {med(runs, 2):.1f} | {sum(r[3] for r in runs):.0f} |"
    print(row)
vals = [float(l.split("\t")[1]) for l in open(lag) if l.strip()]
m = json.load(open(modify))
print(f"\nmodify load: {m['total']['ops_per_sec']:.0f}/s for {m['duration_secs']:.1f} s, "
      f"p99 {m['total']['latency_us']['p99']} us, errors {m['total']['errors']}")
if vals:
    print(f"replica lag readings (linden_replication_lag_seconds, {len(vals)} over both replicas): "
          f"median {statistics.median(vals)*1000:.0f} ms, p90 {sorted(vals)[int(len(vals)*0.9)]*1000:.0f} ms, "
          f"max {max(vals)*1000:.0f} ms")
if caught:
    print(f"both replicas at the provider's contextCSN {float(caught) - float(end):.2f} s after the last write")
else:
    print("the replicas did not reach the provider's contextCSN within 30 s")
EOF
