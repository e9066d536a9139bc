# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fixtures of the tests of the doubles. The ones that run real playbooks or helm against the Kubernetes API double
use the integration tests' fixtures (tests/integration/conftest.py), imported here so that they apply to this folder.

scripts/test.sh runs the Python-only files of this folder with the contract step and the others with the integration
step (double_contract_files / double_integration_files there)."""

from __future__ import annotations

from ansible_collections.gpu_ops.cluster.tests.integration.conftest import (  # pylint: disable=unused-import
    helm_k8s,
    k8s_double,
    k8s_double_module,
    run_playbook,
    run_playbook_module,
)
