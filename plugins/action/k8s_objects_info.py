# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Reads Kubernetes objects in one task; see plugins/modules/k8s_objects_info.py and the reader,
plugins/plugin_utils/_k8s/reader.py (in the worker where a module process would run with this Python, else
kubernetes.core.k8s_info, or with ``fallback: false`` nothing)."""

from __future__ import annotations

from ansible.errors import AnsibleError
from ansible.module_utils.parsing.convert_bool import boolean

from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._k8s import reader


class ActionModule(reader.K8sReadAction):
    """Reads Kubernetes objects, in the worker when the connection is local and the interpreter is this Python."""

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result, args = self.start(tmp, task_vars)
        try:
            raw = args.pop("queries", None)
            if not isinstance(raw, list) or not raw:
                raise AnsibleError("queries must be a non-empty list of queries")
            queries = [reader.query(q, i) for i, q in enumerate(raw)]
            fallback = boolean(args.pop("fallback", True), strict=False)
            unknown = sorted(set(args) - reader.auth_keys())
            if unknown:
                raise AnsibleError("unsupported options: %s" % ", ".join(unknown))
            auth = self.auth(args)
        except AnsibleError as exc:
            return self.refused(result, "k8s_objects_info", exc)

        why_not = self.why_not_here(task_vars)
        if why_not and not fallback:
            result.update(in_worker=False, in_worker_reason=why_not, results=[], resources=[], api_found=False)
            return result
        return self.read(result, queries, auth, task_vars, reader.credential_strings(auth))
