#!/usr/bin/env python3
"""A hostile OCI distribution registry for one bundle artifact, served from an oci-layout
directory that `airlock push` wrote.

usage: hostile_registry.py PORT LAYOUT MODE
MODE huge:    the artifact manifest declares the bundle layer 1 TiB long, and the blob is an
              endless stream of zeros sent with that Content-Length.
MODE endless: the manifest is true, but the bundle layer's body never ends (zeros, no
              Content-Length, the connection held open).
MODE bigdoc:  every manifest request gets an endless body.
MODE bigrefs: the manifest is true, the referrers API answers with an endless body.
Every stream stops by itself after 60 s or 8 GiB, so a test that fails does not fill the disk.
"""
import hashlib, json, os, sys, time

import quiet_http

port, layout, mode = sys.argv[1], sys.argv[2], sys.argv[3]
index = json.load(open(os.path.join(layout, "index.json")))
artifact_digest = index["manifests"][0]["digest"]


def blob(digest):
    return open(os.path.join(layout, "blobs", *digest.split(":")), "rb").read()


artifact = json.loads(blob(artifact_digest))
bundle_layer = artifact["layers"][-1]["digest"]
if mode == "huge":
    artifact["layers"][-1]["size"] = 1 << 40
served = json.dumps(artifact).encode()
served_digest = "sha256:" + hashlib.sha256(served).hexdigest()


class Handler(quiet_http.Handler):
    protocol_version = "HTTP/1.1"

    def zeros(self, length=None):
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        if length is not None:
            self.send_header("Content-Length", str(length))
        else:
            self.send_header("Connection", "close")
        self.end_headers()
        chunk, sent, start = b"\0" * (1 << 20), 0, time.time()
        try:
            while sent < (8 << 30) and time.time() - start < 60:
                self.wfile.write(chunk)
                sent += len(chunk)
        except (BrokenPipeError, ConnectionResetError):
            pass
        self.close_connection = True

    def do_HEAD(self):
        self.do_GET(head=True)

    def do_GET(self, head=False):
        path = self.path.split("?")[0]
        if path == "/v2/":
            return self.reply(200, b"{}")
        if "/manifests/" in path:
            ref = path.rsplit("/", 1)[1]
            if ref.startswith("sha256-"):
                return self.reply(404, b'{"errors":[{"code":"MANIFEST_UNKNOWN"}]}')
            if mode == "bigdoc":
                return self.zeros(None)
            self.send_response(200)
            self.send_header("Content-Type", artifact["mediaType"])
            self.send_header("Docker-Content-Digest", served_digest)
            self.send_header("Content-Length", str(len(served)))
            self.end_headers()
            if not head:
                self.wfile.write(served)
            return
        if "/referrers/" in path:
            if mode == "bigrefs":
                return self.zeros(None)
            return self.reply(404, b'{"errors":[{"code":"NOT_FOUND"}]}')
        if "/blobs/" in path:
            digest = path.rsplit("/", 1)[1]
            if digest == bundle_layer:
                return self.zeros(1 << 40 if mode == "huge" else None)
            try:
                return self.reply(200, blob(digest), "application/octet-stream")
            except FileNotFoundError:
                return self.reply(404, b'{"errors":[{"code":"BLOB_UNKNOWN"}]}')
        return self.reply(404, b"{}")


quiet_http.serve(port, Handler)
