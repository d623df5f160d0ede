#!/usr/bin/env bash
# A signed apt suite of N packages for the apply bench (scripts/bench.sh, `apply`):
#   scripts/bench-packages.sh DIR N
# DIR/repo: suite `bench` (component main, amd64) holding bench-pkg-001 … bench-pkg-N at 1.0-1 and
#   1.1-1 (a release and its update, for apply, apply and rollback), each
#   with the shape of a small library package: 12 files under /usr/lib/bench/NAME and
#   /usr/share/doc/NAME (2 to 40 KiB, incompressible), a postinst that runs ldconfig like a
#   library's trigger would, and every tenth package depending on the nine before it.
# DIR/keyring.gpg: the suite's public key.
set -euo pipefail
dir=$1 n=$2
export GNUPGHOME="$dir/gnupg"
mkdir -p "$GNUPGHOME" "$dir/repo/pool/main/b" && chmod 700 "$GNUPGHOME"
gpg --batch --quiet --pinentry-mode loopback --passphrase '' --quick-gen-key "bench <bench@airlock.test>" ed25519 sign never
gpg --batch --quiet --export bench@airlock.test > "$dir/keyring.gpg"

python3 - "$dir/build" "$n" <<'EOF'
import os, random, sys
root, n = sys.argv[1], int(sys.argv[2])
rng = random.Random(n)
for version in ["1.0-1", "1.1-1"]:
    for i in range(1, n + 1):
        name = f"bench-pkg-{i:03d}"
        top = os.path.join(root, f"{name}_{version}")
        os.makedirs(os.path.join(top, "DEBIAN"))
        depends = ""
        if i % 10 == 0:
            depends = "Depends: " + ", ".join(f"bench-pkg-{j:03d} (>= 1.0-1)" for j in range(i - 9, i)) + "\n"
        with open(os.path.join(top, "DEBIAN/control"), "w") as f:
            f.write(f"Package: {name}\nVersion: {version}\nArchitecture: amd64\n"
                    f"Maintainer: airlock bench <bench@airlock.test>\n{depends}Section: libs\nPriority: optional\n"
                    f"Description: bench package {i}\n a small library's shape\n")
        with open(os.path.join(top, "DEBIAN/postinst"), "w") as f:
            f.write("#!/bin/sh\nset -e\nif [ \"$1\" = configure ]; then ldconfig; fi\n")
        os.chmod(os.path.join(top, "DEBIAN/postinst"), 0o755)
        for k in range(12):
            sub = os.path.join(top, "usr/lib/bench" if k < 8 else "usr/share/doc", name)
            os.makedirs(sub, exist_ok=True)
            with open(os.path.join(sub, f"part{k}.bin"), "wb") as f:
                f.write(rng.randbytes(rng.randint(2048, 40960)))
EOF
for pkg in "$dir"/build/*; do
  dpkg-deb --root-owner-group -Zgzip --build "$pkg" "$dir/repo/pool/main/b/$(basename "$pkg")_amd64.deb" > /dev/null
done

"$(dirname "$0")/../tests/helpers/sign_suite.sh" "$dir/repo" bench airlock-bench bench@airlock.test
