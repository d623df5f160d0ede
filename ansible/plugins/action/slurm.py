# -*- coding: utf-8 -*-
# The slurm module run on the controller, its scontrol and sinfo calls over the task's connection
# (plugins/plugin_utils/controller.py says why).
from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.airlock.site.plugins.modules import slurm
from ansible_collections.airlock.site.plugins.plugin_utils.controller import action_for

ActionModule = action_for(slurm)
