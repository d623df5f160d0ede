#!/usr/bin/python
# -*- coding: utf-8 -*-
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: slurm
short_description: A node in Slurm around its airlock change, and the capacity Slurm reports
description:
  - "Runs C(scontrol) and C(sinfo) (Slurm's own clients, as a Slurm operator) for the rollout role
    (C(airlock_scheduler: slurm)). A node is the rollout's only when its reason is exactly one of O(ours) (the
    run's drain reason, and an earlier run's hold the plan hands over); a node drained, down, failed, in
    maintenance or reserved for any other reason is someone else's and is never touched."
  - C(drain) drains the node with O(reason) and waits until its running jobs have ended (state C(drained)), up to
    O(timeout) seconds; past that the node is resumed as it was and the module fails, nothing changed. An admin's
    node is left alone (C(held=true)).
  - C(resume) returns a node airlock drained to service (C(State=RESUME)); an admin's node is never resumed.
  - C(hold) keeps a node airlock drained out of service with O(reason), naming the node's last record under
    O(root) (a red node).
  - C(reboot) reboots the node through Slurm once it is idle (C(scontrol reboot ASAP nextstate=DOWN)) and waits,
    up to O(timeout) seconds, until slurmd registers again after it.
  - C(capacity) reads every node of the partitions O(nodes) belong to (C(sinfo)) and returns them as C(rows),
    each with its node, partition, state and reason; C(airlock rollout next) computes the capacity rule from them.
  - C(states) reads every node Slurm lists in one C(sinfo --Node) call and returns them as C(rows) (node,
    partition, state, reason); the rollout's probe play reads the whole run's states once with it, and
    C(airlock rollout plan) takes each node's from them.
  - In check mode C(state), C(states) and C(capacity) read as usual; the other actions say what they would do.
