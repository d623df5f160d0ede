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
from ansible_collections.airlock.site.plugins.module_utils.airlock import COMMON_ARGS, approval_pack, run_airlock

# The largest record read back (airlock's own bound, records::MAX_RECORD_BYTES).
MAX_RECORD_BYTES = 16 << 20


def gather(module):
    p = module.params
    records = {}
    folder = os.path.join(p["root"], "records")
    names = sorted(os.listdir(folder)) if os.path.isdir(folder) else []
    for name in names:
        path = os.path.join(folder, name)
        if not name.endswith(".json") or not os.path.isfile(path) or os.path.getsize(path) > MAX_RECORD_BYTES:
            continue
        with open(path, "r", encoding="utf-8") as f:
            text = f.read()
        try:
            run_id = json.loads(text).get("run_id")
        except ValueError:
            continue
        if p["run_id"] and run_id == p["run_id"]:
            records[name] = text
    rc, status, _ = run_airlock(module, ["status", "--root", p["root"]])
    page = approval_pack(module)[0] if p["pack"] and not module.check_mode else None
    evidence = dict(node=p["node"], records=records, status=status if rc == 0 else None, page=page)
    module.exit_json(changed=False, evidence=evidence)


def write(module):
    p = module.params
    written = []
    if module.check_mode:
        module.exit_json(changed=False, written=written)
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
    module.exit_json(changed=bool(written), written=written)


def main():
    spec = dict(COMMON_ARGS)
    spec.update(
        pack=dict(type="bool", default=True),
        node=dict(type="dict", default={}),
        nodes=dict(type="list", elements="dict"),
        dir=dict(type="path"),
    )
    module = AnsibleModule(argument_spec=spec, supports_check_mode=True, required_together=[("nodes", "dir")])
    if module.params["nodes"] is not None:
        write(module)
    gather(module)


if __name__ == "__main__":
    main()
