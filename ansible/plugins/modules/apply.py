#!/usr/bin/python
# -*- coding: utf-8 -*-
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: apply
short_description: Apply an airlock bundle on this node, judge the new stack, commit or restore
description:
  - Runs C(airlock apply SOURCE --json). airlock verifies the bundle, installs its packages with the
    host's package manager, validates the stack then installed, and commits it or puts the host's
    packages back (then this module fails with the red verdict).
  - Idempotent, no change when the node already runs that bundle and no package would change
    (C(airlock apply --unless-current), one airlock call; nothing validated or recorded again).
  - Check mode is C(--dry-run), diff mode shows the package changes.
options:
  source: {description: "A bundle path, oci:// reference, or a mirror's root URL, as the node sees it.", type: str, required: true}
  trust: {description: Public key paths on the node., type: list, elements: path, default: []}
  threshold: {description: Distinct trusted signatures needed., type: int}
  accept_amber: {description: Commit an amber stack; needs reason., type: bool, default: false}
  accept_unrestorable: {description: Change packages that could not be put back; needs reason., type: bool, default: false}
  reason: {description: Why an acceptance holds (kept in the record)., type: str}
  owner: {description: Who owns an amber acceptance (kept in the record)., type: str}
  expires: {description: "Until when an amber acceptance holds: a date (2027-03-31) or a duration (90d).", type: str}
  release:
    description:
      - A mirror's release by version or bundle id (C(--release)), instead of the mirror's current.
      - The rollout pins the release it rolls out, so canaries take a candidate while the mirror's current stays the qualified one.
    type: str
  adopt:
    description:
      - The node already runs what the bundle pins (a baseline from C(airlock freeze)); C(--adopt) checks each package's
        installed version and records the bundle as the node's current without calling the package manager.
      - Unchanged when the node's current bundle is already this one; fails (airlock exit 3) naming each difference.
    type: bool
    default: false
  download_only:
    description:
      - Fetch and verify the release's packages into the node's root ahead of the window (C(--download-only)); nothing is installed or activated.
      - The later apply of that release fetches nothing.
    type: bool
    default: false
  brief:
    description:
      - Return what a rollout reads of a change (C(id), C(verdict), C(pending_reboot), C(packages), C(record),
        C(transfer), C(seconds)) without C(result), airlock's whole answer (its validation's evidence, tens of
        kilobytes), which the node's record keeps. A controller keeps every node's registered result in memory for
        the whole run, and Ansible copies each result for every task after it.
      - A failure's C(result) (airlock's error document, with the verdict that refused) is returned either way.
    type: bool
    default: false
    version_added: "0.2.0"
version_added: "0.1.0"
requirements:
  - airlock on the node (C(binary)), as new as the collection.
attributes:
  check_mode: {support: full, description: "C(airlock apply --dry-run): verified and simulated, nothing changed."}
  diff_mode: {support: full, description: "The package changes, before and after."}
extends_documentation_fragment: airlock.site.common
author: airlock maintainers
"""

EXAMPLES = r"""
- airlock.site.apply:
    source: http://mirror.site/airlock/
    trust: [/etc/airlock/build.pub]
    root: /var/lib/airlock
  register: applied
"""

RETURN = r"""
id: {description: The bundle id., type: str, returned: success, sample: 3f9c2a1b7d4e5f60}
verdict: {description: "green, amber or skipped; the failure message says red.", type: str, returned: success, sample: green}
pending_reboot:
  description: "Why the node waits for a reboot (airlock exit 5), or null."
  type: str
  returned: success
  sample: "/var/run/reboot-required: linux-image-6.8.0-51-generic"
packages:
  description: Installed, upgraded, downgraded and removed packages.
  type: dict
  returned: success
  sample: {upgraded: [{name: rocm-core, before: 6.4.1-1, after: 7.0.0-1}], installed: [{name: hipblaslt, after: 1.0.0-1}]}
record: {description: The record airlock wrote on the node., type: str, returned: success, sample: /var/lib/airlock/records/20261205T101731.042Z-apply.json}
transfer:
  description: "From a mirror: package files and bytes fetched, and those taken from what the node held."
  type: dict
  returned: success
  sample: {fetched: {files: 3, bytes: 41943040}, reused: {files: 120, bytes: 2147483648}}
unchanged: {description: "The node already ran that bundle and no package would change: nothing was done.", type: bool, returned: success}
result:
  description: "airlock apply --json, whole."
  type: dict
  returned: always, but on success not with C(brief)
  sample: {id: 3f9c2a1b7d4e5f60, version: 2026.11.1}
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.airlock.site.plugins.module_utils.airlock import (
    COMMON_ARGS,
    EXIT_PENDING_REBOOT,
    error_message,
    run_airlock,
    run_args,
    trust_args,
)


def lines(changes, side):
    out = []
    for kind in ["installed", "upgraded", "downgraded", "removed"]:
        for c in changes.get(kind, []):
            if c.get(side):
                out.append("%s %s\n" % (c["name"], c[side]))
    return "".join(sorted(out))


