#!/usr/bin/env bash
# A newcomer's first ten minutes: build, verify, inspect and install the demo bundle from
# testdata/demo with a fresh key, offline, printing each step; then the next release over it,
# split into parts for media and as a delta, a refused downgrade, a verified rollback, the
# site's status and records, and a bundle pushed as an OCI artifact and installed from it.
#   scripts/demo.sh            builds airlock (release) first
#   AIRLOCK=path scripts/demo.sh   uses that binary instead
#   KEEP=1 scripts/demo.sh      keeps the temporary directory for a look around
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
if [[ -z "${AIRLOCK:-}" ]]; then
  echo "==> building airlock (cargo build --release; a few minutes the first time)"
  AIRLOCK=$("$repo/scripts/airlock-bin.sh" --release)
  echo "    built $AIRLOCK"
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/airlock-demo.XXXXXX")
if [[ -n "${KEEP:-}" ]]; then echo "working in $work (kept)"; else trap 'rm -rf "$work"' EXIT; fi

spec="$repo/testdata/demo/airlock.toml"
bundle="$work/rocm10-demo-2026.11.0.airlock"
export AIRLOCK_KEY_PASSWORD=demo-passphrase   # never a flag; a real build host uses a secret store
export SOURCE_DATE_EPOCH=1764432000          # reproducible: same inputs, same bytes

step() { printf '\n==> %s\n' "$*"; }
# Wall time with sub-second precision, from bash itself (no external `time` needed).
timed() { local TIMEFORMAT='    (%2R s)'; time "$@"; }

step "1. keygen: an ECDSA P-256 key pair, the private key cosign-encrypted with \$AIRLOCK_KEY_PASSWORD"
"$AIRLOCK" keygen --out-dir "$work/keys" --name build

step "2. lock: every input pinned to a sha256 (testdata/demo/airlock.lock is committed, so this checks it)"
"$AIRLOCK" lock "$spec"

step "3. build --locked: a signed, deterministic tar.zst"
timed "$AIRLOCK" build "$spec" --locked --key "$work/keys/build.key" --out "$bundle"
"$AIRLOCK" build "$spec" --locked --key "$work/keys/build.key" --out "$work/again.airlock" >/dev/null
cmp -s "$bundle" "$work/again.airlock" && echo "    rebuilt: byte-identical ($(sha256sum "$bundle" | cut -c1-16)…)"

step "4. verify (on the site, offline): signature first, then every member streamed and hashed"
timed "$AIRLOCK" verify "$bundle" --trust "$work/keys/build.pub"

step "5. inspect: what the bundle claims, without extracting it"
"$AIRLOCK" inspect "$bundle"

step "6. approval: the security team verifies, co-signs (BUNDLE.KEYID.sig beside it), and the site requires both keys"
"$AIRLOCK" keygen --out-dir "$work/keys" --name security
"$AIRLOCK" sign "$bundle" --key "$work/keys/security.key" --trust "$work/keys/build.pub"
"$AIRLOCK" verify "$bundle" --trust "$work/keys/build.pub" --trust "$work/keys/security.pub" --threshold 2

step "7. probe: this site's GPU stack; the demo replays a recorded 8x MI300X host (testdata/probes/mi300x)"
# Install validates the host against the bundle's support matrix before activating it. This
# machine may have no GPU, so the demo replays a recorded one: tool stand-ins on PATH print
# the recorded amd-smi, rocminfo and RVS output, and host files are read under it.
export PATH="$repo/testdata/probes/mi300x/bin:$PATH" AIRLOCK_HOST_ROOT="$repo/testdata/probes/mi300x/root"
# The host and its first GPU (the other seven are alike).
"$AIRLOCK" probe | awk '/^  amd 1:/ { exit } { print }'

step "8. install into a site root (two-key policy): verified while staged, validated green, then activated atomically"
timed "$AIRLOCK" install "$bundle" --trust "$work/keys/build.pub" --trust "$work/keys/security.pub" --threshold 2 \
  --root "$work/site"
ls -l "$work/site" "$work/site/current/" "$work/site/current/files/"

