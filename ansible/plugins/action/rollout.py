# -*- coding: utf-8 -*-
# The rollout module runs on the controller (or the host the task is delegated to), its airlock
# call over the task's connection (plugins/plugin_utils/controller.py says why).
from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.airlock.site.plugins.modules import rollout
from ansible_collections.airlock.site.plugins.plugin_utils.controller import action_for

ActionModule = action_for(rollout)