options:
  action: {description: What to do., type: str, required: true, choices: [state, states, drain, resume, hold, reboot, capacity]}
  node: {description: The node's Slurm name (NodeName)., type: str}
  nodes: {description: For capacity, the run's nodes (their Slurm names); their partitions are counted., type: list, elements: str, default: []}
  batch: {description: For capacity, the batch about to change (Slurm names)., type: list, elements: str, default: []}
  per_node: {description: For capacity, the units one node counts for., type: int, default: 1}
  demand: {description: For capacity, the units the workload needs., type: int, default: 0}
  headroom: {description: For capacity, the units kept spare., type: int, default: 0}
  reason: {description: The reason Slurm shows (C(airlock ...))., type: str, default: airlock}
  ours: {description: "Reasons that make an out-of-service node the rollout's (exact).", type: list, elements: str, default: []}
  timeout: {description: Seconds to wait for the jobs to end (drain) or the node to come back (reboot)., type: int, default: 3600}
  poll: {description: Seconds between two looks at the node's state., type: float, default: 2}
  root: {description: "For hold: the node's airlock root, whose last record the reason names.", type: path}
  environment: {description: "Variables for scontrol and sinfo (C(SLURM_CONF))." , type: dict, default: {}}
version_added: "0.2.0"
requirements:
  - airlock on the node (C(binary)), as new as the collection.
  - Slurm's clients (C(scontrol), C(sinfo)) on the node, run as a Slurm operator (root).
attributes:
  check_mode: {support: full, description: "state and capacity read; drain, resume, hold and reboot only say what they would do."}
  diff_mode: {support: none}
author: airlock maintainers
"""

EXAMPLES = r"""
- airlock.site.slurm:
    action: drain
    node: gpu-a01
    reason: airlock rocm10 2026.11.1 run 20261205T101500Z-3f9c2a
    timeout: 3600
"""

RETURN = r"""
state: {description: "The node's state as sinfo names it (idle, drained, draining, down, ...).", type: str, returned: node actions, sample: drained}
reason: {description: The node's reason before the action., type: str, returned: node actions, sample: "bad DIMM, ticket 4711"}
held: {description: The node is an admin's (drained, down or reserved for another reason) and was left alone., type: bool, returned: drain, sample: false}
drained: {description: airlock drained the node in this call., type: bool, returned: drain, sample: true}
waited: {description: Seconds spent waiting for the jobs to end or the node to return., type: float, returned: drain, reboot, sample: 12.4}
total: {description: "capacity: every node of the partitions.", type: int, returned: capacity, sample: 64}
reserved: {description: "capacity: nodes out of service for a reason not airlock's.", type: int, returned: capacity, sample: 2}
reserved_nodes:
  description: "capacity: those nodes, with state and reason."
  type: list
  elements: dict
  returned: capacity
  sample: [{node: gpu17, state: drained, reason: "bad DIMM, ticket 4711"}]
airlock_nodes: {description: "capacity: nodes airlock has drained now (in change, or red and held).", type: list, elements: str, returned: capacity, sample: [gpu03]}
partitions: {description: "capacity: the partitions counted.", type: list, elements: str, returned: capacity, sample: [gpu]}
rows:
  description: "capacity: every node of the partitions, as sinfo lists it (node, partition, state, reason); states: every node."
  type: list
  elements: dict
  returned: capacity, states
  sample: [{node: gpu17, partition: gpu, state: drained, reason: "bad DIMM, ticket 4711"}]
"""

import os
import time

from ansible.module_utils.basic import AnsibleModule

# States a node is out of service in (sinfo's %T words; flags after `+` and marks like `*` dropped).
OUT = ("drained", "draining", "drain", "down", "fail", "failing", "maint", "reserved", "inval", "future")


def command(module, argv):
    env = dict((str(k), str(v)) for k, v in module.params["environment"].items())
    rc, out, err = module.run_command(argv, environ_update=env)
    if rc != 0:
        module.fail_json(msg="%s failed: %s" % (" ".join(argv[:3]), (err or out).strip()), rc=rc, cmd=argv)
    return out


def word(state):
    """`drained*` -> drained; `idle+drain` -> idle+drain (both parts kept)."""
    return state.strip().rstrip("*~#!%$@^-").lower()


def nodes_of(module, args):
    """sinfo one line per node and partition: (name, partition, state, reason)."""
    out = command(module, ["sinfo", "--noheader", "--Node", "--format", "%N|%P|%T|%E"] + args)
    rows = []
    for line in out.splitlines():
        parts = line.split("|", 3)
        if len(parts) == 4:
            reason = parts[3].strip()
            rows.append((parts[0].strip(), parts[1].strip().rstrip("*"), word(parts[2]), "" if reason == "none" else reason))
    return rows


def info(module, node):
    rows = nodes_of(module, ["--nodes", node])
    if not rows:
        module.fail_json(msg="Slurm knows no node %s (sinfo --nodes %s)" % (node, node))
    _, _, state, reason = rows[0]
    return state, reason


def ours(module, reason):
    """The rollout's own: exactly one of the reasons the plan named (never a prefix)."""
    return reason in (module.params["ours"] or [])


def out_of_service(state):
    return any(p in OUT for p in state.split("+"))


def update(module, node, *fields):
    command(module, ["scontrol", "update", "NodeName=%s" % node] + list(fields))


def drain(module, node):
    p = module.params
    state, reason = info(module, node)
    if out_of_service(state) and not ours(module, reason) and reason != p["reason"]:
        module.exit_json(changed=False, held=True, drained=False, state=state, reason=reason,
                         msg="%s is %s (%s): someone else's, left alone" % (node, state, reason or "no reason"))
    if module.check_mode:
        module.exit_json(changed=True, held=False, drained=False, state=state, reason=reason, msg="would drain %s" % node)
    update(module, node, "State=DRAIN", "Reason=%s" % p["reason"])
    start = time.time()
    while True:
        now_state, _ = info(module, node)
        if "drained" in now_state.split("+"):
            break
        if time.time() - start > p["timeout"]:
            update(module, node, "State=RESUME")
            module.fail_json(msg="%s still runs jobs after %d s (%s): resumed, nothing changed" % (node, p["timeout"], now_state))
        time.sleep(p["poll"])
    module.exit_json(changed=True, held=False, drained=True, state=state, reason=reason, waited=round(time.time() - start, 2))


def last_record(module, root):
    """The newest record's name under the node's ROOT/records (read on the node: this module's
    action plugin runs it on the controller, its commands over the task's connection)."""
    rc, out, _ = module.run_command(["ls", "-1", "--", os.path.join(root, "records")])
    names = sorted(n for n in out.splitlines() if n.endswith(".json")) if rc == 0 else []
    return names[-1] if names else None


def capacity(module):
    p = module.params
    rows = nodes_of(module, ["--nodes", ",".join(p["nodes"])]) if p["nodes"] else nodes_of(module, [])
    partitions = sorted(set(r[1] for r in rows))
    every = nodes_of(module, ["--partition", ",".join(partitions)]) if partitions else []
    seen = {}
    for name, _, state, reason in every:
        seen.setdefault(name, (state, reason))
    rows = [dict(node=n, partition=part, state=s, reason=r) for n, part, s, r in every]
    module.exit_json(changed=False, rows=rows, partitions=partitions)


MODULE_ARGS = dict(
    argument_spec=dict(
        action=dict(type="str", required=True, choices=["state", "states", "drain", "resume", "hold", "reboot", "capacity"]),
        node=dict(type="str"),
        nodes=dict(type="list", elements="str", default=[]),
        batch=dict(type="list", elements="str", default=[]),
        per_node=dict(type="int", default=1),
        demand=dict(type="int", default=0),
        headroom=dict(type="int", default=0),
        reason=dict(type="str", default="airlock"),
        ours=dict(type="list", elements="str", default=[]),
        timeout=dict(type="int", default=3600),
        poll=dict(type="float", default=2),
        root=dict(type="path"),
        environment=dict(type="dict", default={}),
    ),
    required_if=[("action", a, ["node"]) for a in ("state", "drain", "resume", "hold", "reboot")],
    supports_check_mode=True,
)


def main():
    run(AnsibleModule(**MODULE_ARGS))


def run(module):
    p = module.params
    if p["action"] == "capacity":
        capacity(module)
    if p["action"] == "states":
        rows = [dict(node=n, partition=part, state=st, reason=r) for n, part, st, r in nodes_of(module, [])]
        module.exit_json(changed=False, rows=rows)
    node = p["node"]
    if p["action"] == "state":
        state, reason = info(module, node)
        module.exit_json(changed=False, state=state, reason=reason, ours=ours(module, reason))
    if p["action"] == "drain":
        drain(module, node)
    state, reason = info(module, node)
    if not ours(module, reason):
        module.exit_json(changed=False, state=state, reason=reason, msg="%s is not the rollout's (%s): left alone" % (node, reason))
    if module.check_mode:
        module.exit_json(changed=True, state=state, reason=reason, msg="would %s %s" % (p["action"], node))
    if p["action"] == "resume":
        update(module, node, "State=RESUME")
        module.exit_json(changed=True, state=state, reason=reason)
    if p["action"] == "hold":
        record = last_record(module, p["root"]) if p["root"] else None
        text = p["reason"] + (" record %s" % record if record else "")
        update(module, node, "State=DRAIN", "Reason=%s" % text)
        module.exit_json(changed=True, state=state, reason=text)
    # reboot: once idle, through slurmd's RebootProgram; back when slurmd registers again.
    command(module, ["scontrol", "reboot", "ASAP", "nextstate=DOWN", "reason=%s" % p["reason"], node])
    start = time.time()
    seen_reboot = False
    while time.time() - start <= p["timeout"]:
        now_state, _ = info(module, node)
        rebooting = any(f in now_state for f in ("reboot", "powering"))
        seen_reboot = seen_reboot or rebooting
        if seen_reboot and not rebooting and "not_responding" not in now_state:
            module.exit_json(changed=True, state=now_state, reason=reason, waited=round(time.time() - start, 2))
        time.sleep(p["poll"])
    module.fail_json(msg="%s did not come back within %d s of its reboot" % (node, p["timeout"]))


if __name__ == "__main__":
    main()
