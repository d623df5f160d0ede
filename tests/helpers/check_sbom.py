#!/usr/bin/env python3
"""Validate an SBOM against the official CycloneDX schema (1.5 or 1.6, by its specVersion) kept
in schemas/cyclonedx/, and check that every component's purl parses with packageurl-python and
follows its type's rules (a deb names its vendor and distro). Prints `TYPE SHA256` per
component with a hash.

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
sbom = json.load(open(path))
version = sbom.get("specVersion")
if version not in ("1.5", "1.6"):
    print(f"SCHEMA specVersion {version!r}: expected 1.5 or 1.6", file=sys.stderr)
    sys.exit(1)
schema = json.load(open(os.path.join(schema_dir, f"bom-{version}.SNAPSHOT.schema.json")))
validator = jsonschema.Draft7Validator(schema, registry=registry, format_checker=jsonschema.Draft7Validator.FORMAT_CHECKER)
errors = sorted(validator.iter_errors(sbom), key=lambda e: list(e.path))
if errors:
    for e in errors[:20]:
        print(f"SCHEMA {list(e.path)}: {e.message}", file=sys.stderr)
    sys.exit(1)


def walk(components):
    for c in components or []:
        yield c
        yield from walk(c.get("components"))


def type_rules(purl, text):
    """The purl type rules a scanner relies on to match advisories."""
    problems = []
    if purl.type == "deb":
        if not purl.namespace:
            problems.append("a deb purl names its vendor (debian, ubuntu) as namespace")
        if "arch" not in (purl.qualifiers or {}):
            problems.append("a deb purl has an arch qualifier")
    if purl.type == "pypi" and purl.name != purl.name.lower().replace("_", "-"):
        problems.append("a pypi name is lower case with - for _")
    if purl.type == "oci" and (purl.namespace or "repository_url" not in (purl.qualifiers or {})):
        problems.append("an oci purl has no namespace and a repository_url")
    for p in problems:
        print(f"PURL {text}: {p}", file=sys.stderr)
    return not problems


ok = True
for c in [sbom["metadata"]["component"], *walk(sbom.get("components"))]:
    purl = PackageURL.from_string(c["purl"])  # raises if it does not parse
    ok = type_rules(purl, c["purl"]) and ok
    for h in c.get("hashes", []):
        if h["alg"] == "SHA-256":
            print(purl.type, h["content"], c["type"])
sys.exit(0 if ok else 1)
