#!/usr/bin/env bash
# Check what scripts/release.sh wrote: scripts/check-release.sh [DIST]   (default dist/)
# The binary needs no glibc newer than 2.28 and runs; the tarball holds the binary, every man
# page, the completions, README, LICENSE and the HTML documentation, and its .sha256 matches; the .deb and the .rpm list
# the same files; lintian finds no error in the .deb; every man page renders; the bash
# completion parses. Exit 1 with what is wrong.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
dist=$(realpath -m "${1:-$repo/dist}")
cd "$dist"
fail() { echo "check-release: $*" >&2; exit 1; }

tarball=$(ls airlock-*-x86_64-unknown-linux-gnu.tar.gz)
sha256sum -c --quiet "$tarball.sha256" || fail "$tarball does not match its .sha256"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
tar -xzf "$tarball" -C "$work"
top=$work/${tarball%.tar.gz}
bin=$top/airlock

newest=$(objdump -T "$bin" | grep -o 'GLIBC_[0-9.]*' | sed 's/GLIBC_//' | sort -V | tail -n 1)
[[ $(printf '%s\n2.28\n' "$newest" | sort -V | tail -n 1) == 2.28 ]] || fail "the binary needs glibc $newest (more than 2.28)"
"$bin" --version | grep -q x86_64-unknown-linux-gnu || fail "--version does not name the target"

pages=$("$bin" man "$work/pages" | wc -l)
[[ $(ls "$top"/man/*.1 | wc -l) -eq $pages ]] || fail "the tarball lacks man pages"
for page in "$top"/man/*.1; do
  MANWIDTH=80 man -l "$page" > /dev/null 2>&1 || fail "man -l $page fails"
done
for f in completions/airlock.bash completions/_airlock completions/airlock.fish README.md LICENSE \
    doc/html/index.html doc/html/site-operator.html; do
  [[ -s $top/$f ]] || fail "the tarball lacks $f"
done
bash -n "$top/completions/airlock.bash" || fail "the bash completion does not parse"

deb=$(ls airlock_*_amd64.deb)
rpm=$(ls airlock-*.x86_64.rpm)
dpkg-deb -c "$deb" > "$work/deb.list"
rpm -qpl "$rpm" > "$work/rpm.list" 2>/dev/null
for want in usr/bin/airlock usr/share/man/man1/airlock.1.gz usr/share/man/man1/airlock-apply.1.gz \
    usr/share/bash-completion/completions/airlock usr/share/zsh/vendor-completions/_airlock \
    usr/share/fish/vendor_completions.d/airlock.fish usr/share/doc/airlock/html/index.html; do
  grep -q " \./$want\$" "$work/deb.list" || fail "$deb lacks /$want"
  grep -qx "/$want" "$work/rpm.list" || fail "$rpm lacks /$want"
done
# lintian: errors fail the release; warnings are shown.
lintian --no-tag-display-limit "$deb" > "$work/lintian" 2>&1 || true
if grep -q '^E:' "$work/lintian"; then cat "$work/lintian" >&2; fail "lintian reports errors on $deb"; fi
echo "check-release: ok ($tarball, glibc $newest, $pages man pages, $deb, $rpm)"
