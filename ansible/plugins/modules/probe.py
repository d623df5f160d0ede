#!/usr/bin/python
# -*- coding: utf-8 -*-
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: probe
short_description: This node's GPU stack as facts, and its hardware tuple
description:
  - Runs C(airlock probe --root ROOT --json) and returns the node's tuple (GPU model, gfx, OS,
    kernel, partition modes, virtualization, firmware) and its current bundle (as C(airlock status)
    says it).
  - Nodes with the same tuple are alike for the upgrade guide's canary rule.
options:
  packages:
    description:
      - Return every installed package in C(probe.inventory.packages) (the node's inventory C(airlock freeze) takes).
      - Off, only the GPU stack's packages and those the current bundle carries, a smaller result per node.
    type: bool
    default: false
  brief:
    description:
      - Return the tuple, its fields and the current bundle without C(probe), the whole probe (GPUs, tools and
        packages, kilobytes per node, which a controller keeps in memory for every node of a run).
    type: bool
    default: false
    version_added: "0.2.0"
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
- airlock.site.probe:
    root: /var/lib/airlock
  register: node
"""

RETURN = r"""
tuple:
  description: "The hardware tuple, one string."
  type: str
  returned: always
  sample: "AMD Instinct MI300X x8 | gfx942 | ubuntu 24.04 | 6.8.0-51-generic | SPX/NPS1 | baremetal | PLDM_BUNDLE=01.25.05.00"
tuple_fields:
  description: The tuple's fields.
  type: dict
  returned: always
  sample: {gpu: AMD Instinct MI300X x8, gfx: gfx942, os: ubuntu 24.04, kernel: 6.8.0-51-generic, partition: SPX/NPS1,
           virtualization: baremetal, firmware: PLDM_BUNDLE=01.25.05.00}
current:
  description: "The current bundle (id, name, version) or null."
  type: dict
  returned: always
  sample: {id: 3f9c2a1b7d4e5f60, name: rocm10-demo, version: 2026.11.0}
probe: {description: "airlock probe --json, whole.", type: dict, returned: unless C(brief), sample: {gpus: [{model: MI300X, gfx: gfx942}]}}
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


def stack_only(probe):
    """The inventory cut to the GPU stack (host.packages) and the packages the bundle carries."""
    inventory = probe.get("inventory") or {}
    packages = inventory.get("packages") or {}
    stack = set(p.split("=", 1)[0] for p in (probe.get("host") or {}).get("packages") or [])
    inventory["packages"] = dict((k, v) for k, v in packages.items() if k in stack or v.get("carried"))
    return probe


MODULE_ARGS = dict(
    argument_spec=dict(COMMON_ARGS, packages=dict(type="bool", default=False), brief=dict(type="bool", default=False)),
    supports_check_mode=True,
)


def main():
    run(AnsibleModule(**MODULE_ARGS))


def run(module):
    rc, probe, err = run_airlock(module, ["probe", "--root", module.params["root"]], check_rc=True)
    probe = probe if isinstance(probe, dict) else {}
    # airlock names the root's current bundle in the probe; an older airlock on the node (before
    # its self-upgrade) does not, and its `status` does.
    current = probe.pop("current") if "current" in probe else current_bundle(module)
    if not module.params["packages"]:
        probe = stack_only(probe)
    fields, key = tuple_of(probe)
    answer = {} if module.params["brief"] else dict(probe=probe)
    module.exit_json(changed=False, tuple=key, tuple_fields=fields, current=current, **answer)

if __name__ == "__main__":
    main()
