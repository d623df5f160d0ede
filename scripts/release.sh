#!/usr/bin/env bash
# A portable release of airlock: scripts/release.sh [DIST]      (default dist/)
#
# The binary is linked against glibc 2.28 (cargo-zigbuild's x86_64-unknown-linux-gnu.2.28
# target), so it runs on RHEL 8 (2.28), SLES 15 and Ubuntu 20.04 (2.31) and everything newer.
# DIST gets:
#   airlock-VERSION-x86_64-unknown-linux-gnu.tar.gz (+ .sha256): the binary, man pages,
#       completions for bash, zsh and fish, README.md, LICENSE, and the documentation as HTML
#       (doc/html/index.html: scripts/docs-html.py; the isolated side reads it without a web)
#   airlock_VERSION-1_amd64.deb and airlock-VERSION-1.x86_64.rpm: the same, in the places
#       Debian's and RHEL's package managers use (/usr/bin, /usr/share/man/man1, completions,
#       /usr/share/doc/airlock/html)
# Deterministic for one commit and SOURCE_DATE_EPOCH (default: the commit's time).
# aarch64 is not built here: this machine's toolchain has no standard library for it.
# Needs: cargo-zigbuild and ziglang (pip), dpkg-deb, rpmbuild, python3-markdown. scripts/check-release.sh checks.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
dist=$(realpath -m "${1:-dist}")
target=x86_64-unknown-linux-gnu
version=$(cargo metadata --no-deps --format-version 1 | jq -r '.packages[] | select(.name == "airlock") | .version')
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || echo 0)}
target_dir=${CARGO_TARGET_DIR:-$repo/target}

echo "==> cargo zigbuild --release --target $target.2.28" >&2
cargo zigbuild --release --locked --target "$target.2.28" >&2
bin=$target_dir/$target/release/airlock

rm -rf "$dist"
stage=$dist/airlock-$version-$target
mkdir -p "$stage/man" "$stage/completions"
install -m 0755 "$bin" "$stage/airlock"
"$stage/airlock" man "$stage/man" > /dev/null
"$stage/airlock" completions bash > "$stage/completions/airlock.bash"
"$stage/airlock" completions zsh > "$stage/completions/_airlock"
"$stage/airlock" completions fish > "$stage/completions/airlock.fish"
cp README.md LICENSE "$stage/"
/usr/bin/python3 scripts/docs-html.py "$stage/doc/html" >&2
find "$stage" -exec touch -h -d "@$SOURCE_DATE_EPOCH" {} +

tarball=airlock-$version-$target.tar.gz
tar --sort=name --mtime="@$SOURCE_DATE_EPOCH" --owner=0 --group=0 --numeric-owner -C "$dist" \
  -cf - "airlock-$version-$target" | gzip -9n > "$dist/$tarball"
(cd "$dist" && sha256sum "$tarball" > "$tarball.sha256")

# The file tree both packages install.
tree() { # ROOT
  install -D -m 0755 "$stage/airlock" "$1/usr/bin/airlock"
  mkdir -p "$1/usr/share/man/man1"
  for page in "$stage"/man/*.1; do gzip -9n < "$page" > "$1/usr/share/man/man1/$(basename "$page").gz"; done
  install -D -m 0644 "$stage/completions/airlock.bash" "$1/usr/share/bash-completion/completions/airlock"
  install -D -m 0644 "$stage/completions/_airlock" "$1/usr/share/zsh/vendor-completions/_airlock"
  install -D -m 0644 "$stage/completions/airlock.fish" "$1/usr/share/fish/vendor_completions.d/airlock.fish"
  mkdir -p "$1/usr/share/doc/airlock"
  cp -r "$stage/doc/html" "$1/usr/share/doc/airlock/html"
}

echo "==> .deb" >&2
deb=$dist/deb
tree "$deb"
mkdir -p "$deb/DEBIAN" "$deb/usr/share/doc/airlock"
{ echo "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/"
  echo "Upstream-Name: airlock"
  echo
  echo "Files: *"
  echo "Copyright: airlock maintainers"
  echo "License: Apache-2.0"
  echo " On Debian systems, the full text of the Apache License 2.0 is in"
  echo " /usr/share/common-licenses/Apache-2.0."; } > "$deb/usr/share/doc/airlock/copyright"
# lintian finds libyaml by one of its error texts. airlock embeds no libyaml: yaml-rust2, the
# pure-Rust parser that reads rpm repositories' modules.yaml, reports the same message.
mkdir -p "$deb/usr/share/lintian/overrides"
echo "airlock: embedded-library libyaml [usr/bin/airlock]" > "$deb/usr/share/lintian/overrides/airlock"
printf 'airlock (%s-1) unstable; urgency=medium\n\n  * Release %s.\n\n -- airlock maintainers <airlock@example.org>  %s\n' \
  "$version" "$version" "$(date -u -R -d "@$SOURCE_DATE_EPOCH")" | gzip -9n > "$deb/usr/share/doc/airlock/changelog.Debian.gz"
size=$(du -sk --exclude=DEBIAN "$deb" | cut -f1)
cat > "$deb/DEBIAN/control" <<EOF
Package: airlock
Version: $version-1
Architecture: amd64
Maintainer: airlock maintainers <airlock@example.org>
Installed-Size: $size
Depends: libc6 (>= 2.28)
Section: admin
Priority: optional
Homepage: https://example.org/airlock
Description: carry a GPU software stack across an air gap
 airlock resolves container images, Python wheels, Debian packages, models and
 firmware to digests, packs them into one signed bundle with an SBOM and
 provenance, verifies it offline on the site, and applies, validates and rolls
 back the stack on GPU nodes.
EOF
find "$deb" -exec touch -h -d "@$SOURCE_DATE_EPOCH" {} +
dpkg-deb --root-owner-group -Zxz --build "$deb" "$dist/airlock_${version}-1_amd64.deb" >&2
rm -rf "$deb"

echo "==> .rpm" >&2
rpm=$dist/rpm
tree "$rpm/root"
mkdir -p "$rpm/root/usr/share/licenses/airlock"
cp LICENSE "$rpm/root/usr/share/licenses/airlock/LICENSE"
cat > "$rpm/airlock.spec" <<EOF
Name: airlock
Version: $version
Release: 1
Requires: glibc >= 2.28
Summary: Carry a GPU software stack across an air gap
License: Apache-2.0
BuildArch: x86_64
%description
airlock resolves container images, Python wheels, packages, models and firmware to digests,
packs them into one signed bundle, verifies it offline, and applies, validates and rolls back
the stack on GPU nodes.
%install
cp -a $rpm/root/. %{buildroot}/
%files
%license /usr/share/licenses/airlock/LICENSE
/usr/bin/airlock
/usr/share/man/man1/*.1.gz
/usr/share/bash-completion/completions/airlock
/usr/share/zsh/vendor-completions/_airlock
/usr/share/fish/vendor_completions.d/airlock.fish
/usr/share/doc/airlock/html
EOF
rpmbuild -bb --quiet --define "_topdir $rpm/top" --define "_build_id_links none" \
  --define "use_source_date_epoch_as_buildtime 1" --define "__os_install_post %{nil}" \
  --define "debug_package %{nil}" "$rpm/airlock.spec" >&2
cp "$rpm"/top/RPMS/x86_64/airlock-"$version"-1.x86_64.rpm "$dist/"
rm -rf "$rpm" "$stage"
ls -l "$dist" >&2
