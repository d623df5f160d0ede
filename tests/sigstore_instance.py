#!/usr/bin/env python3
"""A private Sigstore instance, made on the spot for the tests (issue 65), and one keyless
signature from it: what Fulcio, a CT log and Rekor would have produced, made here with the
`cryptography` package and nothing else.

    sigstore_instance.py OUT_DIR --identity URI --issuer URL (--digest HEX | --file PATH | --dsse-subject NAME:HEX) [--prefix P]

`--dsse-subject`: a DSSE envelope over an in-toto statement naming NAME with sha256 HEX (PyPI's
publish attestation), logged as a Rekor `dsse` entry; also written as a PEP 740 provenance
object (`Pprovenance.json`, and `Ptampered-provenance.json` from the tampered entry).

A second run into the same OUT_DIR is the same instance (its keys and certificates are kept in
OUT_DIR/instance.json) signing something else: `--prefix P` names its bundles `Pbundle.sigstore.json`, …

writes into OUT_DIR:
  trusted_root.json    the instance's root: a root CA and an intermediate (Fulcio), a CT log
                       key and a Rekor key, each valid from an hour ago
  bundle.sigstore.json a v0.3 bundle: a short-lived leaf certificate for URI (SAN) from URL
                       (Fulcio's issuer extensions) with an embedded SCT over its
                       precertificate, a message signature over the digest, and a Rekor v1
                       hashedrekord entry with its SET, its inclusion proof in a real RFC 6962
                       Merkle tree of several entries, and a signed checkpoint
  tampered-entry.sigstore.json   the same bundle, its log entry's integrated time moved
  other-log.sigstore.json        the same bundle, its inclusion proof for another leaf
  trust_config.json    the root as sigstore-python's `--trust-config` takes it (a ClientTrustConfig)
"""

import argparse
import base64
import datetime
import hashlib
import json
import os
import struct

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, utils
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID, ObjectIdentifier

SCT_LIST_OID = ObjectIdentifier("1.3.6.1.4.1.11129.2.4.2")
ISSUER_V1_OID = ObjectIdentifier("1.3.6.1.4.1.57264.1.1")
ISSUER_V2_OID = ObjectIdentifier("1.3.6.1.4.1.57264.1.8")


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def spki(key) -> bytes:
    return key.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)


def rfc3339(t: datetime.datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def der_length(n: int) -> bytes:
    if n < 0x80:
        return bytes([n])
    body = n.to_bytes((n.bit_length() + 7) // 8, "big")
    return bytes([0x80 | len(body)]) + body


def der_octet_string(data: bytes) -> bytes:
    return b"\x04" + der_length(len(data)) + data


def der_utf8(text: str) -> bytes:
    data = text.encode()
    return b"\x0c" + der_length(len(data)) + data


def ca_cert(name, key, issuer_name, issuer_key, now, path_length):
    return (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "airlock-test"), x509.NameAttribute(NameOID.COMMON_NAME, name)]))
        .issuer_name(issuer_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=365))
        .add_extension(x509.BasicConstraints(ca=True, path_length=path_length), critical=True)
        .add_extension(
            x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(issuer_key.public_key()), critical=False)
        .sign(issuer_key, hashes.SHA256())
    )


def leaf_builder(leaf_key, intermediate, identity, issuer, now, serial, issuer_v1=None):
    return (
        x509.CertificateBuilder()
        .subject_name(x509.Name([]))
        .issuer_name(intermediate.subject)
        .public_key(leaf_key.public_key())
        .serial_number(serial)
        .not_valid_before(now - datetime.timedelta(minutes=1))
        .not_valid_after(now + datetime.timedelta(minutes=10))
        .add_extension(x509.KeyUsage(True, False, False, False, False, False, False, False, False), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CODE_SIGNING]), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(leaf_key.public_key()), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(intermediate.public_key()), critical=False)
        .add_extension(x509.SubjectAlternativeName([x509.UniformResourceIdentifier(identity)]), critical=True)
        .add_extension(x509.UnrecognizedExtension(ISSUER_V1_OID, (issuer_v1 or issuer).encode()), critical=False)
        .add_extension(x509.UnrecognizedExtension(ISSUER_V2_OID, der_utf8(issuer)), critical=False)
    )


