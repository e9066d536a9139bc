# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Reads Kubernetes objects in the already-forked worker (issue #22); see plugins/modules/k8s_objects_info.py.

The kubernetes client and kubernetes.core's client code are imported here, at module level: the linear strategy
loads an action plugin's class in the parent process, so the import happens once per run and every worker
inherits it, instead of once per module process. The client is built by kubernetes.core's own
``get_api_client`` from the options kubernetes.core.k8s_info would get (the task's module_defaults for it and for
``group/kubernetes.core.k8s``, the task's environment, K8S_AUTH_*, the kubeconfig's context), and the objects are
read by kubernetes.core's ``K8sService.find`` (what kubernetes.core.k8s_info runs), so auth and result shape are
k8s_info's. Elsewhere (a remote connection, another interpreter, become, delegation) each query runs
kubernetes.core.k8s_info on the target, or with ``fallback: false`` nothing is read (``in_worker: false``).
"""

from __future__ import annotations

import copy
import os
import sys
import traceback

from ansible.errors import AnsibleError
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible.module_utils.common.text.converters import to_text
from ansible.module_utils.parsing.convert_bool import boolean
from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

try:  # ansible-core 2.19+
    from ansible.executor.module_common import _apply_action_arg_defaults as _with_defaults
except ImportError:  # pragma: no cover - older lines
    _with_defaults = None

try:
    from ansible_collections.kubernetes.core.plugins.module_utils.args_common import AUTH_ARG_SPEC
    from ansible_collections.kubernetes.core.plugins.module_utils.k8s.client import get_api_client
    from ansible_collections.kubernetes.core.plugins.module_utils.k8s.service import K8sService
    from ansible_collections.kubernetes.core.plugins.module_utils.k8s.waiter import get_waiter
    from kubernetes.config import kube_config as _kube_config
    from kubernetes.dynamic.exceptions import ResourceNotFoundError, ResourceNotUniqueError
    from kubernetes.dynamic.resource import ResourceInstance
    IMPORT_ERROR = None
except ImportError as exc:  # the worker cannot read: every query falls back to kubernetes.core.k8s_info
    AUTH_ARG_SPEC = {}
    IMPORT_ERROR = exc

from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._workers import freeze_inherited_objects_in_workers

# the clients imported above stay out of the garbage collection of every worker forked after this (issue #22)
freeze_inherited_objects_in_workers()

INFO_MODULE = "kubernetes.core.k8s_info"
QUERY_KEYS = ("api_version", "kind", "name", "namespace", "label_selectors", "field_selectors", "wait", "wait_condition")
SEPARATOR = ";" if sys.platform.startswith("win") else ":"


def _auth_keys():
    keys = set(AUTH_ARG_SPEC)
    for spec in AUTH_ARG_SPEC.values():
        keys.update(spec.get("aliases") or [])
    return keys


def _secrets(value):
    """Every string under ``value`` (a credential option's value), for scrubbing messages."""
    if isinstance(value, dict):
        return [s for v in value.values() for s in _secrets(v)]
    if isinstance(value, (list, tuple)):
        return [s for v in value for s in _secrets(v)]
    return [value] if isinstance(value, str) and len(value) >= 4 else []


def credential_strings(auth):
    """The credentials among the connection options: api_key, password, proxy_headers and, of a kubeconfig given as a
    dict, what its users hold (token, client key and certificate data, passwords, exec and auth-provider settings)."""
    found = [s for key in ("api_key", "password", "proxy_headers") for s in _secrets(auth.get(key))]
    kubeconfig = auth.get("kubeconfig")
    if isinstance(kubeconfig, dict):
        for user in kubeconfig.get("users") or []:
            found.extend(_secrets(user.get("user") if isinstance(user, dict) else None))
    return found


def _scrub(text, secrets):
    text = to_text(text)
    for secret in sorted(set(secrets), key=len, reverse=True):
        text = text.replace(secret, "********")
    return text


def same_python(interpreter, executable):
    """Whether ``interpreter`` runs as ``executable``: the same binary in the same folder once links are resolved (a
    virtual environment's python is a link to the base binary; its folder is what makes it that environment)."""
    if not interpreter or not os.path.isabs(interpreter):
        return False
    try:
        return (os.path.realpath(interpreter) == os.path.realpath(executable)
                and os.path.realpath(os.path.dirname(interpreter)) == os.path.realpath(os.path.dirname(executable)))
    except OSError:  # pragma: no cover
        return False


def _query(raw, index):
    """One query, checked: a named object or a list (kind and selectors); a manifest (apiVersion, metadata) works too."""
    if not isinstance(raw, dict):
        raise AnsibleError("queries[%d] must be a dict, got %s" % (index, type(raw).__name__))
    query = dict(raw)
    meta = query.pop("metadata", None) or {}
    if "apiVersion" in query:
        query.setdefault("api_version", query.pop("apiVersion"))
    for key in ("name", "namespace"):
        if key not in query and meta.get(key):
            query[key] = meta[key]
    unknown = sorted(set(query) - set(QUERY_KEYS))
    if unknown:
        raise AnsibleError("queries[%d]: unknown keys %s (known: %s)" % (index, ", ".join(unknown), ", ".join(QUERY_KEYS)))
    if not isinstance(query.get("kind"), str) or not query["kind"]:
        raise AnsibleError("queries[%d]: kind is required" % index)
    query.setdefault("api_version", "v1")
    for key in ("label_selectors", "field_selectors"):
        value = query.get(key) or []
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise AnsibleError("queries[%d]: %s must be a list of strings" % (index, key))
        query[key] = value
    query["wait"] = boolean(query.get("wait", False), strict=False)
    condition = query.get("wait_condition") or {}
    if not isinstance(condition, dict):
        raise AnsibleError("queries[%d]: wait_condition must be a dict" % index)
    query["wait_condition"] = condition
    return query


def _remove_temp_files():
    cleanup = getattr(_kube_config, "_cleanup_temp_files", None)
    if cleanup is not None:
        cleanup()


def _module_condition(condition):
    """The wait_condition as kubernetes.core.k8s's argument spec hands it to its waiter (status defaults to True)."""
    if not condition:
        return None
    return {"type": condition.get("type"), "status": condition.get("status", True), "reason": condition.get("reason")}


class ActionModule(ActionBase):
    """Reads Kubernetes objects in the worker when the connection is local and the interpreter is this Python."""

    _SUPPORTS_CHECK_MODE = True
    _SUPPORTS_ASYNC = False

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result, args = self._start(tmp, task_vars)
        try:
            raw = args.pop("queries", None)
            if not isinstance(raw, list) or not raw:
                raise AnsibleError("queries must be a non-empty list of queries")
            queries = [_query(q, i) for i, q in enumerate(raw)]
            fallback = boolean(args.pop("fallback", True), strict=False)
            unknown = sorted(set(args) - _auth_keys())
            if unknown:
                raise AnsibleError("unsupported options: %s" % ", ".join(unknown))
            auth = self._auth(args)
        except AnsibleError as exc:
            return self._refused(result, "k8s_objects_info", exc)

        secrets = credential_strings(auth)
        why_not = self._why_not_in_worker(task_vars)
        if why_not:
            result["in_worker"] = False
            result["in_worker_reason"] = why_not
            if not fallback:
                result.update(results=[], resources=[], api_found=False)
                return result
            return self._on_target(result, queries, auth, task_vars, secrets)
        result["in_worker"] = True
        return self._in_worker(result, queries, auth, secrets)

    # ------------------------------------------------------------------ options
    def _start(self, tmp, task_vars):
        """ActionBase.run's shared checks (this class's subclasses too), a result that changes nothing, and a copy of
        the task's arguments."""
        result = ActionBase.run(self, tmp, task_vars)
        result.update(changed=False)
        return result, dict(self._task.args)

    @staticmethod
    def _named(name, exc):
        """The message of the error ``exc``, named after the action."""
        return "%s: %s" % (name, to_text(exc.message if hasattr(exc, "message") else exc))

    def _refused(self, result, name, exc):
        """``result`` failed with the option error ``exc``, named after the action."""
        result.update(failed=True, msg=self._named(name, exc))
        return result

    def _auth(self, explicit):
        """The connection options kubernetes.core.k8s_info would run with: the task's own over its module_defaults
        (kubernetes.core.k8s_info and group/kubernetes.core.k8s), kubeconfig paths found as its action finds them."""
        if _with_defaults is not None:
            merged = _with_defaults(INFO_MODULE, self._task, dict(explicit), self._templar)
        else:  # pragma: no cover
            merged = dict(explicit)
        auth = dict((k, v) for k, v in merged.items() if k in _auth_keys() and v is not None)
        kubeconfig = auth.get("kubeconfig")
        if isinstance(kubeconfig, str) and kubeconfig and self._connection.transport == "local":
            configs = []
            for config in kubeconfig.split(SEPARATOR):
                config = self._find_needle("files", config)
                configs.append(self._loader.get_real_file(config, decrypt=True))
            auth["kubeconfig"] = SEPARATOR.join(configs)
        elif kubeconfig is not None and not isinstance(kubeconfig, (str, dict)):
            raise AnsibleError("kubeconfig must be a path or a dict, got %s" % type(kubeconfig).__name__)
        return auth

    def _why_not_in_worker(self, task_vars):
        if IMPORT_ERROR is not None:
            return "the controller cannot import the kubernetes client: %s" % IMPORT_ERROR
        if _with_defaults is None:  # pragma: no cover - every supported ansible-core line has it
            return "this ansible-core cannot resolve the module_defaults of %s" % INFO_MODULE
        if self._connection.transport != "local":
            return "connection %s is not local" % self._connection.transport
        if self._task.delegate_to:
            return "the task is delegated"
        if self._play_context.become:
            return "become is set"
        interpreter = task_vars.get("ansible_python_interpreter")
        if interpreter is not None:
            interpreter = self._templar.template(interpreter)
        if not isinstance(interpreter, str) or not same_python(interpreter, sys.executable):
            return "the interpreter is not the controller's Python (%s)" % sys.executable
        return ""

    # ------------------------------------------------------------------ in the worker
    def _in_worker(self, result, queries, auth, secrets):
        environment = {}
        try:
            self._compute_environment_string(environment)
        except AnsibleError as exc:
            result.update(failed=True, msg="k8s_objects_info: %s" % to_text(exc))
            return result
        saved = dict(os.environ)
        os.environ.update((str(k), str(v)) for k, v in environment.items())
        try:
            validated = ArgumentSpecValidator(AUTH_ARG_SPEC).validate(auth)
            if validated.error_messages:
                secrets = secrets + [s for s in validated._no_log_values if isinstance(s, str)]
                raise AnsibleError("; ".join(validated.error_messages))
            params = dict((k, v) for k, v in validated.validated_parameters.items() if v is not None)
            client = get_api_client(**params)
            configuration = getattr(client, "configuration", None)
            secrets = secrets + _secrets(getattr(configuration, "api_key", None)) + _secrets(getattr(configuration, "password", None))
            service = K8sService(client, None)
            results = [self._read(client, service, query) for query in queries]
        except Exception as exc:  # pylint: disable=broad-except
            result.update(failed=True, msg=_scrub("k8s_objects_info: %s" % to_text(exc), secrets))
            if Display().verbosity >= 3:
                result["exception"] = _scrub(traceback.format_exc(), secrets)
            return result
        finally:
            os.environ.clear()
            os.environ.update(saved)
            # the client writes a kubeconfig's certificate and key data to temporary files, removed at exit by atexit;
            # an Ansible worker leaves through os._exit, which runs no atexit handler: remove them here
            _remove_temp_files()
        return self._finish(result, results)

    @staticmethod
    def _read(client, service, query):
        found = service.find(query["kind"], query["api_version"], name=query.get("name"), namespace=query.get("namespace"),
                             label_selectors=query["label_selectors"], field_selectors=query["field_selectors"])
        entry = {"query": dict((k, v) for k, v in query.items() if v not in (None, [], {}) and k != "wait"),
                 "resources": found.get("resources") or [], "api_found": bool(found.get("api_found"))}
        if query["wait"] and entry["api_found"]:
            try:
                resource = client.resource(query["kind"], query["api_version"])
            except (ResourceNotFoundError, ResourceNotUniqueError):
                resource = None
            if resource is not None and len(entry["resources"]) == 1:
                predicate = get_waiter(client, resource, condition=_module_condition(query["wait_condition"])).predicate
                entry["ready"] = bool(predicate(ResourceInstance(client, copy.deepcopy(entry["resources"][0]))))
            else:
                entry["ready"] = False
        return entry

    @staticmethod
    def _finish(result, results):
        result["results"] = results
        result["resources"] = [obj for entry in results for obj in entry["resources"]]
        result["api_found"] = all(entry["api_found"] for entry in results)
        return result

    # ------------------------------------------------------------------ on the target
    def _on_target(self, result, queries, auth, task_vars, secrets):
        results = []
        for query in queries:
            module_args = dict(auth)
            module_args.update(api_version=query["api_version"], kind=query["kind"])
            for key in ("name", "namespace", "label_selectors", "field_selectors"):
                if query.get(key):
                    module_args[key] = query[key]
            answer = self._execute_module(module_name=INFO_MODULE, module_args=module_args, task_vars=task_vars)
            if answer.get("failed"):
                result.update(failed=True, msg=_scrub("k8s_objects_info: %s" % to_text(answer.get("msg")), secrets))
                return result
            results.append({"query": dict((k, v) for k, v in query.items() if v not in (None, [], {}) and k != "wait"),
                            "resources": answer.get("resources") or [], "api_found": bool(answer.get("api_found"))})
        return self._finish(result, results)