step "9. validate: the active bundle's matrix row and RVS check against this host"
"$AIRLOCK" validate --root "$work/site"
echo "    the same RVS failing (it still exits 0) is red: install refuses it with exit 4"
set +e
PATH="$repo/testdata/probes/rvs-fail/bin:$PATH" "$AIRLOCK" validate --root "$work/site"
code=$?
set -e
echo "    exit code $code"
[[ $code -eq 4 ]]

step "10. an auditor's own check, no airlock involved: zstd + tar + openssl"
if command -v zstd >/dev/null && command -v openssl >/dev/null; then
  mkdir "$work/audit"
  zstd -dc "$bundle" | tar -x -C "$work/audit" airlock/manifest.json airlock/manifest.json.sig
  base64 -d "$work/audit/airlock/manifest.json.sig" > "$work/audit/sig.der"
  openssl dgst -sha256 -verify "$work/keys/build.pub" -signature "$work/audit/sig.der" "$work/audit/airlock/manifest.json"
else
  echo "    (skipped: needs zstd and openssl; scripts/test.sh installs them)"
fi

step "11. a tampered bundle is refused (exit 3) and the site is left as it was"
# Flip every bit of the middle byte, with coreutils only (od, printf, dd).
cp "$bundle" "$work/tampered.airlock"
middle=$(( $(stat -c %s "$bundle") / 2 ))
byte=$(od -An -tu1 -j "$middle" -N1 "$bundle" | tr -d ' ')
printf "\\$(printf '%03o' $(( byte ^ 255 )))" | dd of="$work/tampered.airlock" bs=1 seek="$middle" conv=notrunc status=none
if cmp -s "$bundle" "$work/tampered.airlock"; then
  echo "error: could not tamper with the copy of the bundle (od, printf and dd are needed); step 8 proves nothing" >&2
  exit 1
fi
echo "    flipped byte $middle of a copy: $work/tampered.airlock"
set +e
"$AIRLOCK" install "$work/tampered.airlock" --trust "$work/keys/build.pub" --root "$work/site"
code=$?
set -e
echo "    exit code $code; current -> $(readlink "$work/site/current")"
[[ $code -eq 3 ]]

step "12. the next release on media: 2026.11.1 split into 64 KiB parts, and as a delta against 2026.11.0"
next="$work/next"
mkdir -p "$next" "$work/media"
cp -r "$repo/testdata/demo/firmware" "$repo/testdata/demo/docs" "$next/"
sed 's/^version = "2026.11.0"/version = "2026.11.1"/' "$repo/testdata/demo/airlock.toml" > "$next/airlock.toml"
echo "2026.11.1: rebuilt with the same firmware" >> "$next/docs/RELEASE-NOTES.md"
# Parts for media (FAT32 sticks: --split-size 4095M); `cat` joins them into the ordinary bundle.
"$AIRLOCK" build "$next/airlock.toml" --key "$work/keys/build.key" --out "$work/media/next.airlock" \
  --split-size 64K 2>/dev/null | grep -E '^built|split into|next\.airlock\.[0-9]{3} '
"$AIRLOCK" verify "$work/media/next.airlock.parts.json" --trust "$work/keys/build.pub" | grep -E '^verified|read from'

# The delta leaves out what 2026.11.0 holds (the firmware): the site takes it from its retained copy.
"$AIRLOCK" build "$next/airlock.toml" --key "$work/keys/build.key" --out "$work/next-delta.airlock" \
  --base "$bundle" 2>/dev/null | grep -E "^built|delta:"
echo "    full 2026.11.1: $(cat "$work"/media/next.airlock.0* | wc -c) bytes; delta: $(stat -c %s "$work/next-delta.airlock") bytes"
"$AIRLOCK" install "$work/next-delta.airlock" --trust "$work/keys/build.pub" --root "$work/site"

step "13. an older version is refused (exit 3): rollback is the way back"
set +e
"$AIRLOCK" install "$bundle" --trust "$work/keys/build.pub" --trust "$work/keys/security.pub" --root "$work/site"
code=$?
set -e
echo "    exit code $code"
[[ $code -eq 3 ]]

step "14. rollback: the retained 2026.11.0 verified again from its file, restaged and made current"
timed "$AIRLOCK" rollback --root "$work/site"
"$AIRLOCK" status --root "$work/site"
ls "$work/site/records/"

