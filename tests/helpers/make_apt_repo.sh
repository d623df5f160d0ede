#!/usr/bin/env bash
# Build a signed apt repository for tests: make_apt_repo.sh DIR
# DIR/repo: pool/ with hello-airlock 2.10-3 and 2.11-1 (amd64) and airlock-docs 1.0 (all),
# dists/stable/{Release,InRelease,Release.gpg,main/binary-amd64/Packages{,.gz}};
# DIR/keyring.asc: the public key; DIR/other.asc: an unrelated public key.
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
mkdir -p dists/stable/main/binary-amd64
apt-ftparchive packages pool > dists/stable/main/binary-amd64/Packages
gzip -9nk dists/stable/main/binary-amd64/Packages
apt-ftparchive -o APT::FTPArchive::Release::Suite=stable -o APT::FTPArchive::Release::Codename=stable \
  -o APT::FTPArchive::Release::Components=main -o APT::FTPArchive::Release::Architectures=amd64 \
  release dists/stable > dists/stable/Release.tmp
mv dists/stable/Release.tmp dists/stable/Release
gpg --batch --quiet --pinentry-mode loopback --passphrase '' --local-user repo@airlock.test --clearsign -o dists/stable/InRelease dists/stable/Release
gpg --batch --quiet --pinentry-mode loopback --passphrase '' --local-user repo@airlock.test --armor --detach-sign -o dists/stable/Release.gpg dists/stable/Release
