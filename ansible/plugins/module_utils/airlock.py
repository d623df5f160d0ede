# -*- coding: utf-8 -*-
# Shared by the airlock.site modules: run the airlock CLI with --json and read its one JSON
# document. Every module is a thin wrapper; airlock itself verifies, applies and records.

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

# Exit codes (docs/architecture.md): 0 ok, 1 runtime, 2 usage, 3 verification failed,
# 4 validation red (after apply: the host's packages were put back), 5 applied, reboot pending.
EXIT_RED = 4
EXIT_PENDING_REBOOT = 5

COMMON_ARGS = dict(
    root=dict(type="path", required=True),
    binary=dict(type="str", default="airlock"),
    environment=dict(type="dict", default={}),
    run_id=dict(type="str"),
)


def run_plain(module, args):
    """Run `airlock ARGS` with the module's environment; (rc, stdout, stderr)."""
    env = dict((str(k), str(v)) for k, v in module.params["environment"].items())
    return module.run_command([module.params["binary"]] + list(args), environ_update=env, check_rc=False)


def run_airlock(module, args, check_rc=False):
    """Run `airlock ARGS --json` with the module's environment; (rc, document, stderr)."""
    cmd = [module.params["binary"]] + list(args) + ["--json"]
    rc, out, err = run_plain(module, list(args) + ["--json"])
    doc = None
    if out.strip():
        try:
            doc = json.loads(out)
        except ValueError:
            module.fail_json(msg="airlock printed no JSON document", cmd=cmd, rc=rc, stdout=out, stderr=err)
    if check_rc and rc != 0:
        module.fail_json(msg=error_message(doc, err), cmd=cmd, rc=rc, stderr=err, result=doc)
    return rc, doc, err


def error_message(doc, stderr):
    """The one sentence airlock gave for a failure: its JSON error document, else stderr."""
    if isinstance(doc, dict) and isinstance(doc.get("error"), dict):
        return doc["error"].get("message", "airlock failed")
    lines = [line for line in stderr.splitlines() if line.strip()]
    return lines[-1] if lines else "airlock failed"


def run_args(module):
    """--run-id for the calls that write a record, when the play names its run."""
    run_id = module.params.get("run_id")
    return ["--run-id", run_id] if run_id else []


def trust_args(trust, threshold):
    """--trust and --threshold; none at all for a node with a site trust root (ROOT/trust/),
    whose signing roles decide."""
    args = []
    for key in trust or []:
        args += ["--trust", key]
    if trust and threshold:
        args += ["--threshold", str(threshold)]
    return args


def current_bundle(module):
    """The node's current bundle (id, name, version), or None (no root, nothing installed)."""
    rc, doc, _ = run_airlock(module, ["status", "--root", module.params["root"]])
    if rc != 0 or not isinstance(doc, dict):
        return None
    return doc.get("current")


def approval_pack(module):
    """`airlock report --root ROOT` into a private temporary file: (page or None, verified,
    verdict, reason or None). A page whose bundle did not verify (exit 3) comes back too."""
    import os
    import shutil
    import tempfile

    tmp = tempfile.mkdtemp(prefix="airlock-report-")
    try:
        out = os.path.join(tmp, "report.html")
        rc, doc, err = run_airlock(module, ["report", "--root", module.params["root"], "--out", out])
        page = None
        if os.path.isfile(out):
            with open(out, "r", encoding="utf-8") as f:
                page = f.read()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    doc = doc if isinstance(doc, dict) else {}
    verified = rc == 0 and bool((doc.get("bundle") or {}).get("verified"))
    verdict = ((doc.get("site") or {}).get("validation") or {}).get("verdict")
    reason = None
    if not verified:
        problems = "; ".join((doc.get("bundle") or {}).get("problems") or [])
        reason = error_message(doc, err) if rc not in (0, 3) else problems or "not verified"
    return page, verified, verdict, reason
