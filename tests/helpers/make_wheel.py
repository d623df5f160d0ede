#!/usr/bin/env python3
"""Write a minimal, valid, deterministic wheel: make_wheel.py OUTDIR NAME VERSION [TAG [REQUIRES]]
REQUIRES: comma-separated Requires-Dist entries (`dep==2.0,other`)."""
import base64, hashlib, sys, zipfile

outdir, name, version = sys.argv[1:4]
tag = sys.argv[4] if len(sys.argv) > 4 else "py3-none-any"
requires = "".join(f"Requires-Dist: {r}\n" for r in sys.argv[5].split(",") if r) if len(sys.argv) > 5 else ""
dist = f"{name}-{version}"
files = {
    f"{name}/__init__.py": f"VERSION = {version!r}\n".encode(),
    f"{dist}.dist-info/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n{requires}".encode(),
    f"{dist}.dist-info/WHEEL": f"Wheel-Version: 1.0\nGenerator: airlock-test\nRoot-Is-Purelib: true\nTag: {tag}\n".encode(),
}
record = "".join(
    f"{p},sha256={base64.urlsafe_b64encode(hashlib.sha256(d).digest()).rstrip(b'=').decode()},{len(d)}\n" for p, d in files.items()
) + f"{dist}.dist-info/RECORD,,\n"
path = f"{outdir}/{name}-{version}-{tag}.whl"
with zipfile.ZipFile(path, "w") as z:
    for p, d in [*files.items(), (f"{dist}.dist-info/RECORD", record.encode())]:
        z.writestr(zipfile.ZipInfo(p, (1980, 1, 1, 0, 0, 0)), d)
print(path)
