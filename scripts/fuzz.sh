#!/usr/bin/env bash
# Runs every cargo-fuzz target for SECONDS each (default 60) and keeps new corpus entries in
# fuzz/corpus/<target>/ (minimized with `cargo fuzz cmin` when a run added any).
# Needs a nightly toolchain and cargo-fuzz; installs cargo-fuzz if missing.
#   scripts/fuzz.sh [SECONDS] [TARGET...]
# The stable replay of the corpus runs with every `cargo test` (crates/fuzzing/tests/corpus.rs).
set -euo pipefail
cd "$(dirname "$0")/../fuzz"

SECONDS_EACH="${1:-60}"
shift || true
TARGETS=("$@")
[ "${#TARGETS[@]}" -gt 0 ] || TARGETS=(decode_message parse_filter parse_dn ldif_reader log_recovery control_values)

rustup toolchain list | grep -q '^nightly' || rustup toolchain install nightly --profile minimal
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked

status=0
for t in "${TARGETS[@]}"; do
  mkdir -p "corpus/$t"
  before=$(ls "corpus/$t" | wc -l)
  echo "fuzz: $t for ${SECONDS_EACH}s (corpus: $before inputs)"
  if ! cargo +nightly fuzz run "$t" "corpus/$t" -- -max_total_time="$SECONDS_EACH" -max_len=65536 \
      -print_final_stats=1 2>"artifacts-$t.log"; then
    echo "fuzz: $t FAILED (a crash: input in fuzz/artifacts/$t/; or a build error); log: fuzz/artifacts-$t.log" >&2
    tail -n 40 "artifacts-$t.log" >&2
    status=1
    continue
  fi
  grep -E 'stat::number_of_executed_units|stat::peak_rss_mb' "artifacts-$t.log" | sed "s/^/fuzz: $t /" || true
  rm -f "artifacts-$t.log"
  after=$(ls "corpus/$t" | wc -l)
  if [ "$after" -gt "$before" ]; then
    cargo +nightly fuzz cmin "$t" "corpus/$t" >/dev/null 2>&1 || true
  fi
  echo "fuzz: $t corpus $before -> $(ls "corpus/$t" | wc -l) inputs"
done
exit $status
