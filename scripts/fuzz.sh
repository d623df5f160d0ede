#!/usr/bin/env bash
# Mutation campaigns against the bundle reader, the manifest parser and the spec parser, on
# stable Rust (tests/it/fuzz.rs): DURATION seconds per target with fresh random seeds, under a
# 4 GiB address-space limit, so that unbounded memory fails like a panic does. An input that
# fails is kept in target/fuzz-crashes/TARGET-SEED.bin (and its seed printed: rerun it with
# AIRLOCK_FUZZ_SEED) and becomes a regression test.
#   scripts/fuzz.sh 600        ten minutes per target
set -euo pipefail
duration=${1:?usage: scripts/fuzz.sh DURATION_SECONDS}
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
cargo test --locked --test it --no-run
ulimit -v $((4 << 20))
failed=()
for target in fuzz_bundle_reader fuzz_manifest_parser fuzz_spec_parser; do
  echo "==> $target for ${duration} s"
  # Every target runs, even after one fails; the script fails at the end.
  if ! AIRLOCK_FUZZ_SECS=$duration cargo test --locked --test it -- --ignored --exact "fuzz::$target" --nocapture \
      --test-threads=1 > "target/$target.log" 2>&1; then
    failed+=("$target")
  fi
  grep -E 'fuzz (reader|manifest|spec):|^test result|seed [0-9]+:|panicked' "target/$target.log" || cat "target/$target.log"
done
if ((${#failed[@]})); then
  echo "failed: ${failed[*]} (inputs in target/fuzz-crashes/)"
  exit 1
fi
