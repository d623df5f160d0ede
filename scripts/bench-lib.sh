# Shared by the benchmark scripts (sourced): ports, and a release of packages to serve.

port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
# apply_seconds NODES: the sum of the `seconds` of every node's apply record under NODES/*/records/.
apply_seconds() {
  cat "$1"/*/records/*-apply.json | python3 -c '
import json, sys
dec, text, total, i = json.JSONDecoder(), sys.stdin.read(), 0.0, 0
while i < len(text):
    while i < len(text) and text[i].isspace(): i += 1
    if i >= len(text): break
    doc, i = dec.raw_decode(text, i)
    total += doc.get("seconds") or 0
print(total)'
}
wait_port() { for _ in $(seq 100); do curl -sf -o /dev/null "http://127.0.0.1:$1/$2" && return; sleep 0.1; done; echo "no server on $1" >&2; exit 1; }

# bench_release AIRLOCK DIR MIB KEY: DIR/b1.airlock and DIR/b2.airlock, bundles `bench-fleet` 1.0.0
# and 2.0.0 of 40 packages of incompressible data, MIB MiB in all, locked and built from a signed
# apt repository served here for the while (KEY.key signs them); release 2 changes 2 of the 40.
bench_release() {
  # repo_pid is the caller's (its EXIT trap kills the server if this stops half-way).
  local airlock=$1 m=$2 SERVE_MIB=$3 key=$4 rport pins v
  mkdir -p "$m"
  # 40 packages of SERVE_MIB/40 MiB each at 1.0-1; bench-big-001 and -002 also at 1.1-1.
  export GNUPGHOME="$m/gnupg"
  mkdir -p "$GNUPGHOME" "$m/repo/pool/main/b" && chmod 700 "$GNUPGHOME"
  gpg --batch --quiet --pinentry-mode loopback --passphrase '' --quick-gen-key "bench <bench@airlock.test>" ed25519 sign never
  gpg --batch --quiet --export bench@airlock.test > "$m/keyring.gpg"
  python3 - "$m/build" "$SERVE_MIB" <<'EOF'
import os, sys
root, mib = sys.argv[1], int(sys.argv[2])
size = mib * 1024 * 1024 // 40
for i in range(1, 41):
    for version in (["1.0-1", "1.1-1"] if i <= 2 else ["1.0-1"]):
        name = f"bench-big-{i:03d}"
        top = os.path.join(root, f"{name}_{version}")
        os.makedirs(os.path.join(top, "DEBIAN"))
        os.makedirs(os.path.join(top, "usr/lib/bench"))
        with open(os.path.join(top, "DEBIAN/control"), "w") as f:
            f.write(f"Package: {name}\nVersion: {version}\nArchitecture: amd64\n"
                    f"Maintainer: airlock bench <bench@airlock.test>\nDescription: bench package {i}\n a GPU library's bulk\n")
        with open(os.path.join(top, f"usr/lib/bench/{name}.so"), "wb") as f:
            f.write(os.urandom(size))
EOF
  for pkg in "$m"/build/*; do
    dpkg-deb --root-owner-group -Znone --build "$pkg" "$m/repo/pool/main/b/$(basename "$pkg")_amd64.deb" > /dev/null
  done
  rm -rf "$m/build"
  "$repo/tests/helpers/sign_suite.sh" "$m/repo" bench airlock-bench bench@airlock.test
  rport=$(port)
  python3 -m http.server --bind 127.0.0.1 "$rport" -d "$m/repo" >/dev/null 2>&1 &
  repo_pid=$!
  wait_port "$rport" ""
  for v in 1 2; do
    mkdir -p "$m/s$v"
    pins=$(for i in $(seq -f '%03g' 40); do
      ver=1.0-1; [[ $v == 2 && $((10#$i)) -le 2 ]] && ver=1.1-1
      printf '"bench-big-%s=%s", ' "$i" "$ver"
    done)
    printf '[bundle]\nname = "bench-fleet"\nversion = "%s.0.0"\n\n[[deb]]\nrepo = "http://127.0.0.1:%s"\nsuite = "bench"\ncomponents = ["main"]\narch = "amd64"\npackages = [%s]\nkeyring = "%s"\n' \
      "$v" "$rport" "${pins%, }" "$m/keyring.gpg" > "$m/s$v/airlock.toml"
    "$airlock" lock "$m/s$v/airlock.toml" --cache "$m/cache" >/dev/null 2>&1
    "$airlock" build "$m/s$v/airlock.toml" --locked --cache "$m/cache" --key "$key.key" --out "$m/b$v.airlock" >/dev/null 2>&1
  done
  kill "$repo_pid"; repo_pid=""
  rm -rf "$m/cache" "$m/repo"
}
