# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations


class ModuleDocFragment:
    """What the modules that only document an action plugin reading through the Kubernetes reader
    (plugin_utils/_k8s/reader.py: k8s_objects_info, k8s_apply_plan, k8s_daemonset_wait) say alike.

    Their connection options are kubernetes.core's: a module lists kubernetes.core.k8s_auth_options beside it.
    """

    DOCUMENTATION = r"""
options: {}
attributes:
  action_group:
    description: Use C(group/gpu_ops.cluster.k8s) in C(module_defaults) to set the connection options of this module and of
      every Kubernetes module the collection's roles run.
    support: full
    membership:
      - gpu_ops.cluster.k8s
notes:
  - This module file only documents the action plugin of the same name; it cannot run on its own.
  - Reads only; nothing changes. No credential is returned, and messages have them replaced by C(********).
  - The connection is exactly what M(kubernetes.core.k8s_info) gets - the options of this task over the C(module_defaults)
    of C(kubernetes.core.k8s_info), C(group/kubernetes.core.k8s), C(group/k8s) and C(group/gpu_ops.cluster.k8s), the task's
    C(environment), the C(K8S_AUTH_*)
    environment, the kubeconfig and its context - and the client is built by kubernetes.core's own code.
"""
