# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Waits, in one task, until a DaemonSet runs a Ready pod of its current template on every node that carries a label;
see plugins/modules/k8s_daemonset_wait.py.

It reads through the collection's Kubernetes reader (plugins/plugin_utils/_k8s/reader.py): in the worker with
kubernetes.core's client and kubernetes.core.k8s_info's connection options, or with kubernetes.core.k8s_info on the
target. The three steps - the nodes, the DaemonSet, its pods - were three tasks with ``until`` and two checks; here they
are one task, so a no-op run pays one task start for the whole wait, and reads only the pods when the caller hands over
the nodes and the DaemonSet it already has.
"""

from __future__ import annotations

import time

from ansible.errors import AnsibleError
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible.module_utils.common.text.converters import to_text
from ansible.utils.display import Display

from ansible_collections.gpu_ops.cluster.plugins.module_utils._core import waiter as _waiter
from ansible_collections.gpu_ops.cluster.plugins.modules.k8s_daemonset_wait import WAIT_SPEC
from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._k8s import daemonset as _daemonset
from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._k8s import reader

display = Display()

NAME = "k8s_daemonset_wait"


class WaitFailed(Exception):
    """The wait ended without every node ready: the message says why, in one short text."""


def options(raw):
    """The wait's own options, checked and converted (a bad one raises AnsibleError naming it)."""
    validated = ArgumentSpecValidator(WAIT_SPEC).validate(dict(raw))
    if validated.error_messages:
        raise AnsibleError("; ".join(validated.error_messages))
    opts = validated.validated_parameters
    for key in ("name", "namespace", "node_label"):
        if not opts[key].strip():
            raise AnsibleError("%s must not be empty" % key)
    if not opts["node_values"] or not all(v.strip() for v in opts["node_values"]):
        raise AnsibleError("node_values must be a non-empty list of label values")
    for key in ("min_nodes", "timeout", "delay"):
        if opts[key] < 0:
            raise AnsibleError("%s must be 0 or more, got %d" % (key, opts[key]))
    return opts


