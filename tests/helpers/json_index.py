#!/usr/bin/env python3
"""A PEP 691 JSON simple index over a directory of wheels (the form PyPI serves), for tests.

usage: json_index.py PORT DIR [--lie FILENAME] [--lie-size FILENAME]
(--lie: announce a wrong sha256 for FILENAME; --lie-size: announce one byte more than it has)
A file FILENAME.yanked beside a wheel marks it yanked (PEP 592/691), its text the reason.
A file FILENAME.provenance beside a wheel is its PEP 740 provenance object: the file's entry
names it (`provenance`, as PyPI's JSON API does) and it is served at /integrity/<filename>.
Serves /simple/<project>/ as application/vnd.pypi.simple.v1+json (api-version 1.3) and /files/<filename>.
"""
import hashlib, json, os, re, sys

import quiet_http

port, root = int(sys.argv[1]), sys.argv[2]
opts = dict(zip(sys.argv[3::2], sys.argv[4::2]))
lie, lie_size = opts.get("--lie"), opts.get("--lie-size")


def normalize(name):
    return re.sub(r"[-_.]+", "-", name).lower()


class Handler(quiet_http.Handler):
    def do_GET(self):
        parts = [p for p in self.path.split("?")[0].split("/") if p]
        if len(parts) == 2 and parts[0] == "simple":
            files = []
            for f in sorted(os.listdir(root)):
                if f.endswith(".yanked") or f.endswith(".provenance"):
                    continue
                if normalize(f.split("-")[0]) == parts[1]:
                    data = open(os.path.join(root, f), "rb").read()
                    digest = hashlib.sha256(data).hexdigest() if f != lie else "0" * 64
                    entry = {"filename": f, "url": f"../../files/{f}", "hashes": {"sha256": digest}, "size": len(data) + (f == lie_size)}
                    yanked = os.path.join(root, f + ".yanked")
                    if os.path.exists(yanked):
                        entry["yanked"] = open(yanked).read().strip() or True
                    entry["provenance"] = f"../../integrity/{f}" if os.path.exists(os.path.join(root, f + ".provenance")) else None
                    files.append(entry)
            if not files:
                return self.reply(404, b"", "text/plain")
            body = json.dumps({"meta": {"api-version": "1.3"}, "name": parts[1], "files": files}).encode()
            return self.reply(200, body, "application/vnd.pypi.simple.v1+json")
        if len(parts) == 2 and parts[0] == "integrity" and os.path.exists(os.path.join(root, parts[1] + ".provenance")):
            return self.reply(200, open(os.path.join(root, parts[1] + ".provenance"), "rb").read(), "application/json")
        if len(parts) == 2 and parts[0] == "files" and os.path.exists(os.path.join(root, parts[1])):
            return self.reply(200, open(os.path.join(root, parts[1]), "rb").read(), "application/octet-stream")
        self.reply(404, b"", "text/plain")


quiet_http.serve(port, Handler)
