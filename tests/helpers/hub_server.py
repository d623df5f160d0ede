#!/usr/bin/env python3
"""A Hugging Face hub-compatible test server for one repository directory.

usage: hub_server.py PORT REPO_ID DIR [--token T] [--lie PATH] [--lie-size PATH] [--moving yes]
Speaks GET /api/models/{repo}/revision/{rev}, /api/models/{repo}/tree/{commit}?recursive=true
and /{repo}/resolve/{commit}/{path}. *.safetensors and *.bin are LFS files (lfs.oid = sha256);
--lie announces a wrong lfs.oid for PATH; --lie-size one byte more in the tree than PATH has;
--token requires `Authorization: Bearer T`; --moving makes the commit follow the files, so that
changing a file moves `main` to a new commit (as a push would).
"""
import hashlib, json, os, sys

import quiet_http

port, repo, root = int(sys.argv[1]), sys.argv[2], sys.argv[3]
opts = dict(zip(sys.argv[4::2], sys.argv[5::2]))
token, lie, lie_size = opts.get("--token"), opts.get("--lie"), opts.get("--lie-size")
moving = opts.get("--moving") == "yes"
fixed_commit = hashlib.sha1(f"{repo}@airlock-test".encode()).hexdigest()


def files():
    for dirpath, _, names in os.walk(root):
        for n in sorted(names):
            full = os.path.join(dirpath, n)
            yield os.path.relpath(full, root).replace(os.sep, "/"), open(full, "rb").read()


class Handler(quiet_http.Handler):
    def do_GET(self):
        commit = fixed_commit
        if moving:
            h = hashlib.sha1(repo.encode())
            for rel, data in files():
                h.update(rel.encode() + b"\0" + hashlib.sha1(data).digest())
            commit = h.hexdigest()
        if token and self.headers.get("Authorization") != f"Bearer {token}":
            return self.reply(401, b'{"error":"unauthorized"}')
        path = self.path.split("?")[0]
        api = f"/api/models/{repo}/"
        if path.startswith(api + "revision/"):
            rev = path[len(api + "revision/"):]
            if rev not in ("main", commit):
                return self.reply(404, b'{"error":"revision not found"}')
            return self.reply(200, json.dumps({"id": repo, "sha": commit}).encode())
        if path == api + f"tree/{commit}":
            out, dirs = [], set()
            for rel, data in files():
                parts = rel.split("/")
                for i in range(1, len(parts)):
                    dirs.add("/".join(parts[:i]))
                entry = {"type": "file", "path": rel, "size": len(data) + (rel == lie_size),
                         "oid": hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()}
                if rel.endswith((".safetensors", ".bin")):
                    oid = "0" * 64 if rel == lie else hashlib.sha256(data).hexdigest()
                    entry["lfs"] = {"oid": oid, "size": len(data), "pointerSize": 134}
                out.append(entry)
            out += [{"type": "directory", "path": d, "size": 0, "oid": "0" * 40} for d in sorted(dirs)]
            return self.reply(200, json.dumps(out).encode())
        prefix = f"/{repo}/resolve/{commit}/"
        if path.startswith(prefix):
            full = os.path.join(root, path[len(prefix):])
            if os.path.isfile(full):
                return self.reply(200, open(full, "rb").read(), "application/octet-stream")
        self.reply(404, b'{"error":"not found"}')


quiet_http.serve(port, Handler)