def sct_for(tbs: bytes, issuer_spki: bytes, ct_key, timestamp_ms: int) -> bytes:
    """RFC 6962 §3.2: a v1 SCT over a precertificate entry, serialized."""
    log_id = hashlib.sha256(spki(ct_key)).digest()
    signed = (
        struct.pack(">BBQH", 0, 0, timestamp_ms, 1)
        + hashlib.sha256(issuer_spki).digest()
        + len(tbs).to_bytes(3, "big")
        + tbs
        + struct.pack(">H", 0)
    )
    signature = ct_key.sign(signed, ec.ECDSA(hashes.SHA256()))
    return (
        bytes([0])
        + log_id
        + struct.pack(">Q", timestamp_ms)
        + struct.pack(">H", 0)
        + bytes([4, 3])
        + struct.pack(">H", len(signature))
        + signature
    )


def leaf_hash(data: bytes) -> bytes:
    return hashlib.sha256(b"\x00" + data).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(b"\x01" + left + right).digest()


def merkle_root(leaves):
    if len(leaves) == 1:
        return leaves[0]
    k = 1
    while k * 2 < len(leaves):
        k *= 2
    return node_hash(merkle_root(leaves[:k]), merkle_root(leaves[k:]))


def inclusion_path(index, leaves):
    """RFC 6962 §2.1.1: the audit path of leaf `index`, bottom up."""
    if len(leaves) == 1:
        return []
    k = 1
    while k * 2 < len(leaves):
        k *= 2
    if index < k:
        return inclusion_path(index, leaves[:k]) + [merkle_root(leaves[k:])]
    return inclusion_path(index - k, leaves[k:]) + [merkle_root(leaves[:k])]


