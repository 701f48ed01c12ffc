#!/usr/bin/env bash
# The pacer experiments of BENCHMARKS.md "Pacing the open-loop client": sets up both servers as
# bench/sweep.sh does (bench/servers.sh), then sources CMDFILE (c1.sh ... c7.sh here), whose output
# is the matching .txt file. From the checkout's root:
#   LINDEN=target/release/linden bench/sweep-results/pacer-runs/exp.sh 100000 bench/sweep-results/pacer-runs/c5.sh
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
. "$CMDS"
