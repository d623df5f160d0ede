#!/usr/bin/python
# -*- coding: utf-8 -*-
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: evidence
short_description: A node's evidence of a rollout run, as the text its airlock printed
description:
  - "Runs C(airlock status --run O(run_id) --json) on the node, read only (C(changed=false)), and returns what it
    printed as C(text), unparsed: its status and its records of the run (C(run_records)). The controller's
    C(airlock rollout evidence) checks and writes it (module C(airlock.site.rollout)); a node's answer that is not
    what airlock writes is refused for that node alone. The node's page is made on the controller."
version_added: "0.2.0"
extends_documentation_fragment: airlock.site.common
attributes:
  check_mode: {support: full, description: Reads only.}
  diff_mode: {support: none}
author: airlock maintainers
"""

EXAMPLES = r"""
- airlock.site.evidence:
    root: /var/lib/airlock
    run_id: "{{ airlock_run_id }}"
  register: airlock_evidence
"""

RETURN = r"""
text: {description: "What C(airlock status --run ID --json) printed; null when it failed.", type: str, returned: always}
msg: {description: Why the call failed., type: str, returned: on failure of the call}
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.airlock.site.plugins.module_utils.airlock import COMMON_ARGS, run_plain


def gather(module):
    """`airlock status --run ID --json` on the node, returned as the text it printed: nothing of
    it is parsed here. The controller's airlock checks it (`airlock rollout evidence`), so a
    node's answer can spoil only its own evidence."""
    p = module.params
    args = ["status", "--root", p["root"], "--json"] + (["--run", p["run_id"]] if p["run_id"] else [])
    rc, out, err = run_plain(module, args)
    if rc != 0:
        module.exit_json(changed=False, text=None, msg=(err or out or "airlock status failed")[-2000:])
    module.exit_json(changed=False, text=out)


MODULE_ARGS = dict(
    argument_spec=dict(COMMON_ARGS),
    supports_check_mode=True,
)


def main():
    run(AnsibleModule(**MODULE_ARGS))


def run(module):
    gather(module)


if __name__ == "__main__":
    main()
