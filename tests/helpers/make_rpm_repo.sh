#!/usr/bin/env bash
# Build signed rpm-md repositories for tests: make_rpm_repo.sh DIR
# Shaped like RHEL's: every rpm signed (rpmsign, RSA), repodata/repomd.xml signed
# (repomd.xml.asc), sha256 everywhere.
# DIR/repo/el9: a BaseOS/AppStream-like repository, primary in xz (createrepo_c), with
#   libdrm 2.4.115-1.el9 and libdrm-amdgpu 2.4.120-1.el9, nodejs 1:16.20.2-1.el9 and the module
#   stream nodejs:18 (nodejs 1:18.14.2-2.module+el9.2.0+17912+ab2d1d3d, modules.yaml),
#   rocm-helper-tools 1.0-1.el9 (provides the file /usr/bin/rocm-helper).
# DIR/repo/rocm: a vendor repository, primary recompressed to zstd (as Fedora and RHEL 10
#   serve it), with rocm-core in three EVRs (1:6.4.1~rc1-1.el9, 1:6.4.1-1.el9, 1:6.4.2-1.el9),
#   hip-runtime 6.4.1-1.el9 (requires `rocm-core = 1:6.4.1-1.el9`, the rich `(libdrm-amdgpu or
#   libdrm)`, the file `/usr/bin/rocm-helper`, `(hip-gdb-plugin if gdb)`; recommends
#   rocm-docs), hip-runtime 6.4.2-1.el9 (requires rocm-core = 1:6.4.2-1.el9), hip-gdb-plugin and rocm-docs, and updateinfo.xml with the security advisory
#   RHSA-2026:1234 (rocm-core 1:6.4.2-1.el9, Important).
# DIR/repo/sha1: a repository whose metadata has sha1 checksums only.
# DIR/repo/resigned: rocm-core 1:6.4.1-1.el9 with its header signed by another key.
# DIR/repo/other: the rocm repository with repomd.xml signed by another key.
# DIR/rpmdb.sqlite: an rpm database holding bash 5.1.8-9.el9 (provides /bin/sh).
# DIR/keyring.asc (armored) and DIR/keyring.gpg (binary): the repositories' key;
# DIR/other.asc: another key; DIR/site-secret.asc, DIR/site.asc: a site's signing key.
set -euo pipefail
dir=$(realpath "$1")
export GNUPGHOME="$dir/gnupg"
mkdir -p "$GNUPGHOME" && chmod 700 "$GNUPGHOME"
gen() { gpg --batch --quiet --pinentry-mode loopback --passphrase '' --quick-gen-key "$1" "$2" sign never; }
gen "airlock test rpm repo <rpmrepo@airlock.test>" rsa3072
gen "someone else <other@airlock.test>" ed25519
gen "airlock test site <site@airlock.test>" rsa3072
gpg --batch --quiet --armor --export rpmrepo@airlock.test > "$dir/keyring.asc"
gpg --batch --quiet --export rpmrepo@airlock.test > "$dir/keyring.gpg"
gpg --batch --quiet --armor --export other@airlock.test > "$dir/other.asc"
gpg --batch --quiet --pinentry-mode loopback --passphrase '' --armor --export-secret-keys site@airlock.test > "$dir/site-secret.asc"
gpg --batch --quiet --armor --export site@airlock.test > "$dir/site.asc"

