# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
#
# Note that this plugin util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""An engine module imported when a filter first uses it, not when the filter file is loaded.

ansible-core loads every filter file of a collection the first time a template names one of its filters, in each
forked worker that templates one. A filter file that imported its engines at the top would make every such worker
import all of them (the catalogs, the validation suite, the operator plans) to run one small filter. A filter file
names its engines with ``engine("ansible_collections....")`` instead; the layer test reads those names as imports.
"""

from __future__ import annotations

import importlib


class _Engine:
    """Stands for a module until one of its attributes is read, then imports it (once) and reads from it."""

    __slots__ = ("_name", "_module")

    def __init__(self, name):
        self._name = name
        self._module = None

    def __getattr__(self, attribute):
        if self._module is None:
            self._module = importlib.import_module(self._name)
        return getattr(self._module, attribute)

    def __repr__(self):
        return "<engine %s%s>" % (self._name, "" if self._module is None else " (imported)")


def engine(name):
    """The module ``name`` (fully qualified), imported on first use."""
    return _Engine(name)
