# -*- coding: utf-8 -*-
# The probe module run on the controller, its airlock calls through the connection
# (plugins/plugin_utils/controller.py says why).
from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.plugins.action import ActionBase
from ansible_collections.airlock.site.plugins.modules import probe as module
from ansible_collections.airlock.site.plugins.plugin_utils.controller import run_module


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _supports_check_mode = True

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        result.update(run_module(self, module, task_vars))
        return result
