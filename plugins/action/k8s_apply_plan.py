# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Reads the objects of an apply step and says which of its kubernetes.core.k8s calls are already in place; see
plugins/modules/k8s_apply_plan.py.

It reads through the collection's Kubernetes reader (plugins/plugin_utils/_k8s/reader.py), in the worker only, and
judges with plugins/plugin_utils/_k8s/in_place.py. Its result is its own: the step unchanged (``changed: false``),
which calls are in place and why the others are not, and what was read. A read that cannot be made here (another
connection, credentials, an API error) puts nothing in place: the calls run, and fail if they must with
kubernetes.core's own message.
"""

from __future__ import annotations

from ansible.errors import AnsibleError
from ansible.module_utils.parsing.convert_bool import boolean

from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._core.inputs import plain
from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._k8s import in_place as _in_place
from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._k8s import reader

NAME = "k8s_apply_plan"


def queries_of(batches, wait):
    """The checked reader queries of ``batches`` (one named read per object), or AnsibleError."""
    try:
        raw = _in_place.reads(batches, wait)
    except TypeError as exc:
        raise AnsibleError("batches: %s" % exc)
    return [reader.query(one, index) for index, one in enumerate(raw)]


def plan(batches, reads, wait):
    """The result fields: ``batches`` marked (``in_place``, ``not_in_place``), ``in_place`` (every call is) and
    ``reads`` (what each object's GET found, as k8s_objects_info returns it: ``query``, ``resources``, ``api_found``,
    with ``wait`` ``ready``)."""
    marked = _in_place.in_place(batches, reads, wait)
    return {"batches": marked, "in_place": all(batch["in_place"] for batch in marked), "reads": reads}


class ActionModule(reader.K8sReadAction):
    """One GET per object of the calls, then which calls are in place."""

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result, args = self.start(tmp, task_vars)
        try:
            batches = plain(args.pop("batches", None))
            wait = boolean(args.pop("wait", False), strict=False)
            queries = queries_of(batches, wait)
            unknown = sorted(set(args) - reader.auth_keys())
            if unknown:
                raise AnsibleError("unsupported options: %s" % ", ".join(unknown))
        except AnsibleError as exc:
            return self.refused(result, NAME, exc)
        reads = self._read_all(result, queries, args, task_vars) if queries else []
        result.update(plan(batches, reads, wait))
        return result

    def _read_all(self, result, queries, connection, task_vars):
        """The per-query results of the reader, or [] (nothing in place) when the worker cannot read them; why is in
        ``in_worker_reason`` or ``read_error`` (credentials replaced). ``connection``: the task's connection options,
        which a kubeconfig that cannot be found or a bad one also leaves to kubernetes.core.k8s to refuse."""
        why_not = self.why_not_here(task_vars)
        result["in_worker"] = not why_not
        if why_not:
            result["in_worker_reason"] = why_not
            return []
        try:
            auth = self.auth(connection)
        except AnsibleError as exc:
            result["read_error"] = self.named(NAME, exc)
            return []
        read = self.read_here({}, queries, auth, reader.credential_strings(auth))
        if read.get("failed"):
            result["read_error"] = read["msg"]
            return []
        return read["results"]
