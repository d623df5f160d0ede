#!/usr/bin/python
# -*- coding: utf-8 -*-
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: report
short_description: This node's approval pack, read only
description:
  - Runs C(airlock report --root ROOT --out PAGE --json) into a private temporary file and returns the page.
    airlock verifies the node's active bundle again (or, on a node fed from a mirror, the part of it
    the node keeps) and shows its records and validation evidence.
  - Never fails the task; a page whose bundle did not verify (airlock exit 3) comes back with
    C(verified=false), and a root with nothing current comes back without a page and with the reason.
version_added: "0.1.0"
requirements:
  - airlock on the node (C(binary)), as new as the collection.
attributes:
  check_mode: {support: full, description: "Reads only (the page is made in a private temporary file)."}
  diff_mode: {support: none}
extends_documentation_fragment: airlock.site.common
author: airlock maintainers
"""

EXAMPLES = r"""
- airlock.site.report:
    root: /var/lib/airlock
  register: pack
"""

RETURN = r"""
page: {description: "The HTML page, or null when airlock wrote none.", type: str, returned: always, sample: "<!doctype html>..."}
verified: {description: Whether the active bundle and its tree verified again., type: bool, returned: always, sample: true}
verdict: {description: "The validation verdict the page leads with (green, amber, red), or null.", type: str, returned: always, sample: green}
reason: {description: Why there is no page, or why it did not verify., type: str, returned: when not verified, sample: "no current bundle under /var/lib/airlock"}
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.airlock.site.plugins.module_utils.airlock import COMMON_ARGS, approval_pack


def main():
    module = AnsibleModule(argument_spec=dict(COMMON_ARGS), supports_check_mode=True)
    page, verified, verdict, reason = approval_pack(module)
    result = dict(changed=False, page=page, verified=verified, verdict=verdict)
    if not verified:
        result["reason"] = reason
    module.exit_json(**result)


if __name__ == "__main__":
    main()
