#!/usr/bin/env bash
# Build a signed apt repository for tests: make_apt_repo.sh DIR
# DIR/repo: pool/ with hello-airlock 2.10-3 and 2.11-1 (amd64) and airlock-docs 1.0 (all),
# suite stable-security (pool/security) with hello-airlock 2.11-1+deb12u1, a security update,
# dists/{stable,stale}/{Release,InRelease,Release.gpg,main/binary-amd64/{Packages.gz,Packages.xz,by-hash/}}
# shaped like a real archive (see below); suite `closure` (component `closure`, pool/closure)
# holds packages with real relations for dependency-closure tests (see the end);
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

mkdeb() { # name version arch [extra control lines] [pool component]
  local root="$dir/build/$1-$2" pool="$dir/repo/pool/${5:-main}/${1:0:1}/$1"
  mkdir -p "$root/DEBIAN" "$root/usr/share/doc/$1" "$pool"
  printf 'Package: %s\nVersion: %s\nArchitecture: %s\nMaintainer: airlock tests <t@airlock.test>\n%sDescription: test package %s\n' "$1" "$2" "$3" "${4:-}" "$1" > "$root/DEBIAN/control"
  echo "$1 $2" > "$root/usr/share/doc/$1/README"
  dpkg-deb --root-owner-group -Zgzip --build "$root" "$pool/${1}_${2}_${3}.deb" > /dev/null
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
make_suite() { # suite valid-until [component] [pool directory, default the component's]
  local c=${3:-main}
  mkdir -p "dists/$1/$c/binary-amd64"
  apt-ftparchive packages "pool/${4:-$c}" > "dists/$1/$c/binary-amd64/Packages"
  gzip -9nk "dists/$1/$c/binary-amd64/Packages"
  xz -9k "dists/$1/$c/binary-amd64/Packages"
  # Named like Debian's: Origin Debian, suite `stable` is codename bookworm.
  local codename=$1; [[ $1 == stable ]] && codename=bookworm
  apt-ftparchive -o APT::FTPArchive::Release::Origin=Debian -o APT::FTPArchive::Release::Label=Debian \
    -o APT::FTPArchive::Release::Suite="$1" -o APT::FTPArchive::Release::Codename="$codename" \
    -o APT::FTPArchive::Release::Components="$c" -o APT::FTPArchive::Release::Architectures=amd64 \
    release "dists/$1" > "dists/$1/Release.tmp"
  { sed -n '1,/^Date:/p' "dists/$1/Release.tmp"
    echo "Valid-Until: $2"
    echo "Acquire-By-Hash: yes"
    sed '1,/^Date:/d' "dists/$1/Release.tmp"; } > "dists/$1/Release"
  rm "dists/$1/Release.tmp"
  for f in "dists/$1/$c/binary-amd64/"Packages*; do
    mkdir -p "dists/$1/$c/binary-amd64/by-hash/SHA256"
    cp "$f" "dists/$1/$c/binary-amd64/by-hash/SHA256/$(sha256sum "$f" | cut -c1-64)"
  done
  rm "dists/$1/$c/binary-amd64/Packages"   # listed in Release, not served
  signers=(--local-user repo@airlock.test --local-user unknown@airlock.test)
  gpg --batch --quiet --pinentry-mode loopback --passphrase '' "${signers[@]}" --clearsign -o "dists/$1/InRelease" "dists/$1/Release"
  gpg --batch --quiet --pinentry-mode loopback --passphrase '' "${signers[@]}" --armor --detach-sign -o "dists/$1/Release.gpg" "dists/$1/Release"
}
make_suite stable "$(date -u -d '+30 days' '+%a, %d %b %Y %H:%M:%S UTC')"
make_suite stale "$(date -u -d '-30 days' '+%a, %d %b %Y %H:%M:%S UTC')"
# The security suite beside stable, in the same archive (as Ubuntu's noble-security is).
mkdeb hello-airlock 2.11-1+deb12u1 amd64 "" security
make_suite stable-security "$(date -u -d '+30 days' '+%a, %d %b %Y %H:%M:%S UTC')" main security

# The closure suite: versioned dependencies, alternatives, a virtual package provided with and
# without a version, `:any` through Multi-Arch: allowed, a Priority: required base package,
# an unsatisfiable chain and a conflict.
closure() { mkdeb "$1" "$2" "$3" "${4:-}" closure; }
closure rocm-app-airlock 1.0 amd64 $'Pre-Depends: rt-python-airlock:any\nDepends: libhip-airlock (>= 6.4), mta-missing | mail-airlock, java-airlock (>= 2), base-airlock (>= 1.0)\n'
closure libhip-airlock 6.2 amd64 $'Multi-Arch: same\n'
closure libhip-airlock 6.4.1 amd64 $'Multi-Arch: same\nDepends: base-airlock\n'
closure mail-airlock 1.0 all $'Provides: mail-transport-airlock\n'
closure jre-airlock 9 amd64 $'Provides: java-airlock (= 2.5)\n'
closure oldjre-airlock 8 amd64 $'Provides: java-airlock\n'
closure rt-python-airlock 3.11 amd64 $'Multi-Arch: allowed\n'
closure base-airlock 1.0 all $'Priority: required\n'
closure needs-future-airlock 1.0 all $'Depends: rocm-app-airlock, hip-runtime-airlock (>= 1)\n'
closure hip-runtime-airlock 1.0 all $'Depends: libhip-airlock (>= 9)\n'
closure clash-airlock 1.0 all $'Conflicts: mail-airlock\n'
closure wants-clash-airlock 1.0 all $'Depends: rocm-app-airlock, clash-airlock\n'
closure uses-docs-airlock 1.0 all $'Depends: airlock-docs (>= 1.0)\n'   # airlock-docs is in suite stable
make_suite closure "$(date -u -d '+30 days' '+%a, %d %b %Y %H:%M:%S UTC')" closure
