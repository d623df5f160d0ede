#!/usr/bin/env bash
# Time and peak memory of lock, build, verify and install for a bundle of SIZE_MB of
# incompressible content, at two sizes by default, to check that memory does not grow with
# the bundle. Speed and memory targets are checked here, never in timed unit tests.
#   scripts/bench.sh              256 MiB and 2048 MiB
#   SIZES="512 4096" scripts/bench.sh
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
[[ -x /usr/bin/time ]] || { sudo=""; [[ $(id -u) -eq 0 ]] || sudo=sudo; $sudo apt-get install -y -qq time >/dev/null; }
airlock=$("$repo/scripts/airlock-bin.sh" --release)
work=$(mktemp -d "${TMPDIR:-/tmp}/airlock-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT
"$airlock" keygen --out-dir "$work/keys" --name bench >/dev/null 2>&1
export SOURCE_DATE_EPOCH=1764432000

measure() { # label, command… -> "label  seconds  MiB/s  peak RSS MiB"
  local label=$1 mb=$2; shift 2
  /usr/bin/time -f "%e %M" -o "$work/time" "$@" >/dev/null
  read -r secs kib < "$work/time"
  awk -v l="$label" -v s="$secs" -v k="$kib" -v mb="$mb" 'BEGIN { printf "  %-8s %8.2f s %9.1f MiB/s %8.1f MiB peak RSS\n", l, s, (s > 0 ? mb / s : 0), k / 1024 }'
}

printf 'airlock bench on %s cores, %s\n' "$(nproc)" "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
for mb in ${SIZES:-256 2048}; do
  dir="$work/p$mb"; mkdir -p "$dir/data"
  # Four files: incompressible content is the worst case for throughput and the usual case
  # for image layers and wheels.
  for i in 1 2 3 4; do head -c $((mb * 1024 * 1024 / 4)) /dev/urandom > "$dir/data/blob$i.bin"; done
  { printf '[bundle]\nname = "bench"\nversion = "1.0.0"\n'
    for i in 1 2 3 4; do printf '\n[[file]]\nname = "blob%s.bin"\nsource = "data/blob%s.bin"\n' "$i" "$i"; done; } > "$dir/airlock.toml"
  echo "$mb MiB of content:"
  measure lock "$mb" "$airlock" lock "$dir/airlock.toml"
  measure build "$mb" "$airlock" build "$dir/airlock.toml" --locked --key "$work/keys/bench.key" --out "$dir/b.airlock"
  printf '  %-8s %s bytes\n' size "$(stat -c %s "$dir/b.airlock")"
  measure verify "$mb" "$airlock" verify "$dir/b.airlock" --trust "$work/keys/bench.pub"
  measure install "$mb" "$airlock" install "$dir/b.airlock" --trust "$work/keys/bench.pub" --root "$dir/site"
  rm -rf "$dir"
done
