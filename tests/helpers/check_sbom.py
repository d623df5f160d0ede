#!/usr/bin/env python3
"""Validate an SBOM against the official CycloneDX 1.5 schema kept in schemas/cyclonedx/, and
check that every component's purl parses. Prints `TYPE SHA256` per component with a hash.

usage: check_sbom.py SCHEMA_DIR SBOM.json
"""
import json, os, sys

import jsonschema
from packageurl import PackageURL
from referencing import Registry, Resource

schema_dir, path = sys.argv[1:3]
resources = {}
for name in os.listdir(schema_dir):
    if name.endswith(".schema.json"):
        doc = json.load(open(os.path.join(schema_dir, name)))
        resource = Resource.from_contents(doc)
        resources[name] = resource
        resources[doc["$id"]] = resource
        # The $refs name siblings relative to the bom schema's $id.
        resources["http://cyclonedx.org/schema/" + name] = resource
registry = Registry().with_resources(resources.items())
schema = json.load(open(os.path.join(schema_dir, "bom-1.5.SNAPSHOT.schema.json")))
validator = jsonschema.Draft7Validator(schema, registry=registry, format_checker=jsonschema.Draft7Validator.FORMAT_CHECKER)
sbom = json.load(open(path))
errors = sorted(validator.iter_errors(sbom), key=lambda e: list(e.path))
if errors:
    for e in errors[:20]:
        print(f"SCHEMA {list(e.path)}: {e.message}", file=sys.stderr)
    sys.exit(1)


def walk(components):
    for c in components or []:
        yield c
        yield from walk(c.get("components"))


for c in [sbom["metadata"]["component"], *walk(sbom.get("components"))]:
    purl = PackageURL.from_string(c["purl"])  # raises if it does not parse
    for h in c.get("hashes", []):
        if h["alg"] == "SHA-256":
            print(purl.type, h["content"], c["type"])
