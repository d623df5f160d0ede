#!/usr/bin/python
# -*- coding: utf-8 -*-
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: rollout
short_description: The rollout's decisions, made by airlock on the controller
description:
  - "Runs C(airlock rollout STEP) (C(docs/fleet.md)) with one JSON document on its standard input: the run's
    parameters and, for O(nodes), what each node's registered results say (O(gather)). airlock decides — the plan,
    whether a wave starts, what a wave's results mean and what to roll back — journals what happened and prints its
    decision, which this module returns whole as C(decision). The module decides nothing itself."
  - C(resolve) runs where the task runs (a node: the source as the nodes see it) and changes nothing.
  - In check mode every step runs with C(--dry-run) and writes nothing.
version_added: "0.2.0"
options:
  step: {description: The step., type: str, required: true, choices: [resolve, plan, next, judge, note, evidence, end]}
  evidence: {description: "The evidence directory (C(airlock_evidence_dir)).", type: path}
  run_id: {description: The run's id., type: str}
  wave: {description: "C(judge): the wave; C(next): the wave, else the wave of the batch's first node.", type: str, default: ""}
  note_step: {description: "C(note): what the results are of.", type: str, choices: [adopt, stage, after, rollback]}
  max_seconds: {description: "C(note rollback): a longer rollback stops the run.", type: float}
  source: {description: "C(resolve): the source as the nodes see it.", type: str}
  release: {description: "C(resolve): a mirror's release instead of its current.", type: str}
  root: {description: "C(resolve): the node's site root; where its trust root has a C(promotion) role, a mirror's current is pinned only as its signed promotion names it.", type: path}
  input: {description: The step's parameters, passed to airlock as they are., type: dict, default: {}}
  nodes: {description: The nodes whose results are gathered into the input's C(nodes)., type: list, elements: str, default: []}
  gather:
    description: "For each of O(nodes), each key of the node's entry and the host variable it comes from
      (C(VAR) or C(VAR.ATTR)); an undefined variable is null."
    type: dict
    default: {}
  binary: {description: airlock on the host the task runs on., type: str, default: airlock}
  environment: {description: Environment variables for the call., type: dict, default: {}}
attributes:
  check_mode: {support: full, description: "Every step with C(--dry-run): decided and printed, nothing written."}
  diff_mode: {support: none}
author: airlock maintainers
"""

EXAMPLES = r"""
- airlock.site.rollout:
    step: judge
    evidence: /srv/evidence
    run_id: "{{ airlock_run_id }}"
    wave: "{{ airlock_next.decision.wave }}"
    nodes: "{{ ansible_play_batch }}"
    gather: {apply: airlock_applied, drain: airlock_slurm}
  run_once: true
  delegate_to: localhost
  register: airlock_judged
"""

RETURN = r"""
decision: {description: "What airlock printed: the plan, the wave's go or stop, the judgement, what was written.", type: dict, returned: always}
"""

import json
import os

from ansible_collections.airlock.site.plugins.module_utils.airlock import error_message

MODULE_ARGS = dict(
    argument_spec=dict(
        step=dict(type="str", required=True, choices=["resolve", "plan", "next", "judge", "note", "evidence", "end"]),
        evidence=dict(type="path"),
        run_id=dict(type="str"),
        wave=dict(type="str", default=""),
        note_step=dict(type="str", choices=["adopt", "stage", "after", "rollback"]),
        max_seconds=dict(type="float"),
        source=dict(type="str"),
        release=dict(type="str"),
        root=dict(type="path"),
        input=dict(type="dict", default={}),
        nodes=dict(type="list", elements="str", default=[]),
        gather=dict(type="dict", default={}),
        binary=dict(type="str", default="airlock"),
        environment=dict(type="dict", default={}),
    ),
    supports_check_mode=True,
    required_if=[("step", s, ["evidence", "run_id"]) for s in ("plan", "next", "judge", "note", "evidence", "end")]
    + [("step", "resolve", ["source"]), ("step", "note", ["note_step"])],
)


def plain(value):
    """A host variable as JSON takes it (Ansible's lazy containers and its unsafe text)."""
    return json.loads(json.dumps(value, default=str))


# The fields of a task's result airlock reads of a wave (`fleet::results::TaskResult`), and of
# `result` (an apply's whole answer) only its error's verdict: `next`, `judge` and `note` take a
# wave in one document, and each apply's answer with its validation evidence (~30 KB) would
# bound a batch at about 2,000 nodes; the rest stays in Ansible's registered results.
RESULT_FIELDS = ("changed", "failed", "skipped", "unreachable", "msg", "id", "verdict", "pending_reboot",
                 "record", "seconds", "held", "drained", "waited", "reason")


def compact(value):
    """A task's result with only what airlock reads of it (anything else as it is)."""
    if not isinstance(value, dict):
        return value
    out = dict((k, value[k]) for k in RESULT_FIELDS if k in value)
    result = value.get("result")
    error = result.get("error") if isinstance(result, dict) else None
    if isinstance(error, dict) and "verdict" in error:
        out["result"] = dict(error=dict(verdict=error["verdict"]))
    elif "result" in value and not isinstance(result, dict):
        out["result"] = result
    return out


def gathered(module):
    """The input's `nodes`: for each node, each key from the host variable `gather` names (a
    wave's task results compacted to what airlock reads of them)."""
    wave = module.params["step"] in ("next", "judge", "note")
    hostvars = getattr(module, "task_vars", {}).get("hostvars", {})
    nodes = []
    for name in module.params["nodes"]:
        facts = hostvars.get(name, {}) if hasattr(hostvars, "get") else {}
        entry = dict(node=name)
        for key, var in sorted(module.params["gather"].items()):
            head, _, attr = str(var).partition(".")
            value = facts.get(head) if hasattr(facts, "get") else None
            if attr and isinstance(value, dict):
                value = value.get(attr)
            elif attr:
                value = None
            entry[key] = compact(plain(value)) if wave else plain(value)
        nodes.append(entry)
    return nodes


def run(module):
    p = module.params
    if p["step"] == "resolve":
        args = ["rollout", "resolve", p["source"]] + (["--release", p["release"]] if p["release"] else [])
        args += ["--root", p["root"]] if p["root"] else []
        data = None
    else:
        args = ["rollout", p["step"], "--evidence", p["evidence"], "--run", p["run_id"]]
        if p["step"] in ("next", "judge"):
            args += ["--wave", p["wave"]]
        if p["step"] == "note":
            args += ["--step", p["note_step"]]
            if p["max_seconds"]:
                args += ["--max-seconds", str(p["max_seconds"])]
        if module.check_mode:
            args.append("--dry-run")
        doc = dict(plain(p["input"]))
        if p["nodes"] or p["gather"]:
            doc["nodes"] = gathered(module)
        if p["step"] == "evidence":
            decision = evidence_in_parts(module, args, doc)
            writes = bool(decision.get("written"))
            module.exit_json(changed=writes and not module.check_mode, decision=decision)
        data = json.dumps(doc)
    decision = call(module, args, data)
    writes = p["step"] in ("plan", "end") or (p["step"] == "evidence" and bool(decision.get("written")))
    module.exit_json(changed=writes and not module.check_mode, decision=decision)


def call(module, args, data):
    """`airlock ARGS --json` with `data` on its standard input: its JSON answer, or the task fails."""
    p = module.params
    env = dict((str(k), str(v)) for k, v in p["environment"].items())
    rc, out, err = module.run_command([p["binary"]] + args + ["--json"], environ_update=env, data=data)
    try:
        decision = json.loads(out) if out.strip() else None
    except ValueError:
        decision = None
    if rc != 0 or not isinstance(decision, dict):
        module.fail_json(msg=error_message(decision, err) if rc != 0 else "airlock printed no JSON document", rc=rc)
    return decision


# The nodes' evidence goes to airlock in parts of at most this many bytes: a node's status and
# records are tens of KB (each record holds its validation evidence), so 1,024 nodes passed
# airlock's 64 MiB bound on one input; each part is checked and written on its own.
EVIDENCE_PART_BYTES = 8 << 20


def part_bytes():
    """The part size: `AIRLOCK_EVIDENCE_PART_BYTES` on the controller, else 8 MiB."""
    try:
        return max(1, int(os.environ.get("AIRLOCK_EVIDENCE_PART_BYTES", EVIDENCE_PART_BYTES)))
    except ValueError:
        return EVIDENCE_PART_BYTES


def evidence_in_parts(module, args, doc):
    """`rollout evidence` once per part of the nodes, its answers joined."""
    joined = dict(written=[], refused=[])
    limit = part_bytes()
    part, size = [], 0
    parts = []
    for node in doc.get("nodes", []):
        text = json.dumps(node)
        if part and size + len(text) > limit:
            parts.append(part)
            part, size = [], 0
        part.append(node)
        size += len(text) + 2
    parts.append(part)
    for nodes in parts:
        decision = call(module, args, json.dumps(dict(doc, nodes=nodes)))
        for key in joined:
            joined[key].extend(decision.get(key) or [])
    return joined


def main():
    from ansible.module_utils.basic import AnsibleModule

    run(AnsibleModule(**MODULE_ARGS))


if __name__ == "__main__":
    main()
