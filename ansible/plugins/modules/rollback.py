#!/usr/bin/python
# -*- coding: utf-8 -*-
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: rollback
short_description: Make this node's previous bundle current again, packages and all
description:
  - Runs C(airlock rollback --json) and returns its measured duration and phases.
  - With max_seconds, a rollback that takes longer fails (an abort trigger of the upgrade guide).
options:
  max_seconds: {description: Fail when the rollback took longer than this., type: float}
extends_documentation_fragment: airlock.site.common
author: airlock maintainers
"""

EXAMPLES = r"""
- airlock.site.rollback:
    root: /var/lib/airlock
    max_seconds: 900
"""

RETURN = r"""
seconds: {description: How long the rollback took., type: float, returned: success}
phases: {description: Seconds per phase., type: dict, returned: success}
result: {description: "airlock rollback --json, whole.", type: dict, returned: always}
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.airlock.site.plugins.module_utils.airlock import COMMON_ARGS, error_message, run_airlock, run_args


def main():
    spec = dict(COMMON_ARGS)
    spec.update(max_seconds=dict(type="float"))
    module = AnsibleModule(argument_spec=spec, supports_check_mode=True)
    if module.check_mode:
        module.exit_json(changed=True, msg="would roll back")
    rc, doc, err = run_airlock(module, ["rollback", "--root", module.params["root"]] + run_args(module))
    if rc != 0:
        module.fail_json(msg=error_message(doc, err), rc=rc, result=doc)
    seconds = doc.get("seconds", 0.0)
    limit = module.params["max_seconds"]
    if limit is not None and seconds > limit:
        module.fail_json(msg="the rollback took %.2f s, more than the %.2f s allowed" % (seconds, limit), changed=True, seconds=seconds, result=doc)
    module.exit_json(changed=True, seconds=seconds, phases=doc.get("phases"), result=doc)


if __name__ == "__main__":
    main()
