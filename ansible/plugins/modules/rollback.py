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
  - "With O(to), idempotent: the node is rolled back only when that bundle is its previous; when it is already
    current nothing is done (C(changed=false)); any other id fails, naming the node's current and previous.
    Without O(to) every run rolls back, and a rollback's previous is the bundle it left: a second run goes
    forward again."
options:
  max_seconds: {description: Fail when the rollback took longer than this., type: float}
  to:
    description: "The bundle id (C(bundles/ID), as C(airlock status) and the apply module return it) the node must
      end on."
    type: str
    version_added: "0.2.0"
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

# Back to the bundle the node ran before this change, however often the play runs.
- airlock.site.rollback:
    root: /var/lib/airlock
    to: "{{ before.status.current.id }}"
"""

RETURN = r"""
seconds: {description: How long the rollback took., type: float, returned: changed, sample: 4.21}
previous:
  description: "Check mode: the bundle a rollback would make current (id, name, version)."
  type: dict
  returned: check mode
  sample: {id: 3f9c2a1b7d4e5f60, name: rocm10-demo, version: 2026.11.0}
phases: {description: Seconds per phase., type: dict, returned: changed, sample: {verify: 0.41, packages: 3.2, validate: 0.5}}
result:
  description: "airlock rollback --json, whole."
  type: dict
  returned: changed
  sample: {id: 3f9c2a1b7d4e5f60, name: rocm10-demo, version: 2026.11.0, seconds: 4.21}
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.airlock.site.plugins.module_utils.airlock import COMMON_ARGS, error_message, run_airlock, run_args


def bundle_id(entry):
    return (entry or {}).get("id")


MODULE_ARGS = dict(argument_spec=dict(COMMON_ARGS, max_seconds=dict(type="float"), to=dict(type="str")), supports_check_mode=True)


def main():
    run(AnsibleModule(**MODULE_ARGS))


def run(module):
    to = module.params["to"]
    if module.check_mode or to:
        # What a rollback would go back to, read without the lock and without changing anything.
        rc, status, err = run_airlock(module, ["status", "--root", module.params["root"]])
        if rc != 0 and to:
            module.fail_json(msg=error_message(status, err), rc=rc)
        status = (status or {}) if rc == 0 else {}
        previous = status.get("previous")
        if to and bundle_id(status.get("current")) == to:
            module.exit_json(changed=False, msg="bundles/%s is current already" % to)
        if to and bundle_id(previous) != to:
            module.fail_json(
                msg="cannot roll back to bundles/%s: it is not this node's previous (current: %s, previous: %s)"
                % (to, bundle_id(status.get("current")), bundle_id(previous))
            )
        if module.check_mode and not previous:
            module.exit_json(changed=False, msg="nothing to roll back to: no previous bundle under %s" % module.params["root"])
        if module.check_mode:
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