def diff_of(answer):
    """The package changes of airlock's answer (an apply's or a dry run's) as before/after lines."""
    changes = (answer or {}).get("packages") if isinstance(answer, dict) else None
    changes = changes if isinstance(changes, dict) else {}
    return dict(before=lines(changes, "before"), after=lines(changes, "after"))


def run_changing(module, args, would):
    """A call that changes the node: in check mode only `would` is said; a failure fails the task."""
    if module.check_mode:
        module.exit_json(changed=True, msg=would)
    rc, done, err = run_airlock(module, args)
    if rc != 0:
        module.fail_json(msg=error_message(done, err), rc=rc, result=done)
    return done


def stage(module, args):
    """--download-only: fetch and verify ahead; in check mode, nothing is fetched."""
    done = run_changing(module, args, "would fetch the release's packages ahead")
    transfer = done.get("transfer") or {}
    fetched = (transfer.get("fetched") or {}).get("files", 0)
    module.exit_json(
        changed=True,
        id=done.get("id"),
        staged=done.get("staged"),
        transfer=transfer,
        record=done.get("record"),
        msg="staged %s %s: %d file(s) fetched" % (done.get("name"), done.get("version"), fetched),
        result=done,
    )


def adopt(module, args):
    """--adopt: record the stack the node runs as its current bundle; nothing installed."""
    done = run_changing(module, args, "would adopt the baseline")
    module.exit_json(
        changed=True,
        id=done.get("id"),
        record=done.get("record"),
        msg="adopted %s %s: the node's own stack, no package changed" % (done.get("name"), done.get("version")),
        result=done,
    )


MODULE_ARGS = dict(
    argument_spec=dict(
        COMMON_ARGS,
        source=dict(type="str", required=True),
        trust=dict(type="list", elements="path", default=[]),
        threshold=dict(type="int"),
        accept_amber=dict(type="bool", default=False),
        accept_unrestorable=dict(type="bool", default=False),
        reason=dict(type="str"),
        owner=dict(type="str"),
        expires=dict(type="str"),
        release=dict(type="str"),
        download_only=dict(type="bool", default=False),
        adopt=dict(type="bool", default=False),
        brief=dict(type="bool", default=False),
    ),
    supports_check_mode=True,
    required_if=[("accept_amber", True, ["reason"]), ("accept_unrestorable", True, ["reason"])],
)


def main():
    run(AnsibleModule(**MODULE_ARGS))


def run(module):
    p = module.params
    args = ["apply", p["source"], "--root", p["root"]] + trust_args(p["trust"], p["threshold"]) + run_args(module)
    if p["accept_amber"]:
        args.append("--accept-amber")
        if p["owner"]:
            args += ["--owner", p["owner"]]
        if p["expires"]:
            args += ["--expires", p["expires"]]
    if p["accept_unrestorable"]:
        args.append("--accept-unrestorable")
    if p["reason"]:
        args += ["--reason", p["reason"]]
    if p["release"]:
        args += ["--release", p["release"]]
    if p["download_only"]:
        stage(module, args + ["--download-only"])
    if p["adopt"]:
        adopt(module, args + ["--adopt"])
    # One airlock call: a node that already runs the bundle, with nothing to change, is left as
    # it is (`--unless-current`); the diff is what the call changed (or, in check mode, would).
    args.append("--unless-current")
    if module.check_mode:
        rc, plan, err = run_airlock(module, args + ["--dry-run"])
        if rc != 0 or not isinstance(plan, dict):
            module.fail_json(msg=error_message(plan, err), rc=rc, result=plan)
        what = "%s %s" % (plan.get("name"), plan.get("version"))
        if plan.get("unchanged"):
            module.exit_json(changed=False, id=plan.get("id"), unchanged=True, msg="already runs " + what, result=plan)
        module.exit_json(changed=True, id=plan.get("id"), diff=diff_of(plan), msg="would apply " + what, result=plan)
    rc, done, err = run_airlock(module, args)
    if rc not in (0, EXIT_PENDING_REBOOT) or not isinstance(done, dict):
        module.fail_json(msg=error_message(done, err), rc=rc, result=done, diff=diff_of(done))
    answer = {} if p["brief"] else dict(result=done)
    if done.get("unchanged"):
        what = "%s %s" % (done.get("name"), done.get("version"))
        module.exit_json(changed=False, id=done.get("id"), unchanged=True, msg="already runs " + what, **answer)
    verdict = (done.get("validation") or {}).get("verdict", "skipped")
    module.exit_json(
        changed=True,
        id=done.get("id"),
        verdict=verdict,
        pending_reboot=done.get("pending_reboot"),
        packages=done.get("packages"),
        record=done.get("record"),
        transfer=done.get("transfer"),
        seconds=done.get("seconds"),
        diff=diff_of(done),
        **answer
    )


if __name__ == "__main__":
    main()
