#!/usr/bin/python
# -*- coding: utf-8 -*-
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: validate
short_description: Validate this node's stack against its current bundle, or commit a pending apply
description:
  - Runs C(airlock validate --json); with commit, C(airlock validate --commit --json) after the reboot
    an apply waited for (commits the bundle, or puts the packages back and fails).
  - Check mode runs nothing (the checks are real work on the node and a validation writes a record).
  - C(changed) is true when a record was written on the node.
options:
  commit: {description: Commit the apply that waited for a reboot., type: bool, default: false}
attributes:
  check_mode: {support: partial, description: Nothing runs; the result says what would.}
  diff_mode: {support: none}
version_added: "0.1.0"
requirements:
  - airlock on the node (C(binary)), as new as the collection.
extends_documentation_fragment: airlock.site.common
author: airlock maintainers
"""

EXAMPLES = r"""
- airlock.site.validate:
    root: /var/lib/airlock
    commit: true
"""

RETURN = r"""
verdict: {description: green, amber or skipped., type: str, returned: success, sample: green}
record: {description: The record written on the node., type: str, returned: success, sample: /var/lib/airlock/records/20261205T070000.000Z-validate.json}
result: {description: "airlock validate --json, whole.", type: dict, returned: always, sample: {verdict: green, summary: "green: 1 row matched"}}
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.airlock.site.plugins.module_utils.airlock import COMMON_ARGS, error_message, run_airlock, run_args


MODULE_ARGS = dict(argument_spec=dict(COMMON_ARGS, commit=dict(type="bool", default=False)), supports_check_mode=True)


def main():
    run(AnsibleModule(**MODULE_ARGS))


def run(module):
    # Check mode runs nothing: validating runs the bundle's checks and writes a record.
    if module.check_mode and module.params["commit"]:
        module.exit_json(changed=True, msg="would commit the pending apply")
    if module.check_mode:
        module.exit_json(changed=False, msg="would validate the current bundle (its checks are not run in check mode)")
    args = ["validate", "--root", module.params["root"]] + (["--commit"] if module.params["commit"] else []) + run_args(module)
    rc, doc, err = run_airlock(module, args)
    if rc != 0:
        module.fail_json(msg=error_message(doc, err), rc=rc, result=doc)
    # A validation writes its record on the node: that is a change.
    wrote = module.params["commit"] or bool((doc or {}).get("record"))
    module.exit_json(changed=wrote, verdict=(doc or {}).get("verdict", "skipped"), record=(doc or {}).get("record"), result=doc)


if __name__ == "__main__":
    main()
