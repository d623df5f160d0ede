#!/usr/bin/env bash
# A flat-pool apt suite's indexes, signed: sign_suite.sh REPO SUITE ORIGIN KEY_UID
# REPO/pool holds the .debs; writes REPO/dists/SUITE/main/binary-amd64/Packages(.gz), Release
# and InRelease (clearsigned with KEY_UID from $GNUPGHOME), as the node stack and the apply
# bench serve them.
set -euo pipefail
repo=$1 suite=$2 origin=$3 uid=$4
cd "$repo"
mkdir -p "dists/$suite/main/binary-amd64"
apt-ftparchive packages pool > "dists/$suite/main/binary-amd64/Packages"
gzip -9nk "dists/$suite/main/binary-amd64/Packages"
apt-ftparchive -o "APT::FTPArchive::Release::Origin=$origin" -o "APT::FTPArchive::Release::Suite=$suite" \
  -o "APT::FTPArchive::Release::Codename=$suite" -o APT::FTPArchive::Release::Components=main \
  -o APT::FTPArchive::Release::Architectures=amd64 release "dists/$suite" > "dists/$suite/Release"
gpg --batch --quiet --pinentry-mode loopback --passphrase '' --local-user "$uid" --clearsign \
  -o "dists/$suite/InRelease" "dists/$suite/Release"
