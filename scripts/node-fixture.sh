#!/usr/bin/env bash
# A real, minimal Debian system for the node tests (tests/it/node.rs), built once and cached:
#   scripts/node-fixture.sh [DIR]      (default target/node-fixture)
#
# DIR/minbase   `debootstrap --variant=minbase` of the suite this system's apt uses, from the
#               mirror its sources name: what a freshly installed GPU node has. The tests copy
#               it and enter the copy offline (`unshare -n chroot`).
# DIR/archive   a partial mirror of that suite as the archive serves it: its signed InRelease,
#               main/binary-amd64/Packages (the whole suite, byte for byte, also by-hash), and the pool files
#               of the closure apt itself computes for $PACKAGES on the minbase system. The
#               tests serve it on 127.0.0.1 and lock and build from it with the archive's own
#               keyring, so a bundle carries a real closure that a real minbase must accept.
# DIR/ready     written last: the cache is complete (delete DIR to rebuild).
#
# Needs root (debootstrap, chroot) and the network to the suite's mirror; nothing after.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-target/node-fixture}
PACKAGES=${PACKAGES:-jq libfile-which-perl}
suite=$(. /etc/os-release && echo "${VERSION_CODENAME:?no VERSION_CODENAME in /etc/os-release}")
mirror=$(apt-get indextargets --format '$(REPO_URI)' 'Created-By: Packages' 2>/dev/null | grep -v security | head -1)
mirror=${mirror%/}
mirror=${mirror:-http://deb.debian.org/debian}
if [[ -f $dir/ready && $(cat "$dir/ready") == "$suite $mirror $PACKAGES" ]]; then
  exit 0
fi
rm -rf "$dir"
mkdir -p "$dir"
echo "==> debootstrap --variant=minbase $suite from $mirror" >&2
debootstrap --variant=minbase "$suite" "$dir/minbase" "$mirror" > "$dir/debootstrap.log" 2>&1 ||
  { tail -20 "$dir/debootstrap.log" >&2; exit 1; }

echo "==> partial mirror of $suite: InRelease, Packages, the pool of: $PACKAGES" >&2
lists=$dir/minbase/var/lib/apt/lists
prefix=$(basename "$(ls "$lists"/*_dists_"${suite}"_InRelease)")
prefix=${prefix%_InRelease}
mkdir -p "$dir/archive/dists/$suite/main/binary-amd64"
cp "$lists/${prefix}_InRelease" "$dir/archive/dists/$suite/InRelease"
cp "$lists/${prefix}_main_binary-amd64_Packages" "$dir/archive/dists/$suite/main/binary-amd64/Packages"
# The archive says Acquire-By-Hash: its indexes are also served under by-hash/SHA256/.
mkdir -p "$dir/archive/dists/$suite/main/binary-amd64/by-hash/SHA256"
cp "$dir/archive/dists/$suite/main/binary-amd64/Packages" \
  "$dir/archive/dists/$suite/main/binary-amd64/by-hash/SHA256/$(sha256sum "$dir/archive/dists/$suite/main/binary-amd64/Packages" | cut -c1-64)"
# apt on the minbase system says what it would fetch: 'URI' FILE SIZE HASHTYPE:HEX, the URI
# percent-encoded (`%2b` for `+`).
chroot "$dir/minbase" apt-get install -qq --print-uris --no-install-recommends $PACKAGES |
  while read -r uri _file size hash; do
    uri=${uri//\'/}
    rel=${uri#"$mirror"/}
    path=$dir/archive/$(printf '%b' "${rel//%/\\x}")
    mkdir -p "$(dirname "$path")"
    curl -fsS --retry 3 -o "$path" "$uri"
    [[ $(stat -c %s "$path") == "$size" ]] || { echo "size of $uri differs" >&2; exit 1; }
    case ${hash%%:*} in
      MD5Sum) sum=md5sum ;; SHA1) sum=sha1sum ;; SHA256) sum=sha256sum ;; SHA512) sum=sha512sum ;;
      *) echo "unknown hash $hash" >&2; exit 1 ;;
    esac
    [[ $($sum "$path" | cut -d' ' -f1) == "${hash#*:}" ]] || { echo "$hash of $uri differs" >&2; exit 1; }
  done
# The system's pristine state, for the tests to compare with.
chroot "$dir/minbase" dpkg-query -W -f '${Package}\t${Version}\n' > "$dir/minbase.packages"
echo "$suite $mirror $PACKAGES" > "$dir/ready"
echo "==> $dir ready ($(du -sh "$dir" | cut -f1))" >&2
