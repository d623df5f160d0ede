#!/usr/bin/python
# -*- coding: utf-8 -*-
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: evidence
short_description: A rollout run's evidence, gathered on each node in one call and written on the controller in one
description:
  - "On a node (no O(nodes)), reads in one call what the run's evidence holds of it, read only
    (C(changed=false)): its records whose C(run_id) is O(run_id), C(airlock status --json), and its approval
    pack (C(airlock report --root), when O(pack)). O(node) is returned as given (the playbook's facts
    about the node: tuple, wave, whether it changed or failed)."
  - On the controller (O(nodes) and O(dir)), writes every node's part under O(dir)C(/nodes/NODE/)
    (C(node.json), C(status.json), C(report.html), C(records/)) in one call, so that a fleet's evidence
    costs one module run per node, not one per file; a file that already holds the same text is left as it is,
    and C(changed) says whether any was written. Nothing is written in check mode.
version_added: "0.2.0"
options:
  pack: {description: Make the node's approval pack., type: bool, default: true}
  node: {description: What the playbook knows of the node (returned as given, written as C(node.json))., type: dict, default: {}}
  nodes: {description: "The gathered evidence of every node (each node's C(evidence) return value).", type: list, elements: dict}
  dir: {description: The run's evidence directory on the controller (C(EVIDENCE/runs/RUN_ID))., type: path}
  files:
    description: "With O(nodes): the run's own files to write under O(dir) in the same call, by relative path
      (C(run.json), C(plan.json), C(batches/NAME.json)), each with its text."
    type: dict
    default: {}
    version_added: "0.2.0"
extends_documentation_fragment: airlock.site.common
attributes:
  check_mode: {support: full, description: Gathering reads only; writing writes nothing in check mode.}
  diff_mode: {support: none}
notes:
  - O(root) is required by the common options; on the controller it is not read.
author: airlock maintainers
"""

EXAMPLES = r"""
- airlock.site.evidence:
    root: /var/lib/airlock
    run_id: "{{ airlock_run_id }}"
    node: {node: "{{ inventory_hostname }}"}
  register: gathered
- airlock.site.evidence:
    root: /var/lib/airlock
    dir: "{{ airlock_run_dir }}"
    nodes: "{{ ansible_play_hosts | map('extract', hostvars, 'gathered') | map(attribute='evidence') | list }}"
  run_once: true
  delegate_to: localhost
"""

RETURN = r"""
evidence:
  description: "On a node: {node, records: {FILE: TEXT}, status, page}."
  type: dict
  returned: on a node
  sample: {node: {node: n1}, records: {"20261204T101502.120Z-apply.json": "{...}"}, status: {current: {version: 2026.11.1}}, page: "<!doctype html>..."}
written: {description: "On the controller: the files written (those whose text changed).", type: list, elements: str, returned: on the controller, sample: ["/srv/evidence/runs/R1/nodes/n1/status.json"]}
"""

import json
import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.airlock.site.plugins.module_utils.airlock import COMMON_ARGS, run_airlock, run_plain


def gather(module):
    """Everything through airlock on the node (the records of this run come with its status),
    nothing read from the node's disk by this code: it runs on the controller (plugins/action)."""
    p = module.params
    args = ["status", "--root", p["root"]] + (["--run", p["run_id"]] if p["run_id"] else [])
    rc, status, _ = run_airlock(module, args)
    status = status if rc == 0 and isinstance(status, dict) else None
    records = (status or {}).pop("run_records", None) or {}
    page = None
    if p["pack"] and not module.check_mode:
        # The approval pack's HTML on stdout (`report` without `--out`); a page whose bundle did
        # not verify (exit 3) is evidence too.
        rc, out, _ = run_plain(module, ["report", "--root", p["root"]])
        page = out if out.lstrip().startswith("<!DOCTYPE html") else None
    evidence = dict(node=p["node"], records=records, status=status, page=page)
    module.exit_json(changed=False, evidence=evidence)


def write(module):
    p = module.params
    written = []
    if module.check_mode:
        module.exit_json(changed=False, written=written)
    os.makedirs(os.path.join(p["dir"], "batches"), exist_ok=True)
    for e in p["nodes"]:
        name = (e.get("node") or {}).get("node")
        if not name or "/" in name or name.startswith("."):
            module.fail_json(msg="a node's evidence names no node: %r" % (e.get("node"),))
        top = os.path.join(p["dir"], "nodes", name)
        os.makedirs(os.path.join(top, "records"), exist_ok=True)
        files = [("node.json", json.dumps(e.get("node"), indent=2, sort_keys=True) + "\n")]
        if e.get("status") is not None:
            files.append(("status.json", json.dumps(e["status"], indent=2, sort_keys=True) + "\n"))
        if e.get("page") is not None:
            files.append(("report.html", e["page"]))
        for record, text in sorted((e.get("records") or {}).items()):
            if "/" in record or record.startswith("."):
                module.fail_json(msg="%s: a record named %r" % (name, record))
            files.append((os.path.join("records", record), text))
        written += write_files(top, files)
    run_files = []
    for rel, text in sorted((p["files"] or {}).items()):
        parts = rel.split("/")
        if rel.startswith("/") or any(part in ("", ".", "..") for part in parts):
            module.fail_json(msg="a run file named %r: a relative path without . or .." % (rel,))
        os.makedirs(os.path.join(p["dir"], *parts[:-1]), exist_ok=True)
        run_files.append((rel, text))
    written += write_files(p["dir"], run_files)
    module.exit_json(changed=bool(written), written=written)


def write_files(top, files):
    """Each (relative path, text) under `top`, replaced whole; one that already holds the text
    is left as it is. The paths written."""
    written = []
    for rel, text in files:
        path = os.path.join(top, rel)
        if os.path.isfile(path):
            with open(path, "r", encoding="utf-8", errors="replace") as f:
                if f.read() == text:
                    continue
        tmp = path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
        written.append(path)
    return written


MODULE_ARGS = dict(
    argument_spec=dict(
        COMMON_ARGS,
        pack=dict(type="bool", default=True),
        node=dict(type="dict", default={}),
        nodes=dict(type="list", elements="dict"),
        dir=dict(type="path"),
        files=dict(type="dict", default={}),
    ),
    supports_check_mode=True,
    required_together=[("nodes", "dir")],
)


def main():
    run(AnsibleModule(**MODULE_ARGS))


def run(module):
    if module.params["nodes"] is not None:
        write(module)
    gather(module)


if __name__ == "__main__":
    main()
