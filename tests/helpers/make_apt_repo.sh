#!/usr/bin/env bash
# Build a signed apt repository for tests: make_apt_repo.sh DIR
# DIR/repo: pool/ with hello-airlock 2.10-3 and 2.11-1 (amd64) and airlock-docs 1.0 (all),
# dists/{stable,stale}/{Release,InRelease,Release.gpg,main/binary-amd64/{Packages.gz,Packages.xz,by-hash/}}
# shaped like a real archive (see below);
# DIR/keyring.asc and DIR/keyring.gpg: the public key, armored and binary; DIR/other.asc: an
# unrelated public key.
set -euo pipefail
dir=$1
export GNUPGHOME="$dir/gnupg"
mkdir -p "$GNUPGHOME" && chmod 700 "$GNUPGHOME"
gen() { gpg --batch --quiet --pinentry-mode loopback --passphrase '' --quick-gen-key "$1" ed25519 sign never; }
gen "airlock test repo <repo@airlock.test>"
gen "someone else <other@airlock.test>"
gpg --batch --quiet --armor --export repo@airlock.test > "$dir/keyring.asc"
gpg --batch --quiet --armor --export other@airlock.test > "$dir/other.asc"
# A site key for signing the site's apt view (secret and public halves).
gen "airlock test site <site@airlock.test>"
gpg --batch --quiet --pinentry-mode loopback --passphrase '' --armor --export-secret-keys site@airlock.test > "$dir/site-secret.asc"
gpg --batch --quiet --armor --export site@airlock.test > "$dir/site.asc"

mkdeb() { # name version arch
  local root="$dir/build/$1-$2"
  mkdir -p "$root/DEBIAN" "$root/usr/share/doc/$1"
  printf 'Package: %s\nVersion: %s\nArchitecture: %s\nMaintainer: airlock tests <t@airlock.test>\nDescription: test package %s\n' "$1" "$2" "$3" "$1" > "$root/DEBIAN/control"
  echo "$1 $2" > "$root/usr/share/doc/$1/README"
  mkdir -p "$dir/repo/pool/main/${1:0:1}/$1"
  dpkg-deb --root-owner-group -Zgzip --build "$root" "$dir/repo/pool/main/${1:0:1}/$1/${1}_${2}_${3}.deb" > /dev/null
}
mkdeb hello-airlock 2.10-3 amd64
mkdeb hello-airlock 2.11-1 amd64
mkdeb airlock-docs 1.0 all

cd "$dir/repo"
# Shaped like a real archive (deb.debian.org): the Release lists the plain Packages' hashes
# but only the compressed forms are served, every index is also under by-hash/SHA256/, the
# Release says Acquire-By-Hash and Valid-Until, and it is signed by two keys, one of which the
# repository's keyring does not hold. Suite `stale` is the same with a Valid-Until long past.
gen "a key the keyring lacks <unknown@airlock.test>"
gpg --batch --quiet --export repo@airlock.test > "$dir/keyring.gpg"   # binary, as distributions ship
make_suite() { # suite valid-until
  mkdir -p "dists/$1/main/binary-amd64"
  apt-ftparchive packages pool > "dists/$1/main/binary-amd64/Packages"
  gzip -9nk "dists/$1/main/binary-amd64/Packages"
  xz -9k "dists/$1/main/binary-amd64/Packages"
  apt-ftparchive -o APT::FTPArchive::Release::Suite="$1" -o APT::FTPArchive::Release::Codename="$1" \
    -o APT::FTPArchive::Release::Components=main -o APT::FTPArchive::Release::Architectures=amd64 \
    release "dists/$1" > "dists/$1/Release.tmp"
  { sed -n '1,/^Date:/p' "dists/$1/Release.tmp"
    echo "Valid-Until: $2"
    echo "Acquire-By-Hash: yes"
    sed '1,/^Date:/d' "dists/$1/Release.tmp"; } > "dists/$1/Release"
  rm "dists/$1/Release.tmp"
  for f in "dists/$1/main/binary-amd64/"Packages*; do
    mkdir -p "dists/$1/main/binary-amd64/by-hash/SHA256"
    cp "$f" "dists/$1/main/binary-amd64/by-hash/SHA256/$(sha256sum "$f" | cut -c1-64)"
  done
  rm "dists/$1/main/binary-amd64/Packages"   # listed in Release, not served
  signers=(--local-user repo@airlock.test --local-user unknown@airlock.test)
  gpg --batch --quiet --pinentry-mode loopback --passphrase '' "${signers[@]}" --clearsign -o "dists/$1/InRelease" "dists/$1/Release"
  gpg --batch --quiet --pinentry-mode loopback --passphrase '' "${signers[@]}" --armor --detach-sign -o "dists/$1/Release.gpg" "dists/$1/Release"
}
make_suite stable "$(date -u -d '+30 days' '+%a, %d %b %Y %H:%M:%S UTC')"
make_suite stale "$(date -u -d '-30 days' '+%a, %d %b %Y %H:%M:%S UTC')"
