#!/usr/bin/env python3
"""Write test images into a registry through the OCI distribution API, independently of
airlock: deterministic random layers, a config per platform, a manifest per platform, and
optionally an index over them and a cosign-style signature tag.

usage: push_image.py BASE_URL REPO TAG [--platforms linux/amd64,linux/arm64] [--seed N]
                     [--layers N] [--layer-size BYTES] [--user U:P] [--cacert FILE]
                     [--cosign-sig] [--docker]
Prints the digest of what TAG points to.
"""
import argparse, base64, re, gzip, hashlib, io, json, random, ssl, sys, tarfile, urllib.parse, urllib.request, urllib.error

OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
OCI_LAYER = "application/vnd.oci.image.layer.v1.tar+gzip"
DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
DOCKER_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"
DOCKER_CONFIG = "application/vnd.docker.container.image.v1+json"
DOCKER_LAYER = "application/vnd.docker.image.rootfs.diff.tar.gzip"


class Registry:
    def __init__(self, base, user=None, cacert=None):
        self.base = base.rstrip("/")
        self.headers = {}
        if user:
            self.headers["Authorization"] = "Basic " + base64.b64encode(user.encode()).decode()
        self.ctx = ssl.create_default_context(cafile=cacert) if cacert else None

    token_user = None

    def request(self, method, url, data=None, headers=None, retry=True):
        if not url.startswith("http"):
            url = self.base + url
        req = urllib.request.Request(url, data=data, method=method, headers={**self.headers, **(headers or {})})
        try:
            return urllib.request.urlopen(req, context=self.ctx)
        except urllib.error.HTTPError as e:
            challenge = e.headers.get("WWW-Authenticate", "")
            if e.code != 401 or not retry or not challenge.startswith("Bearer ") or not self.token_user:
                raise
            # Bearer flow: ask the realm for a token with basic credentials, then retry.
            params = dict(re.findall(r'(\w+)="([^"]*)"', challenge))
            realm = params.pop("realm")
            auth = "Basic " + base64.b64encode(self.token_user.encode()).decode()
            query = urllib.parse.urlencode(params)
            tok = json.load(urllib.request.urlopen(urllib.request.Request(f"{realm}?{query}", headers={"Authorization": auth})))
            self.headers["Authorization"] = "Bearer " + tok["token"]
            return self.request(method, url, data, headers, retry=False)

    def push_blob(self, repo, data):
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        try:
            self.request("HEAD", f"/v2/{repo}/blobs/{digest}")
            return digest
        except urllib.error.HTTPError as e:
            if e.code != 404:
                raise
        resp = self.request("POST", f"/v2/{repo}/blobs/uploads/")
        location = resp.headers["Location"]
        if location.startswith("/"):
            location = self.base + location
        sep = "&" if "?" in location else "?"
        self.request("PUT", f"{location}{sep}digest={digest}", data=data,
                     headers={"Content-Type": "application/octet-stream", "Content-Length": str(len(data))})
        return digest

    def push_manifest(self, repo, ref, body, media_type):
        self.request("PUT", f"/v2/{repo}/manifests/{ref}", data=body, headers={"Content-Type": media_type})
        return "sha256:" + hashlib.sha256(body).hexdigest()


def layer(rng, size, name):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        payload = rng.randbytes(size)
        info = tarfile.TarInfo(name)
        info.size, info.mtime, info.mode = len(payload), 0, 0o644
        tar.addfile(info, io.BytesIO(payload))
    raw = buf.getvalue()
    return gzip.compress(raw, mtime=0), "sha256:" + hashlib.sha256(raw).hexdigest()