def attempts(timeout, delay):
    """How many reads a wait of ``timeout`` seconds makes, ``delay`` seconds apart (as ``until`` with ``retries`` of
    timeout // delay, at least 1: the first read and that many retries)."""
    return max(timeout // max(delay, 1), 1) + 1


def selector(opts):
    return "%s in (%s)" % (opts["node_label"], ",".join(opts["node_values"]))


def labelled(nodes, opts):
    """The nodes among ``nodes`` whose label ``node_label`` has one of ``node_values``."""
    found = []
    for node in nodes:
        labels = (node.get("metadata") or {}).get("labels") or {}
        if labels.get(opts["node_label"]) in opts["node_values"]:
            found.append(node)
    return found


def given_daemonset(daemonset, opts, check_mode):
    """The DaemonSet the caller handed over when it is this one (not in check mode, where an apply is a dry run)."""
    if check_mode or not isinstance(daemonset, dict) or daemonset.get("kind") != "DaemonSet":
        return None
    meta = daemonset.get("metadata") or {}
    if (meta.get("name"), meta.get("namespace")) != (opts["name"], opts["namespace"]):
        return None
    return daemonset


def pod_selector(daemonset):
    """The DaemonSet's matchLabels as a label selector (k=v,k=v), or None when it has none."""
    labels = ((daemonset.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
    return ",".join("%s=%s" % (key, value) for key, value in labels.items()) or None


def not_ready_message(name, report, timeout):
    not_ready = [entry for entry in report if not entry["ready"]]
    return "DaemonSet %s is not ready on %d of %d GPU nodes after %s s: %s" % (
        name, len(not_ready), len(report), timeout,
        ", ".join("%s (%s)" % (entry["node"], entry["reason"]) for entry in not_ready))


class ActionModule(reader.K8sReadAction):
    """The nodes, the DaemonSet and a Ready pod on each node, read until ready or the timeout."""

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result, args = self.start(tmp, task_vars)
        own = dict((key, args.pop(key)) for key in list(args) if key in WAIT_SPEC)
        try:
            unknown = sorted(set(args) - reader.auth_keys())
            if unknown:
                raise AnsibleError("unsupported options: %s" % ", ".join(unknown))
            opts = options(own)
            auth = self.auth(args)
        except AnsibleError as exc:
            return self.refused(result, NAME, exc)

        self._wait_vars = task_vars
        self._wait_auth = auth
        self._wait_secrets = reader.credential_strings(auth)
        why_not = self.why_not_here(task_vars)
        result["in_worker"] = not why_not
        if why_not:
            result["in_worker_reason"] = why_not
        name = "%s/%s" % (opts["namespace"], opts["name"])
        try:
            report = self._wait(opts, name, why_not)
        except WaitFailed as exc:
            result.update(failed=True, msg=to_text(exc))
            return result
        result.update(daemonset=name, nodes=report)
        return result

    # ------------------------------------------------------------------ reads
    def _read_one(self, query, why_not):
        """One query, read where the reader reads it: (resources, None) or (None, message)."""
        queries = [reader.query(query, 0)]  # the reader's own normalisation (api_version v1, selectors as lists)
        if why_not:
            answer = self.read_on_target({}, queries, self._wait_auth, self._wait_vars, self._wait_secrets)
        else:
            answer = self.read_here({}, queries, self._wait_auth, self._wait_secrets)
        if answer.get("failed"):
            return None, to_text(answer.get("msg") or "unknown error")
        return answer["resources"], None

    def _until(self, read, done, opts, what):
        """Read until ``done(value)`` holds or the attempts run out (as ``until`` with timeout // delay retries); the last
        value and error. The collection's one wait loop (module_utils/_core/waiter.py) polls; before each retry this
        says what it still waits for."""
        retries = attempts(opts["timeout"], opts["delay"]) - 1

        def pause(last, attempt):
            value, error = last
            display.display("WAITING: [%s]: %s (%d retries left, next read in %d s)" % (
                self._task_host(), what(value, error), retries - attempt, opts["delay"]))
            return opts["delay"]

        # the deadline only bounds slow reads; with prompt answers the retries end the wait, as before
        waiter = _waiter.Waiter(sleep=time.sleep)
        try:
            return waiter.until(read, lambda last: last[1] is None and done(last[0]), opts["timeout"] + opts["delay"],
                                pause, attempts=retries)
        except _waiter.WaitTimeout as exc:
            return exc.last

    def _task_host(self):
        return to_text(self._wait_vars.get("inventory_hostname", "?"))

    # ------------------------------------------------------------------ the wait
    def _wait(self, opts, name, why_not):
        nodes = self._nodes(opts, why_not)
        daemonset = self._daemonset(opts, name, why_not)
        return self._pods(opts, name, nodes, daemonset, why_not)

    def _nodes(self, opts, why_not):
        """The nodes carrying the label: the caller's when enough of them do, else read until enough are there."""
        known = labelled(opts["nodes"], opts)
        if known and len(known) >= opts["min_nodes"]:
            return known
        wanted = selector(opts)
        found, error = self._until(
            lambda: self._read_one(dict(kind="Node", label_selectors=[wanted]), why_not),
            lambda nodes: len(nodes) >= opts["min_nodes"],
            opts,
            lambda nodes, error: "%s GPU nodes labelled %s, %d expected at least%s" % (
                len(nodes or []), wanted, opts["min_nodes"], (": " + error) if error else ""))
        found = found or []
        if error is not None or len(found) < opts["min_nodes"]:
            raise WaitFailed("Found %d nodes labelled %s within %s s, %s expected at least%s." % (
                len(found), wanted, opts["timeout"], opts["min_nodes"], (": " + error) if error else ""))
        return found

    def _daemonset(self, opts, name, why_not):
        given = given_daemonset(opts["daemonset"], opts, self._task.check_mode)
        if given is not None:
            return given
        query = dict(api_version="apps/v1", kind="DaemonSet", namespace=opts["namespace"], name=opts["name"])
        found, error = self._read_one(query, why_not)
        if error is not None or len(found) != 1:
            raise WaitFailed("DaemonSet %s was not found%s." % (name, (": " + error) if error else ""))
        return found[0]

    def _pods(self, opts, name, nodes, daemonset, why_not):
        labels = pod_selector(daemonset)
        if labels is None:
            raise WaitFailed("DaemonSet %s has no spec.selector.matchLabels: its pods cannot be found." % name)
        query = dict(kind="Pod", namespace=opts["namespace"], label_selectors=[labels])

        def read():
            pods, error = self._read_one(query, why_not)
            return (None, error) if error is not None else (_daemonset.node_report(pods, nodes, daemonset), None)

        def waiting_for(report, error):
            if error is not None:
                return "reading the pods of DaemonSet %s failed: %s" % (name, error)
            return "a ready pod of DaemonSet %s on %s" % (
                name, ", ".join(entry["node"] for entry in report if not entry["ready"]))

        report, error = self._until(read, lambda report: all(entry["ready"] for entry in report), opts, waiting_for)
        if error is not None:
            raise WaitFailed("Waiting for DaemonSet %s failed: reading its pods failed: %s" % (name, error))
        if not all(entry["ready"] for entry in report):
            raise WaitFailed(not_ready_message(name, report, opts["timeout"]))
        return report
