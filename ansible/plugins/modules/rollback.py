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
  - Check mode reads C(airlock status) only and says what the rollback would go back to, or that there is nothing
    to go back to (C(changed=false)).
options:
  max_seconds: {description: Fail when the rollback took longer than this., type: float}
attributes:
  check_mode: {support: full, description: Reads the node's status; changes nothing.}
  diff_mode: {support: none}
version_added: "0.1.0"
requirements:
  - airlock on the node (C(binary)), as new as the collection.
extends_documentation_fragment: airlock.site.common
author: airlock maintainers
"""

EXAMPLES = r"""
- airlock.site.rollback:
    root: /var/lib/airlock
    max_seconds: 900
"""

RETURN = r"""
seconds: {description: How long the rollback took., type: float, returned: success, sample: 4.21}
previous: {description: "Check mode: the bundle a rollback would make current (id, name, version).", type: dict, returned: check mode}
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
        # What a rollback would go back to, read without the lock and without changing anything.
        rc, status, _ = run_airlock(module, ["status", "--root", module.params["root"]])
        previous = (status or {}).get("previous") if rc == 0 else None
        if not previous:
            module.exit_json(changed=False, msg="nothing to roll back to: no previous bundle under %s" % module.params["root"])
        module.exit_json(changed=True, msg="would roll back to %s %s" % (previous.get("name"), previous.get("version")), previous=previous)
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