def canonical(obj) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--identity", required=True)
    ap.add_argument("--issuer", required=True)
    what = ap.add_mutually_exclusive_group(required=True)
    what.add_argument("--digest")
    what.add_argument("--file")
    what.add_argument("--dsse-subject")
    ap.add_argument("--prefix", default="")
    # PyPI's publish attestation, unless another predicate is asked for (a test of refusing it).
    ap.add_argument("--predicate-type", default="https://docs.pypi.org/attestations/publish/v1")
    # The statement's `_type`, and a legacy issuer extension (1.1) that differs from the current
    # one (1.8): ambiguities a verifier must refuse (tests of refusing them).
    ap.add_argument("--statement-type", default="https://in-toto.io/Statement/v1")
    ap.add_argument("--issuer-v1", default=None)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    statement = None
    if a.dsse_subject:
        name, hexdigest = a.dsse_subject.rsplit(":", 1)
        statement = canonical({"_type": a.statement_type, "subject": [{"name": name, "digest": {"sha256": hexdigest}}],
                               "predicateType": a.predicate_type, "predicate": None})
        digest = hashlib.sha256(statement).digest()
    else:
        digest = bytes.fromhex(a.digest) if a.digest else hashlib.sha256(open(a.file, "rb").read()).digest()

    state = os.path.join(a.out, "instance.json")
    pem = lambda k: k.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()).decode()
    if os.path.exists(state):
        kept = json.load(open(state))
        root_key, inter_key, ct_key, rekor_key = (serialization.load_pem_private_key(kept[k].encode(), None) for k in ("root", "inter", "ct", "rekor"))
        root, intermediate = (x509.load_pem_x509_certificate(kept[c].encode()) for c in ("root_cert", "inter_cert"))
        first = datetime.datetime.fromisoformat(kept["now"])
    else:
        first = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)
        root_key, inter_key, ct_key, rekor_key = (ec.generate_private_key(ec.SECP256R1()) for _ in range(4))
        root_name = x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "airlock-test"), x509.NameAttribute(NameOID.COMMON_NAME, "test root")])
        root = ca_cert("test root", root_key, root_name, root_key, first, 1)
        intermediate = ca_cert("test intermediate", inter_key, root.subject, root_key, first, 0)
        cert_pem = lambda c: c.public_bytes(serialization.Encoding.PEM).decode()
        json.dump({"root": pem(root_key), "inter": pem(inter_key), "ct": pem(ct_key), "rekor": pem(rekor_key),
                   "root_cert": cert_pem(root), "inter_cert": cert_pem(intermediate), "now": first.isoformat()}, open(state, "w"))
    leaf_key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)

    # Fulcio's way: the SCT is over the certificate without its SCT list, then added to it.
    serial = x509.random_serial_number()
    pre = leaf_builder(leaf_key, intermediate, a.identity, a.issuer, now, serial, a.issuer_v1).sign(inter_key, hashes.SHA256())
    sct = sct_for(pre.tbs_certificate_bytes, spki(inter_key), ct_key, int(now.timestamp() * 1000))
    sct_list = struct.pack(">H", len(sct) + 2) + struct.pack(">H", len(sct)) + sct
    leaf = (
        leaf_builder(leaf_key, intermediate, a.identity, a.issuer, now, serial, a.issuer_v1)
        .add_extension(x509.UnrecognizedExtension(SCT_LIST_OID, der_octet_string(sct_list)), critical=False)
        .sign(inter_key, hashes.SHA256())
    )
    leaf_der = leaf.public_bytes(serialization.Encoding.DER)
    leaf_pem = leaf.public_bytes(serialization.Encoding.PEM)
    payload_type = "application/vnd.in-toto+json"
    if statement is not None:
        # DSSE: the signature is over the envelope's pre-authentication encoding.
        pae = b"DSSEv1 %d %s %d %s" % (len(payload_type), payload_type.encode(), len(statement), statement)
        signature = leaf_key.sign(pae, ec.ECDSA(hashes.SHA256()))
        envelope = {"payload": b64(statement), "payloadType": payload_type, "signatures": [{"sig": b64(signature)}]}
        body = canonical({
            "apiVersion": "0.0.1",
            "kind": "dsse",
            "spec": {
                "envelopeHash": {"algorithm": "sha256", "value": hashlib.sha256(canonical(envelope)).hexdigest()},
                "payloadHash": {"algorithm": "sha256", "value": hashlib.sha256(statement).hexdigest()},
                "signatures": [{"signature": b64(signature), "verifier": b64(leaf_pem)}],
            },
        })
    else:
        signature = leaf_key.sign(digest, ec.ECDSA(utils.Prehashed(hashes.SHA256())))
        # Rekor v1: the hashedrekord entry, one leaf among several of a real tree.
        body = canonical({
            "apiVersion": "0.0.1",
            "kind": "hashedrekord",
            "spec": {
                "data": {"hash": {"algorithm": "sha256", "value": digest.hex()}},
                "signature": {"content": b64(signature), "publicKey": {"content": b64(leaf_pem)}},
            },
        })
    others = [canonical({"entry": i}) for i in range(6)]
    index = 3
    entries = others[:index] + [body] + others[index:]
    leaves = [leaf_hash(e) for e in entries]
    root_hash = merkle_root(leaves)
    log_id = hashlib.sha256(spki(rekor_key)).digest()
    integrated = int(now.timestamp())
    origin = "rekor.airlock.test - 1"
    note = f"{origin}\n{len(leaves)}\n{b64(root_hash)}\n"
    note_sig = rekor_key.sign(note.encode(), ec.ECDSA(hashes.SHA256()))
    checkpoint = note + "\n" + f"\u2014 rekor.airlock.test {b64(log_id[:4] + note_sig)}\n"

    def entry(integrated_time, proof_index):
        set_payload = canonical({"body": b64(body), "integratedTime": integrated_time, "logID": log_id.hex(), "logIndex": index})
        return {
            "logIndex": str(index),
            "logId": {"keyId": b64(log_id)},
            "kindVersion": {"kind": "dsse" if statement is not None else "hashedrekord", "version": "0.0.1"},
            "integratedTime": str(integrated_time),
            "inclusionPromise": {"signedEntryTimestamp": b64(rekor_key.sign(set_payload, ec.ECDSA(hashes.SHA256())))},
            "inclusionProof": {
                "logIndex": str(proof_index),
                "rootHash": b64(root_hash),
                "treeSize": str(len(leaves)),
                "hashes": [b64(h) for h in inclusion_path(proof_index, leaves)],
                "checkpoint": {"envelope": checkpoint},
            },
            "canonicalizedBody": b64(body),
        }

    def bundle(tlog_entry):
        doc = {
            "mediaType": "application/vnd.dev.sigstore.bundle.v0.3+json",
            "verificationMaterial": {"certificate": {"rawBytes": b64(leaf_der)}, "tlogEntries": [tlog_entry]},
        }
        if statement is not None:
            doc["dsseEnvelope"] = envelope
        else:
            doc["messageSignature"] = {
                "messageDigest": {"algorithm": "SHA2_256", "digest": b64(digest)},
                "signature": b64(signature),
            }
        return doc

    def provenance(tlog_entry):
        # PEP 740: the same material as an attestation object, in a provenance object.
        attestation = {"version": 1,
                       "verification_material": {"certificate": b64(leaf_der), "transparency_entries": [tlog_entry]},
                       "envelope": {"statement": b64(statement), "signature": b64(signature)}}
        publisher = {"kind": "GitHub", "repository": "platform/stack", "workflow": "release.yml", "environment": None}
        return {"version": 1, "attestation_bundles": [{"publisher": publisher, "attestations": [attestation]}]}

    def write(name, doc):
        with open(os.path.join(a.out, name), "w") as f:
            json.dump(doc, f, indent=2)
            f.write("\n")

    start = rfc3339(first - datetime.timedelta(hours=1))
    key_of = lambda k: {"rawBytes": b64(spki(k)), "keyDetails": "PKIX_ECDSA_P256_SHA_256", "validFor": {"start": start}}
    write("trusted_root.json", {
        "mediaType": "application/vnd.dev.sigstore.trustedroot+json;version=0.1",
        "tlogs": [{"baseUrl": "https://rekor.airlock.test", "hashAlgorithm": "SHA2_256", "publicKey": key_of(rekor_key), "logId": {"keyId": b64(log_id)}}],
        "certificateAuthorities": [{
            "subject": {"organization": "airlock-test", "commonName": "test intermediate"},
            "uri": "https://fulcio.airlock.test",
            "certChain": {"certificates": [{"rawBytes": b64(c.public_bytes(serialization.Encoding.DER))} for c in (intermediate, root)]},
            "validFor": {"start": start},
        }],
        "ctlogs": [{"baseUrl": "https://ctfe.airlock.test", "hashAlgorithm": "SHA2_256", "publicKey": key_of(ct_key), "logId": {"keyId": b64(hashlib.sha256(spki(ct_key)).digest())}}],
        "timestampAuthorities": [],
    })
    urls = lambda url: [{"url": url, "majorApiVersion": 1, "validFor": {"start": start}, "operator": "airlock-test"}]
    write("trust_config.json", {
        "mediaType": "application/vnd.dev.sigstore.clienttrustconfig.v0.1+json",
        "trustedRoot": json.load(open(os.path.join(a.out, "trusted_root.json"))),
        "signingConfig": {
            "mediaType": "application/vnd.dev.sigstore.signingconfig.v0.2+json",
            "caUrls": urls("https://fulcio.airlock.test"),
            "oidcUrls": [],
            "rekorTlogUrls": urls("https://rekor.airlock.test"),
            "tsaUrls": [],
            "rekorTlogConfig": {"selector": "ANY"},
            "tsaConfig": {"selector": "ANY"},
        },
    })
    write(a.prefix + "bundle.sigstore.json", bundle(entry(integrated, index)))
    write(a.prefix + "tampered-entry.sigstore.json", bundle(entry(integrated, index) | {"integratedTime": str(integrated - 30)}))
    write(a.prefix + "other-log.sigstore.json", bundle(entry(integrated, index + 1)))
    if statement is not None:
        write(a.prefix + "provenance.json", provenance(entry(integrated, index)))
        write(a.prefix + "tampered-provenance.json", provenance(entry(integrated, index) | {"integratedTime": str(integrated - 30)}))


if __name__ == "__main__":
    main()
