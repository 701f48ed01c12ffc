#!/usr/bin/env bash
# The pacer experiments of docs/bench-log/2026-11-27.md "Pacing the open-loop client": sets up both servers as
# bench/sweep.sh does (bench/servers.sh), then sources CMDFILE (c1.sh ... c8.sh here), whose output
# is the matching .txt file (c5b.txt: a second run of c5.sh; c6.txt printed CPU per op only; the
# client half of c4's run-queue line measured the wrong process and reads 0). From the checkout's root:
#   LINDEN=target/release/linden docs/bench-log/pacer-runs/exp.sh 100000 docs/bench-log/pacer-runs/c5.sh
set -euo pipefail
N=${1:-100000}
CMDS=$(realpath "$2")
SCRIPT=exp.sh
cd "$(dirname "$0")/../../.."
. bench/servers.sh
export WORK
B() { # B URL ARGS...: one linden bench search run
  local url=$1; shift
  "$LINDEN" bench search --url "$url" --bind-dn "$ADMIN" --password "$SECRET" --range "$N" --quiet "$@"
}
# probe_half: MAX, Linden's closed-loop maximum at 8 x 64, and HALF, half of it.
probe_half() {
  echo "loadavg before: $(cat /proc/loadavg)"
  B "$LINDEN_URL" --connections 8 --depth 64 --duration 3 --warmup 1 --json "$WORK/probe.json" >/dev/null
  MAX=$(python3 -c 'import json, sys; print(round(json.load(open(sys.argv[1]))["total"]["ops_per_sec"]))' "$WORK/probe.json")
  HALF=$((MAX / 2))
  echo "linden closed-loop max $MAX/s, half $HALF/s"
}
# cpu_per_op TICKS: server CPU (TICKS of it during the run) and client CPU per operation of the
# run whose --json is $WORK/r.json (warm-up included).
cpu_per_op() {
  python3 - "$1" "$CLK_TCK" "$WORK/r.json" <<'PY'
import json, sys
ticks, hz, path = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
s = json.load(open(path))
ops = s["total"]["ops_per_sec"] * (s["duration_secs"] + s["warmup_secs"])
c = s["client_cpu_secs"]
print(f"server CPU {ticks/hz:.2f} s = {ticks/hz/ops*1e6:.1f} us/op; client CPU {c:.2f} s = {c/ops*1e6:.1f} us/op; pacer {s['pacer_cpu_secs']}")
PY
}
. "$CMDS"