step "15. bundles as OCI artifacts: 2026.11.1 pushed into an OCI image layout (what a registry stores) and installed from it"
# With a registry: `airlock push … oci://HOST/REPO:TAG`, `airlock copy`, `airlock install oci://…`.
"$AIRLOCK" push "$work/media/next.airlock.parts.json" "oci-layout:$work/oci-layout:2026.11.1"
"$AIRLOCK" install "oci-layout:$work/oci-layout:2026.11.1" --trust "$work/keys/build.pub" --root "$work/site"

step "16. the approval pack: one self-contained HTML page (verdict, rows and reasons, checks, signers, records)"
"$AIRLOCK" report --root "$work/site" --out "$work/approval.html"
"$AIRLOCK" report --root "$work/site" --json | grep -m 2 -E '"(kind|verdict)": "(site|green|amber|red)"'

step "17. check: every retained bundle verified again and every staged file compared (a tampered file is named, exit 3)"
"$AIRLOCK" check --root "$work/site" | tail -n 1
victim=$(find "$work/site/current/files" -type f | sort | head -n 1)
echo "tampered" >"$victim"
set +e
"$AIRLOCK" check --root "$work/site" | grep -E "DAMAGED|files/"
code=${PIPESTATUS[0]}
set -e
echo "    exit code $code"
[[ $code -eq 3 ]]
# Re-installing the current bundle restages it from its verified file.
"$AIRLOCK" install "oci-layout:$work/oci-layout:2026.11.1" --trust "$work/keys/build.pub" --root "$work/site" >/dev/null
"$AIRLOCK" check --root "$work/site" | tail -n 1

step "18. a mirror without GPUs: install --role mirror verifies, stages and serves the views, with no GPU validation"
# The recorded host with no GPU tools at all: the default role would be red here.
PATH="$repo/testdata/probes/nogpu/bin:${PATH#"$repo/testdata/probes/mi300x/bin:"}" \
  AIRLOCK_HOST_ROOT="$repo/testdata/probes/nogpu/root" \
  "$AIRLOCK" install "$bundle" --role mirror --trust "$work/keys/build.pub" --root "$work/mirror"
echo "    nodes apply from it (apt, as root): airlock apply file://$work/mirror/ --trust build.pub --root /var/lib/airlock"

step "19. a site trust root (TUF metadata): signing roles stated once, no --trust in scripts; a revoked key stops counting"
"$AIRLOCK" keygen --out-dir "$work/keys" --name root >/dev/null
"$AIRLOCK" trust init --root "$work/trusted-site" --root-key "$work/keys/root.pub" --expires 90d \
  --role "build=$work/keys/build.pub:1" --role "security=$work/keys/security.pub:1" --sign "$work/keys/root.key"
"$AIRLOCK" trust show --root "$work/trusted-site" | grep -A 2 "signing roles"
"$AIRLOCK" install "$bundle" --root "$work/trusted-site" | tail -n 1
"$AIRLOCK" trust revoke --root "$work/trusted-site" --key "$work/keys/security.pub" --sign "$work/keys/root.key" 2>/dev/null
set +e
"$AIRLOCK" verify "$bundle" --root "$work/trusted-site" >/dev/null 2>&1
code=$?
set -e
echo "    security.pub revoked: verify --root exits $code (the security role cannot be met until a key is added)"
[[ $code -eq 3 ]]

step "20. upstream signatures: a vendor file signed with Sigstore, verified at lock, carried, checked again offline"
cp -r "$repo/testdata/upstream-signed" "$work/upstream"
vendor_root="$work/upstream/vendor-instance.trusted_root.json"   # a private instance's trusted root
"$AIRLOCK" lock "$work/upstream/airlock.toml" --trusted-root "$vendor_root"
"$AIRLOCK" build "$work/upstream/airlock.toml" --locked --key "$work/keys/build.key" --out "$work/vendor.airlock" \
  | head -n 1
"$AIRLOCK" verify "$work/vendor.airlock" --trust "$work/keys/build.pub" --trusted-root "$vendor_root" \
  | grep "upstream signature"
set +e
"$AIRLOCK" verify "$work/vendor.airlock" --trust "$work/keys/build.pub" >/dev/null 2>&1
code=$?
set -e
echo "    under the public-good root, which does not know the vendor's instance: verify exits $code"
[[ $code -eq 3 ]]

printf '\n==> done: bundle %s bytes\n' "$(stat -c %s "$bundle")"
