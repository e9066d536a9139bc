# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
#
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""A role's variables checked against an entry point of its ``meta/argument_specs.yml``.

The same check as ``ansible.builtin.validate_argument_spec`` (ansible-core's ArgumentSpecValidator, the same messages),
as a function: the preflight records its result in the task that records the role's other problems, one task per role
instead of two (roles/preflight, tasks/check_inputs.yml).
"""

from __future__ import annotations


def spec_errors(options, values, unset):
    """The messages of what ``values`` break in the argument spec ``options`` ([] when nothing).

    ``values`` maps option names to the variables' values; a value that ``is`` or equals ``unset`` is a variable that is
    not defined, which the spec sees as not given (its default, or a missing required option).
    """
    if not isinstance(options, dict):
        raise ValueError("options: expected the options of an entry point (a dict), got %s" % type(options).__name__)
    if not isinstance(values, dict):
        raise ValueError("values: expected option names and values (a dict), got %s" % type(values).__name__)
    unknown = sorted(set(values) - set(options), key=str)
    if unknown:
        raise ValueError("values: not options of the spec: %s" % ", ".join(str(name) for name in unknown))
    given = dict((name, value) for name, value in values.items() if not _is_unset(value, unset))
    # imported here: it pulls in ansible-core's JSON and vault code (and so cryptography), which loading the filter
    # file must not (tests/unit/test_plugin_imports.py); the preflight's worker is the only caller
    from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
    return list(ArgumentSpecValidator(options).validate(given).error_messages)


def _is_unset(value, unset):
    return value is unset or (isinstance(value, type(unset)) and value == unset)
