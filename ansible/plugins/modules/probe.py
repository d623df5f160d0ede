#!/usr/bin/python
# -*- coding: utf-8 -*-
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: probe
short_description: This node's GPU stack as facts, and its hardware tuple
description:
  - Runs C(airlock probe --json) and C(airlock status --json) and returns the node's tuple (GPU
    model, gfx, OS, kernel, partition modes, virtualization, firmware) and its current bundle.
  - Nodes with the same tuple are alike for the upgrade guide's canary rule.
extends_documentation_fragment: airlock.site.common
author: airlock maintainers
"""

EXAMPLES = r"""
- airlock.site.probe:
    root: /var/lib/airlock
  register: node
"""

RETURN = r"""
tuple: {description: "The hardware tuple, one string.", type: str, returned: always}
tuple_fields: {description: The tuple's fields., type: dict, returned: always}
current: {description: "The current bundle (id, name, version) or null.", type: dict, returned: always}
probe: {description: "airlock probe --json, whole.", type: dict, returned: always}
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.airlock.site.plugins.module_utils.airlock import COMMON_ARGS, current_bundle, run_airlock


def tuple_of(probe):
    host = probe.get("host") or {}
    gpus = probe.get("gpus") or []
    first = gpus[0] if gpus else {}
    firmware = first.get("firmware") or {}
    fields = {
        "gpu": "%s x%d" % (first.get("market_name", "none"), len(gpus)),
        "gfx": first.get("gfx", "unknown"),
        "os": "%s %s" % (host.get("os_id", "unknown"), host.get("os_version", "")),
        "kernel": host.get("kernel", "unknown"),
        "partition": "%s/%s" % (first.get("compute_partition", "-"), first.get("memory_partition", "-")),
        "virtualization": (host.get("virtualization") or {}).get("mode", "unknown"),
        "firmware": ",".join("%s=%s" % (k, firmware[k]) for k in sorted(firmware)),
    }
    return fields, " | ".join(fields[k] for k in ["gpu", "gfx", "os", "kernel", "partition", "virtualization", "firmware"])


def main():
    module = AnsibleModule(argument_spec=dict(COMMON_ARGS), supports_check_mode=True)
    rc, probe, err = run_airlock(module, ["probe"], check_rc=True)
    fields, key = tuple_of(probe or {})
    module.exit_json(changed=False, tuple=key, tuple_fields=fields, current=current_bundle(module), probe=probe)


if __name__ == "__main__":
    main()
