#!/usr/bin/env bash
# Against the real world, not fixtures (not part of CI: it needs the package registries this
# machine reaches). Locks, builds, verifies and installs:
#   - `hello` and `jq` with their dependency closure, from the distribution archive and keyring
#     this machine's own apt sources name (read from /etc/apt, never hard-coded), over this
#     machine's dpkg status as the target's base;
#   - a PEP 751 pylock.toml written by uv for a few wheels, from the index pip uses;
# then checks the site views offline: `apt-get -s install` with only the site repository as
# source and the base as status, and `pip install` with only the site index.
#   scripts/real-world.sh                 builds airlock (debug) first
#   AIRLOCK=path scripts/real-world.sh    uses that binary instead
#   KEEP=1 scripts/real-world.sh          keeps the working directory
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
AIRLOCK=${AIRLOCK:-$("$repo/scripts/airlock-bin.sh")}
work=$(mktemp -d "${TMPDIR:-/tmp}/airlock-real.XXXXXX")
if [[ -n "${KEEP:-}" ]]; then echo "working in $work (kept)"; else trap 'rm -rf "$work"' EXIT; fi
step() { printf '\n==> %s\n' "$*"; }
timed() { local TIMEFORMAT='    (%2R s)'; time "$@"; }
export AIRLOCK_KEY_PASSWORD=real-world AIRLOCK_CACHE="$work/cache"

step "the distribution archive this machine's apt uses"
# The first `deb` source for the release's own codename (not -updates or -security), from
# deb822 .sources files or one-line .list files; its Signed-By keyring, else the
# distribution's archive keyring.
read -r uri suite component keyring < <(python3 - <<'PY'
import glob, os, re
osr = dict(l.rstrip("\n").split("=", 1) for l in open("/etc/os-release") if "=" in l)
codename = osr.get("VERSION_CODENAME", "").strip('"')
dist = osr.get("ID", "debian").strip('"')
found = []
for path in sorted(glob.glob("/etc/apt/sources.list.d/*.sources")):
    for block in re.split(r"\n\s*\n", open(path).read()):
        f = {}
        for line in block.splitlines():
            if line.startswith("#") or ":" not in line or line[0].isspace():
                continue
            k, v = line.split(":", 1)
            f[k.strip().lower()] = v.strip()
        if "deb" in f.get("types", "").split() and f.get("enabled", "yes") != "no":
            for u in f.get("uris", "").split():
                for s in f.get("suites", "").split():
                    found.append((u, s, f.get("components", "main").split()[0], f.get("signed-by", "")))
for path in ["/etc/apt/sources.list"] + sorted(glob.glob("/etc/apt/sources.list.d/*.list")):
    if not os.path.exists(path):
        continue
    for line in open(path):
        m = re.match(r"\s*deb\s+(?:\[([^\]]*)\]\s+)?(\S+)\s+(\S+)\s+(\S+)", line)
        if m:
            opts = dict(o.split("=", 1) for o in (m.group(1) or "").split() if "=" in o)
            found.append((m.group(2), m.group(3), m.group(4), opts.get("signed-by", "")))
found.sort(key=lambda s: s[1] != codename)
if not found:
    raise SystemExit("no deb source in /etc/apt")
uri, suite, component, keyring = found[0]
keyring = keyring or f"/usr/share/keyrings/{dist}-archive-keyring.gpg"
print(uri.rstrip("/"), suite, component, keyring)
PY
)
arch=$(dpkg --print-architecture)
echo "    $uri $suite $component ($arch), keyring $keyring"

