#!/usr/bin/env bash
# The packages of a GPU stack for the node tests: make_node_repo.sh DIR RECORDED_HOST_DIR
# DIR/repo: a signed suite `node` (component main) holding
#   airlock-rocm-core 10.0.0-1, 10.0.1-1 and 10.0.2-1: /opt/rocm/.info/version (what the probe
#     reads as the ROCm version) and /opt/rocm/bin/rvs, which prints a recorded RVS GST run;
#     10.0.2-1's run reports FAIL (a stack the gate must find red);
#   airlock-amdgpu-dkms 1.0-1: its postinst asks for a reboot as Debian's packages do
#     (/var/run/reboot-required and .pkgs);
#   airlock-broken 1.0-1: its postinst fails (dpkg leaves it half-configured);
#   rocm-core 10.0.0.100000-42~24.04: named and versioned as AMD's, without
#     /opt/rocm/.info/version (the stack's version is the package's);
#   libamdhip64-5 5.2.3-3: named and versioned as Debian's own HIP runtime (a distribution's
#     ROCm, which ships no version file and no rocm-core).
# DIR/keyring.gpg: the suite's public key.
set -euo pipefail
dir=$1 recorded=$2
export GNUPGHOME="$dir/gnupg"
mkdir -p "$GNUPGHOME" && chmod 700 "$GNUPGHOME"
gpg --batch --quiet --pinentry-mode loopback --passphrase '' --quick-gen-key "node stack <node@airlock.test>" ed25519 sign never
gpg --batch --quiet --export node@airlock.test > "$dir/keyring.gpg"

mkdeb() { # name version control-extra
  local root="$dir/build/$1-$2" pool="$dir/repo/pool/main/${1:0:1}/$1"
  mkdir -p "$root/DEBIAN" "$pool"
  printf 'Package: %s\nVersion: %s\nArchitecture: all\nMaintainer: airlock tests <t@airlock.test>\n%sDescription: node test package %s\n' "$1" "$2" "${3:-}" "$1" > "$root/DEBIAN/control"
  echo "$root"
}
rocm() { # version rvs-output
  local root
  root=$(mkdeb airlock-rocm-core "$1")
  mkdir -p "$root/opt/rocm/.info" "$root/opt/rocm/bin" "$root/opt/rocm/share"
  echo "$1" > "$root/opt/rocm/.info/version"
  cp "$2" "$root/opt/rocm/share/rvs-gst.txt"
  printf '#!/bin/sh\n# RVS exits 0 whether its tests pass or fail.\ncat /opt/rocm/share/rvs-gst.txt\n' > "$root/opt/rocm/bin/rvs"
  chmod 755 "$root/opt/rocm/bin/rvs"
  dpkg-deb --root-owner-group -Zgzip --build "$root" "$dir/repo/pool/main/a/airlock-rocm-core/airlock-rocm-core_$1_all.deb" > /dev/null
}
rocm 10.0.0-1 "$recorded/mi300x/out/rvs-gst.txt"
rocm 10.0.1-1 "$recorded/mi300x/out/rvs-gst.txt"
rocm 10.0.2-1 "$recorded/rvs-fail/out/rvs-gst.txt"
root=$(mkdeb airlock-amdgpu-dkms 1.0-1)
cat > "$root/DEBIAN/postinst" <<'POSTINST'
#!/bin/sh
set -e
touch /var/run/reboot-required
echo airlock-amdgpu-dkms >> /var/run/reboot-required.pkgs
POSTINST
chmod 755 "$root/DEBIAN/postinst"
dpkg-deb --root-owner-group -Zgzip --build "$root" "$dir/repo/pool/main/a/airlock-amdgpu-dkms/airlock-amdgpu-dkms_1.0-1_all.deb" > /dev/null

root=$(mkdeb airlock-broken 1.0-1)
printf '#!/bin/sh\necho "airlock-broken: cannot configure the device" >&2\nexit 1\n' > "$root/DEBIAN/postinst"
chmod 755 "$root/DEBIAN/postinst"
dpkg-deb --root-owner-group -Zgzip --build "$root" "$dir/repo/pool/main/a/airlock-broken/airlock-broken_1.0-1_all.deb" > /dev/null

root=$(mkdeb rocm-core 10.0.0.100000-42~24.04)
mkdir -p "$root/opt/rocm-10.0.0/lib"
echo "10.0.0-42" > "$root/opt/rocm-10.0.0/lib/rocm-core.txt"
dpkg-deb --root-owner-group -Zgzip --build "$root" "$dir/repo/pool/main/r/rocm-core/rocm-core_10.0.0.100000-42~24.04_all.deb" > /dev/null

root=$(mkdeb libamdhip64-5 5.2.3-3 $'Source: rocm-hipamd\n')
mkdir -p "$root/usr/share/doc/libamdhip64-5"
echo "HIP runtime (test stand-in)" > "$root/usr/share/doc/libamdhip64-5/README"
dpkg-deb --root-owner-group -Zgzip --build "$root" "$dir/repo/pool/main/l/libamdhip64-5/libamdhip64-5_5.2.3-3_all.deb" > /dev/null

"$(dirname "$0")/sign_suite.sh" "$dir/repo" node airlock-tests node@airlock.test