top="$dir/rpmbuild"
mkrpm() { # repo name epoch version release arch [spec lines] [files: path=content …]
  local repo=$1 name=$2 epoch=$3 version=$4 release=$5 arch=$6 extra=${7:-}
  shift 7 || shift $#
  local spec="$dir/spec/$name-$version-$release.spec" install="" files=""
  mkdir -p "$dir/spec" "$dir/repo/$repo/Packages/${name:0:1}"
  for f in "$@"; do
    install+="mkdir -p %{buildroot}$(dirname "${f%%=*}"); printf '%s\\n' '${f#*=}' > %{buildroot}${f%%=*}; chmod 755 %{buildroot}${f%%=*}"$'\n'
    files+="${f%%=*}"$'\n'
  done
  [[ -z $files ]] && { install="mkdir -p %{buildroot}/usr/share/doc/$name; echo $name > %{buildroot}/usr/share/doc/$name/README"$'\n'; files="/usr/share/doc/$name/README"$'\n'; }
  {
    echo "Name: $name"
    [[ $epoch != 0 ]] && echo "Epoch: $epoch"
    printf 'Version: %s\nRelease: %s\nSummary: airlock test package %s\nLicense: MIT\nBuildArch: %s\nVendor: airlock tests\n%s\n' "$version" "$release" "$name" "$arch" "$extra"
    printf '%%description\nairlock test package %s.\n%%install\n%s%%files\n%s' "$name" "$install" "$files"
  } > "$spec"
  rpmbuild --quiet --define "_topdir $top" --define "_build_id_links none" --define "_binary_payload w19.zstdio" -bb "$spec" > /dev/null
  local rpm="$top/RPMS/$arch/$name-$version-$release.$arch.rpm"
  rpmsign --quiet --define "__gpg /usr/bin/gpg" --define "_gpg_name rpmrepo@airlock.test" --define "_gpg_path $GNUPGHOME" --addsign "$rpm" > /dev/null 2>&1 < /dev/null
  mv "$rpm" "$dir/repo/$repo/Packages/${name:0:1}/"
}
# el9: distribution packages.
mkrpm el9 bash 0 5.1.8 9.el9 x86_64 "Provides: /bin/sh" "/usr/bin/bash=#!bash"
mkrpm el9 libdrm 0 2.4.115 1.el9 x86_64 "Provides: libdrm.so.2()(64bit)"
mkrpm el9 libdrm-amdgpu 0 2.4.120 1.el9 x86_64 "Provides: libdrm_amdgpu.so.1()(64bit)"
mkrpm el9 rocm-helper-tools 0 1.0 1.el9 x86_64 "" "/usr/bin/rocm-helper=#!/bin/sh"
mkrpm el9 nodejs 1 16.20.2 1.el9 x86_64
mkrpm el9 nodejs 1 18.14.2 2.module+el9.2.0+17912+ab2d1d3d x86_64
# rocm: the vendor's.
mkrpm rocm rocm-core 1 '6.4.1~rc1' 1.el9 x86_64 "Provides: rocm-core-abi = 6" "/opt/rocm/.info/version=6.4.1~rc1"
mkrpm rocm rocm-core 1 6.4.1 1.el9 x86_64 "Provides: rocm-core-abi = 6" "/opt/rocm/.info/version=6.4.1"
mkrpm rocm rocm-core 1 6.4.2 1.el9 x86_64 "Provides: rocm-core-abi = 6" "/opt/rocm/.info/version=6.4.2"
mkrpm rocm hip-runtime 0 6.4.1 1.el9 x86_64 "Requires: rocm-core = 1:6.4.1-1.el9
Requires: (libdrm-amdgpu or libdrm)
Requires: /usr/bin/rocm-helper
Requires: (hip-gdb-plugin if gdb)
Recommends: rocm-docs" "/opt/rocm/lib/libamdhip64.so.6=hip"
mkrpm rocm hip-runtime 0 6.4.2 1.el9 x86_64 "Requires: rocm-core = 1:6.4.2-1.el9
Requires: (libdrm-amdgpu or libdrm)
Requires: /usr/bin/rocm-helper" "/opt/rocm/lib/libamdhip64.so.6=hip 6.4.2"
mkrpm rocm hip-gdb-plugin 0 6.4.1 1.el9 x86_64
mkrpm rocm rocm-docs 0 6.4.1 1.el9 noarch

# target/rpmdb.sqlite: a target's rpm database with bash installed (as `base_rpmdb` reads it).
rpm --root "$dir/target" --dbpath /rpmdb --initdb
rpm --root "$dir/target" --dbpath /rpmdb -i --justdb --nodeps --nosignature "$dir/repo/el9/Packages/b/bash-5.1.8-9.el9.x86_64.rpm"
mv "$dir/target/rpmdb/"rpmdb.sqlite "$dir/rpmdb.sqlite"

sign_repo() { # dir [key]
  rm -f "$1/repodata/repomd.xml.asc"
  gpg --batch --quiet --yes --pinentry-mode loopback --passphrase '' --local-user "${2:-rpmrepo@airlock.test}" \
    --armor --detach-sign --output "$1/repodata/repomd.xml.asc" "$1/repodata/repomd.xml"
}

# el9: xz metadata, no sqlite databases (as RHEL 9 serves it), with modules.yaml.
createrepo_c --quiet --no-database --general-compress-type=xz "$dir/repo/el9" > /dev/null
cat > "$dir/modules.yaml" <<'YAML'
---
document: modulemd
version: 2
data:
  name: nodejs
  stream: "18"
  version: 9020020230101
  context: rhel9
  arch: x86_64
  summary: Javascript runtime
  description: >-
    Node.js
  license:
    module:
    - MIT
  artifacts:
    rpms:
    - nodejs-1:18.14.2-2.module+el9.2.0+17912+ab2d1d3d.x86_64
