# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Reads the objects of a kubernetes.core.k8s apply and says which of its calls are already in place (issue #22); see
plugins/modules/k8s_apply_plan.py.

It reads as gpu_ops.cluster.k8s_objects_info reads (this class extends it), in the already-forked worker, and judges
with plugins/plugin_utils/_k8s_in_place.py. The role apply registers its result as ``apply_result``: when every call is
in place that result already holds what the calls would have returned (their objects as read), so a no-op step is this
one task, and the include that sends, records and reports is skipped whole. A read that cannot be made (another
connection, credentials, an API error) makes nothing in place: the calls run as before and fail, if they must, with
kubernetes.core's own message.
"""

from __future__ import annotations

from ansible.errors import AnsibleError
from ansible.module_utils.parsing.convert_bool import boolean

from ansible_collections.gpu_ops.cluster.plugins.action.k8s_objects_info import ActionModule as ObjectsInfoAction
from ansible_collections.gpu_ops.cluster.plugins.action.k8s_objects_info import _auth_keys, _query, credential_strings
from ansible_collections.gpu_ops.cluster.plugins.plugin_utils import _k8s_in_place
from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._filter_inputs import plain

NAME = "k8s_apply_plan"


def queries_of(batches, wait):
    """The checked k8s_objects_info queries of ``batches`` (one named read per object), or AnsibleError."""
    try:
        raw = _k8s_in_place.reads(batches, wait)
    except TypeError as exc:
        raise AnsibleError("batches: %s" % exc)
    return [_query(query, index) for index, query in enumerate(raw)]


def plan(batches, reads, wait):
    """The result fields: ``batches`` marked (in_place, not_in_place, standin), ``in_place`` (every call is), ``reads``
    (what each object's GET found, as k8s_objects_info returns it: ``query``, ``resources``, ``api_found``, with
    ``wait`` ``ready``) and, when every call is in place, ``results``: each call's stand-in, as the role apply's loop
    over the calls would have registered it."""
    marked = _k8s_in_place.in_place(batches, reads, wait)
    fields = {"batches": marked, "in_place": all(batch["in_place"] for batch in marked), "reads": reads}
    if fields["in_place"]:
        fields["results"] = [dict(batch["standin"], item=batch, in_place=True) for batch in marked]
    return fields


class ActionModule(ObjectsInfoAction):
    """One GET per object of the calls, then which calls are in place (check mode: yes, async: no, as k8s_objects_info)."""

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result, args = self._start(tmp, task_vars)
        try:
            batches = plain(args.pop("batches", None))
            wait = boolean(args.pop("wait", False), strict=False)
            queries = queries_of(batches, wait)
            unknown = sorted(set(args) - _auth_keys())
            if unknown:
                raise AnsibleError("unsupported options: %s" % ", ".join(unknown))
        except AnsibleError as exc:
            return self._refused(result, NAME, exc)
        reads = self._read_all(result, queries, args, task_vars) if queries else []
        result.update(plan(batches, reads, wait))
        return result

    def _read_all(self, result, queries, connection, task_vars):
        """The per-query results of k8s_objects_info, or [] (nothing in place) when the worker cannot read them; why is
        in ``in_worker_reason`` or ``read_error`` (credentials replaced). ``connection``: the task's connection options,
        which a kubeconfig that cannot be found or a bad one also leaves to kubernetes.core.k8s to refuse."""
        why_not = self._why_not_in_worker(task_vars)
        result["in_worker"] = not why_not
        if why_not:
            result["in_worker_reason"] = why_not
            return []
        try:
            auth = self._auth(connection)
        except AnsibleError as exc:
            result["read_error"] = self._named(NAME, exc)
            return []
        read = self._in_worker({}, queries, auth, credential_strings(auth))
        if read.get("failed"):
            result["read_error"] = read["msg"]
            return []
        return read["results"]