step "the Python index pip uses"
index=$(python3 -m pip config list 2>/dev/null | sed -n "s/^[^=]*index-url='\(.*\)'$/\1/p" | head -n 1)
index=${PIP_INDEX_URL:-${index:-https://pypi.org/simple}}
echo "    $index"
command -v uv >/dev/null || python3 -m pip install --quiet uv
mkdir -p "$work/project"
printf 'six==1.16.0\npackaging==24.1\nnumpy==2.1.3\n' > "$work/project/requirements.in"
(cd "$work/project" && uv pip compile --quiet requirements.in --universal --index-url "$index" \
  --format pylock.toml -o pylock.toml)
echo "    uv wrote pylock.toml: $(grep -c '^\[\[packages\]\]' "$work/project/pylock.toml") packages, $(grep -c '\.whl' "$work/project/pylock.toml") wheels listed"

# The target: this machine, as its dpkg status says (what it has at a version that satisfies
# a dependency is not carried; what it has older is carried at the newer version).
cp /var/lib/dpkg/status "$work/project/status"

cat > "$work/project/airlock.toml" <<EOF
[bundle]
name = "real-world"
version = "1.0.0"

[[deb]]
repo = "$uri"
suite = "$suite"
components = ["$component"]
arch = "$arch"
packages = ["hello", "jq"]
keyring = "$keyring"
resolve = true
base_status = "status"

[[wheel]]
index = "$index"
lockfile = "pylock.toml"
python = ["3.11", "3.12"]
platforms = ["manylinux_2_17_x86_64", "manylinux2014_x86_64", "any"]
EOF

step "lock: the closure and the Python lock file, pinned"
timed "$AIRLOCK" lock "$work/project/airlock.toml"
step "build"
"$AIRLOCK" keygen --out-dir "$work/keys" --name build >/dev/null
timed "$AIRLOCK" build "$work/project/airlock.toml" --locked --key "$work/keys/build.key" --out "$work/real.airlock"
ls -l "$work/real.airlock" | awk '{print "    " $5 " bytes"}'
step "verify"
timed "$AIRLOCK" verify "$work/real.airlock" --trust "$work/keys/build.pub"

step "install, with a site key for the apt view"
export GNUPGHOME="$work/gnupg"
mkdir -p "$GNUPGHOME" && chmod 700 "$GNUPGHOME"
gpg --batch --quiet --pinentry-mode loopback --passphrase '' --quick-gen-key "real-world site <site@airlock.test>" ed25519 sign never
gpg --batch --quiet --pinentry-mode loopback --passphrase '' --armor --export-secret-keys site@airlock.test > "$work/site-secret.asc"
gpg --batch --quiet --armor --export site@airlock.test > "$work/site.asc"
timed "$AIRLOCK" install "$work/real.airlock" --trust "$work/keys/build.pub" --root "$work/site" \
  --apt-signing-key "$work/site-secret.asc"

step "apt-get -s install hello jq: only the site repository, the target's status"
a="$work/apt"
mkdir -p "$a/lists/partial" "$a/cache/archives/partial" "$a/parts" "$a/prefs"
echo "deb [signed-by=$work/site.asc] file:$work/site/current/debs ./" > "$a/sources.list"
aptget() {
  apt-get -o Dir::State::Lists="$a/lists" -o Dir::State::status="$work/project/status" \
    -o Dir::Cache="$a/cache" -o Dir::Etc::SourceList="$a/sources.list" -o Dir::Etc::SourceParts="$a/parts" \
    -o Dir::Etc::PreferencesParts="$a/prefs" -o Debug::NoLocking=1 -o APT::Sandbox::User=root "$@"
}
aptget update -q | sed 's/^/    /'
aptget -s install hello jq | sed 's/^/    /'

step "pip install into a fresh venv, from the site index alone, for this machine's Python"
python3 -m venv "$work/venv"
# Nothing but the site index: no pip configuration, no find-links from the environment.
env -u PIP_FIND_LINKS -u PIP_INDEX_URL -u PIP_EXTRA_INDEX_URL PIP_CONFIG_FILE=/dev/null \
  "$work/venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-cache-dir \
  --index-url "file://$work/site/current/wheels/simple" six==1.16.0 packaging==24.1 numpy==2.1.3
"$work/venv/bin/python" -c 'import numpy, six, packaging; print("    imported numpy", numpy.__version__, "six", six.__version__, "packaging", packaging.__version__)'

step "done: a real distribution closure and a real Python lock file, carried and installed offline"