...
---
document: modulemd-defaults
version: 1
data:
  module: nodejs
  stream: "18"
...
YAML
modifyrepo_c --compress-type=xz --mdtype=modules "$dir/modules.yaml" "$dir/repo/el9/repodata" > /dev/null
sign_repo "$dir/repo/el9"

# rocm: updateinfo, then primary as zstd (createrepo_c 0.17 cannot write it; RHEL 10 does).
createrepo_c --quiet --no-database "$dir/repo/rocm" > /dev/null
cat > "$dir/updateinfo.xml" <<'XML'
<?xml version="1.0" encoding="UTF-8"?>
<updates>
  <update from="security@airlock.test" status="final" type="security" version="2">
    <id>RHSA-2026:1234</id>
    <title>Important: rocm-core security update</title>
    <severity>Important</severity>
    <issued date="2026-11-20 00:00:00"/>
    <description>A flaw in rocm-core &lt;= 6.4.1 was fixed.</description>
    <pkglist>
      <collection short="rocm">
        <name>rocm</name>
        <package name="rocm-core" version="6.4.2" release="1.el9" epoch="1" arch="x86_64" src="rocm-core-6.4.2-1.el9.src.rpm">
          <filename>rocm-core-6.4.2-1.el9.x86_64.rpm</filename>
        </package>
      </collection>
    </pkglist>
  </update>
  <update from="bugs@airlock.test" status="final" type="bugfix" version="2">
    <id>RHBA-2026:0001</id>
    <title>hip-runtime bug fix</title>
    <pkglist><collection><package name="hip-runtime" version="6.4.9" release="1.el9" epoch="0" arch="x86_64"><filename>x.rpm</filename></package></collection></pkglist>
  </update>
</updates>
XML
modifyrepo_c --compress-type=gz --mdtype=updateinfo "$dir/updateinfo.xml" "$dir/repo/rocm/repodata" > /dev/null
python3 - "$dir/repo/rocm/repodata" <<'PY'
import gzip, hashlib, os, re, subprocess, sys
d = sys.argv[1]
md = open(os.path.join(d, "repomd.xml")).read()
old = re.search(r'href="repodata/([^"]*primary\.xml\.gz)"', md).group(1)
plain = gzip.open(os.path.join(d, old)).read()
z = subprocess.run(["zstd", "-q", "-19", "-c"], input=plain, capture_output=True, check=True).stdout
h = hashlib.sha256(z).hexdigest()
new = f"{h}-primary.xml.zst"
open(os.path.join(d, new), "wb").write(z)
os.remove(os.path.join(d, old))
block = re.search(r'<data type="primary">.*?</data>', md, re.S).group(0)
nb = re.sub(r'<checksum type="sha256">[0-9a-f]+</checksum>', f'<checksum type="sha256">{h}</checksum>', block)
nb = nb.replace(old, new)
nb = re.sub(r'<size>\d+</size>', f'<size>{len(z)}</size>', nb)
open(os.path.join(d, "repomd.xml"), "w").write(md.replace(block, nb))
PY
sign_repo "$dir/repo/rocm"

# other: the rocm repository signed by a key the keyring does not hold.
cp -a "$dir/repo/rocm" "$dir/repo/other"
sign_repo "$dir/repo/other" other@airlock.test

# resigned: a repository signed by the right key whose rocm-core rpm carries a header
# signature by another key (repomd.xml and its checksums are all in order).
mkdir -p "$dir/repo/resigned/Packages"
cp "$dir/repo/rocm/Packages/r/rocm-core-6.4.1-1.el9.x86_64.rpm" "$dir/repo/resigned/Packages/"
rpmsign --quiet --define "__gpg /usr/bin/gpg" --define "_gpg_name other@airlock.test" --define "_gpg_path $GNUPGHOME" \
  --resign "$dir/repo/resigned/Packages/rocm-core-6.4.1-1.el9.x86_64.rpm" > /dev/null 2>&1 < /dev/null
createrepo_c --quiet --no-database "$dir/repo/resigned" > /dev/null
sign_repo "$dir/repo/resigned"

# sha1: sha1 checksums only (old yum repositories).
mkdir -p "$dir/repo/sha1/Packages"
cp "$dir/repo/el9/Packages/l/libdrm-2.4.115-1.el9.x86_64.rpm" "$dir/repo/sha1/Packages/"
createrepo_c --quiet --no-database --checksum=sha1 "$dir/repo/sha1" > /dev/null
sign_repo "$dir/repo/sha1"
