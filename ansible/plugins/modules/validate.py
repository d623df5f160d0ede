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
options:
  commit: {description: Commit the apply that waited for a reboot., type: bool, default: false}
extends_documentation_fragment: airlock.site.common
author: airlock maintainers
"""

EXAMPLES = r"""
- airlock.site.validate:
    root: /var/lib/airlock
    commit: true
"""

RETURN = r"""
verdict: {description: green, amber or skipped., type: str, returned: success}
result: {description: "airlock validate --json, whole.", type: dict, returned: always}
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.airlock.site.plugins.module_utils.airlock import COMMON_ARGS, error_message, run_airlock, run_args


def main():
    spec = dict(COMMON_ARGS)
    spec.update(commit=dict(type="bool", default=False))
    module = AnsibleModule(argument_spec=spec, supports_check_mode=True)
    if module.check_mode and module.params["commit"]:
        module.exit_json(changed=True, msg="would commit the pending apply")
    args = ["validate", "--root", module.params["root"]] + (["--commit"] if module.params["commit"] else []) + run_args(module)
    rc, doc, err = run_airlock(module, args)
    if rc != 0:
        module.fail_json(msg=error_message(doc, err), rc=rc, result=doc)
    module.exit_json(changed=module.params["commit"], verdict=(doc or {}).get("verdict", "skipped"), result=doc)


if __name__ == "__main__":
    main()
