#!/usr/bin/env bash
# Build airlock and print the path of the binary cargo wrote, wherever that is
# (CARGO_TARGET_DIR, a .cargo/config.toml, the default target/): cargo says, we do not guess.
# Cargo's own progress goes to stderr, so a first build shows that it is running.
#   scripts/airlock-bin.sh             debug build
#   scripts/airlock-bin.sh --release   release build
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
messages=$(cd "$repo" && cargo build --locked --bin airlock --message-format=json-render-diagnostics "$@")
exe=$(printf '%s\n' "$messages" | grep '"reason":"compiler-artifact"' | grep -o '"executable":"[^"]*"' | tail -n 1 | cut -d'"' -f4)
if [[ -z "$exe" || ! -x "$exe" ]]; then
  echo "cargo build did not report an airlock executable" >&2
  exit 1
fi
printf '%s\n' "$exe"