def image(reg, repo, rng, platform, layers, layer_size, docker):
    os_, arch, *variant = platform.split("/")
    descs, diff_ids = [], []
    for i in range(layers):
        blob, diff_id = layer(rng, layer_size, f"{arch}-layer{i}.bin")
        descs.append({"mediaType": DOCKER_LAYER if docker else OCI_LAYER, "digest": reg.push_blob(repo, blob), "size": len(blob)})
        diff_ids.append(diff_id)
    config = {"architecture": arch, "os": os_, "rootfs": {"type": "layers", "diff_ids": diff_ids}, "config": {}}
    if variant:
        config["variant"] = variant[0]
    config_bytes = json.dumps(config, sort_keys=True).encode()
    manifest = {"schemaVersion": 2, "mediaType": DOCKER_MANIFEST if docker else OCI_MANIFEST,
                "config": {"mediaType": DOCKER_CONFIG if docker else OCI_CONFIG,
                           "digest": reg.push_blob(repo, config_bytes), "size": len(config_bytes)},
                "layers": descs}
    return json.dumps(manifest, sort_keys=True).encode(), manifest["mediaType"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("base"); ap.add_argument("repo"); ap.add_argument("tag")
    ap.add_argument("--platforms", default="linux/amd64")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--layer-size", type=int, default=4096)
    ap.add_argument("--user"); ap.add_argument("--cacert"); ap.add_argument("--token-user")
    ap.add_argument("--cosign-sig", action="store_true")
    ap.add_argument("--referrer", action="store_true", help="an SBOM artifact with `subject`, listed under the referrers tag schema")
    ap.add_argument("--docker", action="store_true")
    a = ap.parse_args()
    reg = Registry(a.base, a.user, a.cacert)
    reg.token_user = a.token_user
    rng = random.Random(a.seed)
    platforms = a.platforms.split(",")
    if len(platforms) == 1:
        body, mt = image(reg, a.repo, rng, platforms[0], a.layers, a.layer_size, a.docker)
        digest = reg.push_manifest(a.repo, a.tag, body, mt)
    else:
        entries = []
        for p in platforms:
            body, mt = image(reg, a.repo, rng, p, a.layers, a.layer_size, a.docker)
            d = reg.push_manifest(a.repo, "sha256:" + hashlib.sha256(body).hexdigest(), body, mt)
            os_, arch, *variant = p.split("/")
            plat = {"architecture": arch, "os": os_, **({"variant": variant[0]} if variant else {})}
            entries.append({"mediaType": mt, "digest": d, "size": len(body), "platform": plat})
        index = {"schemaVersion": 2, "mediaType": DOCKER_LIST if a.docker else OCI_INDEX, "manifests": entries}
        body = json.dumps(index, sort_keys=True).encode()
        digest = reg.push_manifest(a.repo, a.tag, body, index["mediaType"])
    if a.cosign_sig:
        # The shape cosign uses: a manifest whose layer is the signed payload, tagged sha256-HEX.sig.
        payload = json.dumps({"critical": {"image": {"docker-manifest-digest": digest}}}).encode()
        cfg = b"{}"
        sig = {"schemaVersion": 2, "mediaType": OCI_MANIFEST,
               "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": reg.push_blob(a.repo, cfg), "size": len(cfg)},
               "layers": [{"mediaType": "application/vnd.dev.cosign.simplesigning.v1+json", "digest": reg.push_blob(a.repo, payload),
                           "size": len(payload), "annotations": {"dev.cosignproject.cosign/signature": "MEUCIQ=="}}]}
        reg.push_manifest(a.repo, digest.replace(":", "-") + ".sig", json.dumps(sig).encode(), OCI_MANIFEST)
    if a.referrer:
        subject = {"mediaType": mt if len(platforms) == 1 else (DOCKER_LIST if a.docker else OCI_INDEX), "digest": digest, "size": len(body)}
        sbom = b'{"bomFormat": "CycloneDX", "specVersion": "1.5"}'
        empty = b"{}"
        art = {"schemaVersion": 2, "mediaType": OCI_MANIFEST, "artifactType": "application/vnd.cyclonedx+json",
               "config": {"mediaType": "application/vnd.oci.empty.v1+json", "digest": reg.push_blob(a.repo, empty), "size": 2},
               "layers": [{"mediaType": "application/vnd.cyclonedx+json", "digest": reg.push_blob(a.repo, sbom), "size": len(sbom)}],
               "subject": subject}
        art_body = json.dumps(art).encode()
        art_digest = reg.push_manifest(a.repo, "sha256:" + hashlib.sha256(art_body).hexdigest(), art_body, OCI_MANIFEST)
        referrers = {"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": [
            {"mediaType": OCI_MANIFEST, "digest": art_digest, "size": len(art_body), "artifactType": "application/vnd.cyclonedx+json"}]}
        reg.push_manifest(a.repo, digest.replace(":", "-"), json.dumps(referrers).encode(), OCI_INDEX)
    print(digest)


if __name__ == "__main__":
    sys.exit(main())
