#!/usr/bin/env python3
"""Attach a Sigstore signature to an image in a registry the way cosign does, independently
of airlock (tests for `[[image]] verify`, issue 65):

  attach_sigstore.py BASE_URL REPO DIGEST --referrer BUNDLE.json
      cosign's bundle format: the bundle as a blob, a manifest with `artifactType`
      application/vnd.dev.sigstore.bundle.v0.3+json and `subject` DIGEST, listed in the
      referrers tag schema's index (`sha256-HEX`, what a registry without the referrers API
      holds), added to what the index lists already.
  attach_sigstore.py BASE_URL REPO DIGEST --legacy BUNDLE.json --payload PAYLOAD
      cosign's legacy `sha256-HEX.sig` tag: PAYLOAD (the simple-signing JSON naming DIGEST)
      as the layer, with the signature, the certificate (PEM) and Rekor's old bundle (the
      entry's body, integrated time, index, log id and SET) as its annotations, taken from
      BUNDLE.json (a v0.3 bundle over PAYLOAD).
"""
import argparse, base64, hashlib, json, os, sys, urllib.error

sys.path.insert(0, os.path.dirname(__file__))
from push_image import OCI_INDEX, OCI_MANIFEST, Registry  # noqa: E402

BUNDLE_TYPE = "application/vnd.dev.sigstore.bundle.v0.3+json"


def pem(der: bytes) -> str:
    body = base64.b64encode(der).decode()
    lines = [body[i:i + 64] for i in range(0, len(body), 64)]
    return "-----BEGIN CERTIFICATE-----\n" + "\n".join(lines) + "\n-----END CERTIFICATE-----\n"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("base"); ap.add_argument("repo"); ap.add_argument("digest")
    ap.add_argument("--referrer"); ap.add_argument("--legacy"); ap.add_argument("--payload")
    ap.add_argument("--copies", type=int, default=1, help="--referrer: that many referrers, each its own manifest")
    a = ap.parse_args()
    reg = Registry(a.base)
    empty = reg.push_blob(a.repo, b"{}")
    subject = json.load(reg.request("GET", f"/v2/{a.repo}/manifests/{a.digest}",
                                    headers={"Accept": f"{OCI_MANIFEST}, {OCI_INDEX}"}))
    for copy in range(a.copies if a.referrer else 0):
        data = open(a.referrer, "rb").read()
        blob = reg.push_blob(a.repo, data)
        manifest = {"schemaVersion": 2, "mediaType": OCI_MANIFEST, "artifactType": BUNDLE_TYPE,
                    "annotations": {"dev.sigstore.bundle.content": "message-signature",
                                    "org.opencontainers.image.created": "2026-12-05T%02d:%02d:00Z" % (copy // 60, copy % 60)},
                    "config": {"mediaType": "application/vnd.oci.empty.v1+json", "digest": empty, "size": 2},
                    "layers": [{"mediaType": BUNDLE_TYPE, "digest": blob, "size": len(data),
                                "annotations": {"org.opencontainers.image.title": blob.replace(":", "-") + ".sigstore.json"}}],
                    "subject": {"mediaType": subject["mediaType"], "digest": a.digest}}
        body = json.dumps(manifest).encode()
        referrer = reg.push_manifest(a.repo, "sha256:" + hashlib.sha256(body).hexdigest(), body, OCI_MANIFEST)
        tag = a.digest.replace(":", "-")
        try:
            index = json.load(reg.request("GET", f"/v2/{a.repo}/manifests/{tag}", headers={"Accept": OCI_INDEX}))
        except urllib.error.HTTPError as e:
            if e.code != 404:
                raise
            index = {"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": []}
        index["manifests"].append({"mediaType": OCI_MANIFEST, "digest": referrer, "size": len(body),
                                   "artifactType": BUNDLE_TYPE, "annotations": manifest["annotations"]})
        reg.push_manifest(a.repo, tag, json.dumps(index).encode(), OCI_INDEX)
        print(referrer)
    if a.legacy:
        b = json.load(open(a.legacy))
        payload = open(a.payload, "rb").read()
        entry = b["verificationMaterial"]["tlogEntries"][0]
        rekor = {"SignedEntryTimestamp": entry["inclusionPromise"]["signedEntryTimestamp"],
                 "Payload": {"body": entry["canonicalizedBody"], "integratedTime": int(entry["integratedTime"]),
                             "logIndex": int(entry["logIndex"]),
                             "logID": base64.b64decode(entry["logId"]["keyId"]).hex()}}
        cert = base64.b64decode(b["verificationMaterial"]["certificate"]["rawBytes"])
        layer = {"mediaType": "application/vnd.dev.cosign.simplesigning.v1+json",
                 "digest": reg.push_blob(a.repo, payload), "size": len(payload),
                 "annotations": {"dev.cosignproject.cosign/signature": b["messageSignature"]["signature"],
                                 "dev.sigstore.cosign/certificate": pem(cert),
                                 "dev.sigstore.cosign/bundle": json.dumps(rekor)}}
        sig = {"schemaVersion": 2, "mediaType": OCI_MANIFEST,
               "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": empty, "size": 2},
               "layers": [layer]}
        print(reg.push_manifest(a.repo, a.digest.replace(":", "-") + ".sig", json.dumps(sig).encode(), OCI_MANIFEST))


if __name__ == "__main__":
    sys.exit(main())
