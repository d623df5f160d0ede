#!/usr/bin/python
# -*- coding: utf-8 -*-
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: status
short_description: This node's airlock root, read only
description:
  - Runs C(airlock status --json) (current, previous, retained bundles, history, rollbacks, a pending reboot).
version_added: "0.1.0"
requirements:
  - airlock on the node (C(binary)), as new as the collection.
attributes:
  check_mode: {support: full, description: "Reads only."}
  diff_mode: {support: none}
extends_documentation_fragment: airlock.site.common
author: airlock maintainers
"""

EXAMPLES = r"""
- airlock.site.status:
    root: /var/lib/airlock
  register: status
"""

RETURN = r"""
status:
  description: "airlock status --json, whole; null when the root holds nothing yet."
  type: dict
  returned: always
  sample: {current: {id: 3f9c2a1b7d4e5f60, name: rocm10-demo, version: 2026.11.1}, previous: {id: 9a0b1c2d3e4f5a6b, name: rocm10-demo, version: 2026.11.0}}
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.airlock.site.plugins.module_utils.airlock import COMMON_ARGS, run_airlock


MODULE_ARGS = dict(argument_spec=dict(COMMON_ARGS), supports_check_mode=True)


def main():
    run(AnsibleModule(**MODULE_ARGS))


def run(module):
    rc, doc, err = run_airlock(module, ["status", "--root", module.params["root"]])
    module.exit_json(changed=False, status=doc if rc == 0 else None)


if __name__ == "__main__":
    main()
