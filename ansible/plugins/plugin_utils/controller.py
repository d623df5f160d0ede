# -*- coding: utf-8 -*-
# A module of this collection run by its action plugin on the controller: its logic as it is,
# its `airlock` calls made through the task's connection (with become, when the task has it) by
# `ActionBase._low_level_execute_command`, the call Ansible's own raw-command action plugins use,
# with the task's `environment:` as `_compute_environment_string` gives it to any remote command.
# What a node pays per task is then the airlock calls alone: no module payload to build, copy
# and start in a Python interpreter on the node, which was most of a rollout's cost per node
# (issue 61: a dozen tasks and three module runs per node, 1.0-1.2 s each at 64 nodes).
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re
import shlex

# An environment variable's name as POSIX shells take it in an assignment: anything else in
# the command line below would be shell syntax.
NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

from ansible.module_utils.common.arg_spec import ArgumentSpecValidator


class Done(Exception):
    """`exit_json` or `fail_json`: the task's result."""

    def __init__(self, result):
        super(Done, self).__init__(result.get("msg", ""))
        self.result = result


class NodeModule(object):
    """What the collection's modules use of `AnsibleModule`, on the controller."""

    def __init__(self, action, params, check_mode):
        self._action = action
        self.params = params
        self.check_mode = check_mode

    def run_command(self, cmd, environ_update=None, check_rc=False, data=None):
        # The task's `environment:` (and its block's and play's), as Ansible computes it for any
        # remote command, then the module's own `environment` argument over it.
        env = {}
        self._action._compute_environment_string(raw_environment_out=env)
        env = dict((str(k), v) for k, v in env.items())
        env.update((str(k), v) for k, v in (environ_update or {}).items())
        for k in sorted(env):
            if not NAME.match(k):
                self.fail_json(msg="%r is not an environment variable name ([A-Za-z_][A-Za-z0-9_]*)" % (k,))
        assignments = ["%s=%s" % (k, shlex.quote(str(v))) for k, v in sorted(env.items())]
        line = " ".join(assignments + [shlex.quote(str(c)) for c in cmd])
        in_data = data.encode("utf-8") if isinstance(data, str) else data
        done = self._action._low_level_execute_command(line, sudoable=True, in_data=in_data)
        rc, out, err = done.get("rc", 1), done.get("stdout", ""), done.get("stderr", "")
        if check_rc and rc != 0:
            self.fail_json(msg=err or out, rc=rc)
        return rc, out, err

    def exit_json(self, **result):
        result.setdefault("changed", False)
        raise Done(result)

    def fail_json(self, msg, **result):
        result.update(failed=True, msg=msg)
        raise Done(result)


def run_module(action, module, task_vars):
    """Run `module` (one of this collection's, with `MODULE_ARGS` and `run(module)`) for the
    action's task: its arguments checked as `AnsibleModule` checks them, its result returned."""
    kwargs = dict(module.MODULE_ARGS)
    kwargs.pop("supports_check_mode", None)
    validator = ArgumentSpecValidator(**kwargs)
    checked = validator.validate(dict(action._task.args))
    if checked.error_messages:
        return dict(failed=True, msg="; ".join(checked.error_messages))
    node = NodeModule(action, checked.validated_parameters, bool(action._task.check_mode))
    node.task_vars = task_vars or {}
    try:
        module.run(node)
    except Done as done:
        return done.result
    return dict(failed=True, msg="the module ended without a result")


def action_for(module):
    """The action plugin of `module`: it runs the module here (`run_module`)."""
    from ansible.plugins.action import ActionBase

    class ActionModule(ActionBase):
        TRANSFERS_FILES = False
        _supports_check_mode = True

        def run(self, tmp=None, task_vars=None):
            result = super(ActionModule, self).run(tmp, task_vars)
            result.update(run_module(self, module, task_vars))
            return result

    return ActionModule
