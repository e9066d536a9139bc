# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Shared setup of the module_utils tests: a count of the MIG catalog's model lookups."""

from __future__ import annotations

import sys

import pytest

from ansible_collections.gpu_ops.cluster.plugins.module_utils._catalog import mig as mig_catalog

OURS = "ansible_collections.gpu_ops.cluster.plugins."


@pytest.fixture
def catalog_lookups(monkeypatch):
    """The models looked up through the catalog's ``gpu_model``, in order, wherever our code bound that accessor.

    The spy stands in for the accessor only: it records its argument and returns what the real one returns
    (or raises what it raises), so the code under test runs unchanged.
    """
    real = mig_catalog.gpu_model
    seen = []

    def spy(name):
        seen.append(name)
        return real(name)

    for name, module in sorted(sys.modules.items()):
        if name.startswith(OURS) and getattr(module, "gpu_model", None) is real:
            monkeypatch.setattr(module, "gpu_model", spy)
    return seen
