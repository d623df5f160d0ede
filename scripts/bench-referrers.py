#!/usr/bin/env python3
"""List N referrers of one manifest in a registry, for scripts/bench.sh (issue 33, target 6):
what a busy registry holds when every CI run attaches an SBOM or a signature to an image, or
every approver a co-signature to a bundle.

usage: bench-referrers.py BASE_URL REPO DIGEST N --kind image|cosignature [--forge KEYID]

  image         N CycloneDX SBOM artifacts with `subject` (what `cosign attach sbom` or
                `oras attach` write), each its own manifest
  cosignature   N airlock co-signature artifacts, each under its own (unknown) key id: the
                bundle's trusted signer is not among them; --forge KEYID adds one more under
                KEYID whose signature is not one (what a hostile registry would list)

Every referrer is a manifest of its own (their layer bytes are shared, as a registry would
deduplicate them); they are listed under the referrers tag schema (`sha256-HEX`), what
registries without the referrers API (distribution 2.8) hold, after the referrers listed there
already. Pushed 16 at a time.
"""
import argparse, hashlib, json, os, sys, urllib.error
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "helpers"))
from push_image import OCI_INDEX, OCI_MANIFEST, Registry  # noqa: E402

EMPTY = "application/vnd.oci.empty.v1+json"
KINDS = {
    "image": ("application/vnd.cyclonedx+json", "application/vnd.cyclonedx+json",
              b'{"bomFormat": "CycloneDX", "specVersion": "1.5", "components": []}'),
    "cosignature": ("application/vnd.airlock.cosignature.v1", "application/vnd.airlock.cosignature.v1+base64",
                    b"MEUCIQDbench0000000000000000000000000000000000000000000AiBbench000000000000000000000000000000000000000000="),
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("base"); ap.add_argument("repo"); ap.add_argument("digest"); ap.add_argument("n", type=int)
    ap.add_argument("--kind", choices=KINDS, required=True)
    ap.add_argument("--forge", metavar="KEYID")
    a = ap.parse_args()
    reg = Registry(a.base)
    artifact_type, layer_type, payload = KINDS[a.kind]
    subject_bytes = reg.request("GET", f"/v2/{a.repo}/manifests/{a.digest}",
                                headers={"Accept": f"{OCI_MANIFEST}, {OCI_INDEX}"}).read()
    subject_type = json.loads(subject_bytes).get("mediaType", OCI_MANIFEST)
    subject = {"mediaType": subject_type, "digest": a.digest, "size": len(subject_bytes)}
    config = {"mediaType": EMPTY, "digest": reg.push_blob(a.repo, b"{}"), "size": 2}
    layer_digest = reg.push_blob(a.repo, payload)

    def one(i):
        key = a.forge if i == a.n else hashlib.sha256(f"bench key {i}".encode()).hexdigest()
        annotations = {"dev.airlock.key_id": key} if a.kind == "cosignature" else \
            {"org.opencontainers.image.created": f"2026-01-01T00:00:{i % 60:02d}Z", "run": str(i)}
        body = json.dumps({"schemaVersion": 2, "mediaType": OCI_MANIFEST, "artifactType": artifact_type,
                           "config": config,
                           "layers": [{"mediaType": layer_type, "digest": layer_digest, "size": len(payload),
                                       "annotations": annotations}],
                           "subject": subject, "annotations": annotations}).encode()
        digest = reg.push_manifest(a.repo, "sha256:" + hashlib.sha256(body).hexdigest(), body, OCI_MANIFEST)
        return {"mediaType": OCI_MANIFEST, "digest": digest, "size": len(body), "artifactType": artifact_type,
                "annotations": annotations}

    tag = a.digest.replace(":", "-")
    try:
        listed = json.loads(reg.request("GET", f"/v2/{a.repo}/manifests/{tag}", headers={"Accept": OCI_INDEX}).read())["manifests"]
    except urllib.error.HTTPError as e:
        if e.code != 404:
            raise
        listed = []
    with ThreadPoolExecutor(16) as pool:
        entries = listed + list(pool.map(one, range(a.n + (1 if a.forge else 0))))
    index = json.dumps({"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": entries}).encode()
    reg.push_manifest(a.repo, tag, index, OCI_INDEX)
    print(f"{a.n} {a.kind} referrers of {a.repo}@{a.digest}: index of {len(index)} bytes")


if __name__ == "__main__":
    sys.exit(main())
