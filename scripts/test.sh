#!/usr/bin/env bash
# Install the system packages the tests need (apt-get), then run the whole suite: format,
# lints, unit and integration tests, and the demo. CI runs exactly this (.ci/run).
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"

# Command -> Debian package. System tests fail (never skip) without these.
declare -A packages=([zstd]=zstd [xz]=xz-utils [openssl]=openssl [tar]=tar [python3]=python3 [jq]=jq
  [docker-registry]=docker-registry [skopeo]=skopeo [htpasswd]=apache2-utils
  [gpg]=gnupg [dpkg-deb]=dpkg [dpkg-scanpackages]=dpkg-dev [apt-ftparchive]=apt-utils [apt-get]=apt
  [unshare]=util-linux [mount]=mount [chromium]=chromium [script]=bsdutils
  [debootstrap]=debootstrap [curl]=curl [ip]=iproute2 [chroot]=coreutils [man]=man-db
  [rpmbuild]=rpm [rpmsign]=rpm [createrepo_c]=createrepo-c [modifyrepo_c]=createrepo-c [dnf]=dnf [zypper]=zypper
  [lintian]=lintian [markdown_py]=python3-markdown [nginx]=nginx-light [objdump]=binutils [mkfs.xfs]=xfsprogs [filefrag]=e2fsprogs
  [slurmctld]=slurm-wlm [slurmd]=slurm-wlm [sbatch]=slurm-client [munged]=munge)
missing=()
for cmd in "${!packages[@]}"; do
  command -v "$cmd" >/dev/null || missing+=("${packages[$cmd]}")
done
if ((${#missing[@]})); then
  echo "==> installing ${missing[*]}"
  sudo=""; [[ $(id -u) -eq 0 ]] || sudo="sudo"
  # dpkg's progress ("(Reading database ... 5%") is kept out of the log unless it fails.
  aptlog=$(mktemp "${TMPDIR:-/tmp}/airlock-apt-log.XXXXXX")
  if ! { $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq \
      --no-install-recommends "${missing[@]}"; } >"$aptlog" 2>&1; then
    cat "$aptlog"
    exit 1
  fi
  rm -f "$aptlog"
fi
# Python packages the tests run as real servers and clients.
for module in pypiserver:pypiserver huggingface_hub:huggingface-hub cyclonedx:cyclonedx-python-lib[json-validation] \
    ansible:ansible-core ansiblelint:ansible-lint ziglang:ziglang tuf:tuf cryptography:cryptography sigstore:sigstore \
    pypi_attestations:pypi-attestations securesystemslib:securesystemslib in_toto_attestation:in-toto-attestation; do
  if ! python3 -c "import ${module%%:*}" 2>/dev/null; then
    echo "==> installing ${module##*:} (pip)"
    python3 -m pip install -q --disable-pip-version-check "${module##*:}" 2>/dev/null \
      || python3 -m pip install -q --disable-pip-version-check --break-system-packages "${module##*:}"
  fi
done
command -v cargo >/dev/null || { echo "cargo is required (https://rustup.rs)"; exit 1; }
# The portable release builds with cargo-zigbuild (pip: a prebuilt binary).
command -v cargo-zigbuild >/dev/null || python3 -m pip install -q --disable-pip-version-check cargo-zigbuild 2>/dev/null \
  || python3 -m pip install -q --disable-pip-version-check --break-system-packages cargo-zigbuild
# The node tests' real Debian system (debootstrap minbase, and a partial mirror of its suite),
# built once and kept under target/ (about 330 MB; a minute from the archive).
echo "==> node fixture (scripts/node-fixture.sh)"
sudo=""; [[ $(id -u) -eq 0 ]] || sudo="sudo"
$sudo scripts/node-fixture.sh

echo "==> cargo fmt --check"
cargo fmt --all -- --check
echo "==> cargo clippy"
cargo clippy --locked --all-targets --features system-tests -- -D warnings
echo "==> cargo test --features system-tests"
# Both tiers of the integration tests (tests/it/main.rs): a plain `cargo test` runs only the
# hermetic one; the system tier needs what this script installed above, and root.
cargo test --locked --features system-tests 2>&1
echo "==> scripts/demo.sh (the binary the tests ran)"
# The binary cargo test built (with the tests' features; not the bin target's own unit-test
# harness, which cargo lists too): `cargo build` would build another
# one in the same profile with other features, recompiling a good part of the tree.
airlock=$(cargo test --locked --features system-tests --no-run --message-format=json 2>/dev/null \
  | jq -r 'select(.reason == "compiler-artifact" and .target.name == "airlock" and .profile.test == false
                  and (.target.kind | index("bin")) and .executable != null) | .executable' | tail -n 1)
[[ -x "$airlock" ]] || airlock=$(scripts/airlock-bin.sh)
log=$(mktemp "${TMPDIR:-/tmp}/airlock-demo-log.XXXXXX")
trap 'rm -f "$log"' EXIT
AIRLOCK="$airlock" scripts/demo.sh >"$log" 2>&1 || { cat "$log"; exit 1; }
tail -n 1 "$log"
