# -*- coding: utf-8 -*-
# The options every airlock.site module takes (extends_documentation_fragment: airlock.site.common).
from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):
    DOCUMENTATION = r"""
options:
  root: {description: The node's airlock site root., type: path, required: true}
  binary: {description: The airlock executable., type: str, default: airlock}
  environment: {description: Environment variables for every airlock call., type: dict, default: {}}
  run_id: {description: "The rollout run this call is part of (C(--run-id)); airlock keeps it in the record it writes.", type: str}
"""
