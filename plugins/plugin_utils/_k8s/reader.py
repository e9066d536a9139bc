# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
#
# Note that this plugin util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""The one Kubernetes reader of the collection's action plugins (k8s_objects_info, k8s_daemonset_wait, k8s_apply_plan).

A read costs a module process when kubernetes.core.k8s_info runs it: the process imports the kubernetes client and
reads the API discovery again. An action plugin already runs in a worker of ansible-playbook, so when the module
process would run on this machine with this Python (connection local, no delegation, no become, the controller's
interpreter) the reader builds the client here, through kubernetes.core's documented module_utils entry points
(``get_api_client`` and ``K8sService.find``, what k8s_info itself runs), and reads there. Anything else - another
connection or interpreter, a client that does not import - runs kubernetes.core.k8s_info as a module.

The connection options are what kubernetes.core.k8s_info would get: the task's own, over the ``module_defaults`` of
``kubernetes.core.k8s_info`` and of the groups that hold it (``group/kubernetes.core.k8s``, and ``group/k8s``, which
ansible-core extends to it), the task's ``environment`` and the K8S_AUTH_* variables. Only public interfaces of
ansible-core, kubernetes.core and the kubernetes client are used; tests/unit/test_private_names.py holds that.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import json
import os
import shutil
import stat
import sys
import tempfile
import time
import traceback

from ansible.errors import AnsibleError
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible.module_utils.common.text.converters import to_text
from ansible.module_utils.parsing.convert_bool import boolean
from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

try:
    from ansible_collections.kubernetes.core.plugins.module_utils.args_common import AUTH_ARG_SPEC
    from ansible_collections.kubernetes.core.plugins.module_utils.k8s.client import get_api_client
    from ansible_collections.kubernetes.core.plugins.module_utils.k8s.service import K8sService
    from ansible_collections.kubernetes.core.plugins.module_utils.k8s.waiter import get_waiter
    from kubernetes.dynamic.exceptions import ResourceNotFoundError, ResourceNotUniqueError
    from kubernetes.dynamic.resource import ResourceInstance
    IMPORT_ERROR = None
except ImportError as exc:  # this Python cannot read: every query runs kubernetes.core.k8s_info instead
    AUTH_ARG_SPEC = {}
    IMPORT_ERROR = exc

INFO_MODULE = "kubernetes.core.k8s_info"
# the module_defaults keys that reach kubernetes.core.k8s_info, in the order ansible-core merges them (groups first,
# then the module's own entry); module_defaults keys are already fully qualified when an action plugin sees them
DEFAULTS_KEYS = ("group/ansible.builtin.k8s", "group/kubernetes.core.k8s", INFO_MODULE)
QUERY_KEYS = ("api_version", "kind", "name", "namespace", "label_selectors", "field_selectors", "wait", "wait_condition")
SEPARATOR = ";" if sys.platform.startswith("win") else ":"


def auth_keys():
    """The connection options of kubernetes.core (names and aliases)."""
    keys = set(AUTH_ARG_SPEC)
    for spec in AUTH_ARG_SPEC.values():
        keys.update(spec.get("aliases") or [])
    return keys


def _strings(value):
    """Every string under ``value`` (a credential option's value), for scrubbing messages."""
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, (list, tuple)):
        return [s for v in value for s in _strings(v)]
    return [value] if isinstance(value, str) and len(value) >= 4 else []


def credential_strings(auth):
    """The credentials among the connection options: api_key, password, proxy_headers and, of a kubeconfig given as a
    dict, what its users hold (token, client key and certificate data, passwords, exec and auth-provider settings)."""
    found = [s for key in ("api_key", "password", "proxy_headers") for s in _strings(auth.get(key))]
    kubeconfig = auth.get("kubeconfig")
    if isinstance(kubeconfig, dict):
        for user in kubeconfig.get("users") or []:
            found.extend(_strings(user.get("user") if isinstance(user, dict) else None))
    return found


def no_log_strings(params):
    """The strings of every option that kubernetes.core's connection spec marks no_log (as its module would hide)."""
    return [s for key, spec in AUTH_ARG_SPEC.items() if spec.get("no_log") for s in _strings((params or {}).get(key))]


def scrub(text, secrets):
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


def query(raw, index):
    """One query, checked: a named object or a list (kind and selectors); a manifest (apiVersion, metadata) works too."""
    if not isinstance(raw, dict):
        raise AnsibleError("queries[%d] must be a dict, got %s" % (index, type(raw).__name__))
    found = dict(raw)
    meta = found.pop("metadata", None) or {}
    if "apiVersion" in found:
        found.setdefault("api_version", found.pop("apiVersion"))
    for key in ("name", "namespace"):
        if key not in found and meta.get(key):
            found[key] = meta[key]
    unknown = sorted(set(found) - set(QUERY_KEYS))
    if unknown:
        raise AnsibleError("queries[%d]: unknown keys %s (known: %s)" % (index, ", ".join(unknown), ", ".join(QUERY_KEYS)))
    if not isinstance(found.get("kind"), str) or not found["kind"]:
        raise AnsibleError("queries[%d]: kind is required" % index)
    found.setdefault("api_version", "v1")
    for key in ("label_selectors", "field_selectors"):
        value = found.get(key) or []
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise AnsibleError("queries[%d]: %s must be a list of strings" % (index, key))
        found[key] = value
    found["wait"] = boolean(found.get("wait", False), strict=False)
    condition = found.get("wait_condition") or {}
    if not isinstance(condition, dict):
        raise AnsibleError("queries[%d]: wait_condition must be a dict" % index)
    found["wait_condition"] = condition
    return found


def _module_condition(condition):
    """The wait_condition as kubernetes.core.k8s's argument spec hands it to its waiter (status defaults to True)."""
    if not condition:
        return None
    return {"type": condition.get("type"), "status": condition.get("status", True), "reason": condition.get("reason")}


def _shown_query(one):
    return dict((k, v) for k, v in one.items() if v not in (None, [], {}) and k != "wait")


# the environment variables that name the API server a read reaches (kubernetes.core's K8S_AUTH_* and the client's own)
CONNECTION_ENVIRONMENT = ("K8S_AUTH_KUBECONFIG", "K8S_AUTH_CONTEXT", "K8S_AUTH_HOST", "KUBECONFIG")
# a connection's cache folder not used for this long is removed when another connection's folder is made
CACHE_KEPT_S = 7 * 24 * 3600


def connection_names(auth, environment):
    """What names the API server of a read, without a credential: the kubeconfig's path (of a kubeconfig given as a
    dict, its clusters and contexts, never its users), the context, the host and the variables that can set them."""
    merged = dict(os.environ)
    merged.update((str(k), str(v)) for k, v in environment.items())
    kubeconfig = auth.get("kubeconfig")
    if isinstance(kubeconfig, dict):
        kubeconfig = dict((key, kubeconfig.get(key)) for key in ("clusters", "contexts", "current-context"))
    return [kubeconfig, auth.get("context"), auth.get("host")] + [merged.get(name) for name in CONNECTION_ENVIRONMENT]


def _own_folder(path):
    """``path`` made if missing, or None when it is not this user's alone (a link, another owner, other permissions)."""
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
        found = os.lstat(path)
    except OSError:
        return None
    if not stat.S_ISDIR(found.st_mode) or found.st_uid != os.getuid() or stat.S_IMODE(found.st_mode) != 0o700:
        return None
    return path


def _prune(folder, keep):
    """Remove the connections' cache folders (and files) in ``folder`` unused for CACHE_KEPT_S, except ``keep``."""
    now = time.time()
    for name in os.listdir(folder):
        path = os.path.join(folder, name)
        with contextlib.suppress(OSError):
            if name != keep and now - os.lstat(path).st_mtime > CACHE_KEPT_S:
                if os.path.isdir(path) and not os.path.islink(path):
                    shutil.rmtree(path, ignore_errors=True)
                else:
                    os.remove(path)


def _cache_folder(names=None):
    """This user's folder for the client's caches between reads of one connection (the API discovery kubernetes.core
    keeps as JSON in the temporary folder), or None when it is not ours alone. Each connection has a folder of its own,
    named by a digest of ``names`` (connection_names): a read hands on only its own server's cache, however many
    servers this user has read before."""
    user = _own_folder(os.path.join(tempfile.gettempdir(), "gpu_ops_k8s_reader-%d" % os.getuid()))
    if user is None:
        return None
    key = hashlib.sha256(json.dumps(names, sort_keys=True, default=str).encode("utf-8")).hexdigest()[:24]
    path = os.path.join(user, key)
    if not os.path.exists(path):
        _prune(user, key)
    return _own_folder(path)


@contextlib.contextmanager
def _process_state(environment, names=None):
    """The task's environment for the client (K8S_AUTH_*, proxies), and a temporary folder of the read's own.

    The client writes a kubeconfig's certificate and key data to temporary files and removes them at exit, which a
    worker (it leaves through os._exit) never reaches: the read's folder goes when the read ends. What the client
    caches there as JSON (kubernetes.core's API discovery, no credential) is kept in this user's cache folder of the
    connection ``names`` and handed to the next read of it, so that each read does not discover the APIs again."""
    saved_environ = dict(os.environ)
    saved_tempdir = tempfile.tempdir
    cache = _cache_folder(names)
    folder = tempfile.mkdtemp(prefix="gpu_ops_k8s_read_", dir=cache)
    for name in os.listdir(cache) if cache else ():
        if name.endswith(".json"):
            with contextlib.suppress(OSError):
                shutil.copyfile(os.path.join(cache, name), os.path.join(folder, name))
    os.environ.update((str(k), str(v)) for k, v in environment.items())
    tempfile.tempdir = folder
    try:
        yield
    finally:
        tempfile.tempdir = saved_tempdir
        os.environ.clear()
        os.environ.update(saved_environ)
        for name in os.listdir(folder) if cache else ():
            if name.endswith(".json"):
                with contextlib.suppress(OSError):
                    os.replace(os.path.join(folder, name), os.path.join(cache, name))
        shutil.rmtree(folder, ignore_errors=True)


class K8sReadAction(ActionBase):
    """The base of the collection's Kubernetes action plugins: option checks, the connection, and reads in the worker
    or through kubernetes.core.k8s_info (check mode: yes; async: no)."""

    _SUPPORTS_CHECK_MODE = True
    _SUPPORTS_ASYNC = False
    # the kubeconfig option as the task gives it (set by auth())
    named_kubeconfig = None

    # ------------------------------------------------------------------ options
    def start(self, tmp, task_vars):
        """ActionBase.run's shared checks, a result that changes nothing, and a copy of the task's arguments."""
        result = ActionBase.run(self, tmp, task_vars)
        result.update(changed=False)
        return result, dict(self._task.args)

    @staticmethod
    def named(name, exc):
        """The message of the error ``exc``, named after the action."""
        return "%s: %s" % (name, to_text(exc.message if hasattr(exc, "message") else exc))

    def refused(self, result, name, exc):
        """``result`` failed with the option error ``exc``, named after the action."""
        result.update(failed=True, msg=self.named(name, exc))
        return result

    def defaults(self):
        """The connection options that module_defaults give kubernetes.core.k8s_info in this task, templated."""
        merged = {}
        for entry in self._task.module_defaults or []:
            if isinstance(entry, dict):
                merged.update(entry)
        found = {}
        for key in DEFAULTS_KEYS:
            values = merged.get(key)
            if values:
                values = self._templar.template(values)
                if not isinstance(values, dict):
                    raise AnsibleError("module_defaults for %s must be a dict" % key)
                found.update(values)
        return found

    def auth(self, explicit):
        """The connection options kubernetes.core.k8s_info would run with: the task's own over its module_defaults, a
        kubeconfig path relative to the playbook resolved as Ansible resolves paths, and a vaulted one decrypted."""
        merged = self.defaults()
        merged.update(explicit)
        auth = dict((k, v) for k, v in merged.items() if k in auth_keys() and v is not None)
        kubeconfig = auth.get("kubeconfig")
        # a vaulted kubeconfig is read from a new temporary copy each time: its cache goes by the path the task names
        self.named_kubeconfig = kubeconfig
        if isinstance(kubeconfig, str) and kubeconfig and self._connection.transport == "local":
            configs = []
            for config in kubeconfig.split(SEPARATOR):
                path = self._loader.path_dwim(os.path.expanduser(config))
                configs.append(self._loader.get_real_file(path, decrypt=True) if os.path.exists(path) else path)
            auth["kubeconfig"] = SEPARATOR.join(configs)
        elif kubeconfig is not None and not isinstance(kubeconfig, (str, dict)):
            raise AnsibleError("kubeconfig must be a path or a dict, got %s" % type(kubeconfig).__name__)
        return auth

    def why_not_here(self, task_vars):
        """Why this worker cannot read as the module process would ("" when it can)."""
        if IMPORT_ERROR is not None:
            return "the controller cannot import the kubernetes client: %s" % IMPORT_ERROR
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

    def environment(self):
        """The task's ``environment:``, templated (what the module process would have in its environment)."""
        found = {}
        entries = self._task.environment or []
        for entry in entries if isinstance(entries, list) else [entries]:
            entry = self._templar.template(entry)
            if entry in (None, ""):
                continue
            if not isinstance(entry, dict):
                raise AnsibleError("environment must be a dict, got %s" % type(entry).__name__)
            found.update(entry)
        return found

    # ------------------------------------------------------------------ reads
    def read_here(self, result, queries, auth, secrets):
        """Every query read in this worker; ``result`` with ``results``, ``resources`` and ``api_found``, or failed."""
        try:
            environment = self.environment()
        except AnsibleError as exc:
            result.update(failed=True, msg="k8s_objects_info: %s" % to_text(exc))
            return result
        try:
            named = dict(auth, kubeconfig=self.named_kubeconfig if self.named_kubeconfig is not None else auth.get("kubeconfig"))
            with _process_state(environment, connection_names(named, environment)):
                validated = ArgumentSpecValidator(AUTH_ARG_SPEC).validate(auth)
                secrets = secrets + no_log_strings(validated.validated_parameters)
                if validated.error_messages:
                    raise AnsibleError("; ".join(validated.error_messages))
                params = dict((k, v) for k, v in validated.validated_parameters.items() if v is not None)
                client = get_api_client(**params)
                configuration = getattr(client, "configuration", None)
                secrets = (secrets + _strings(getattr(configuration, "api_key", None))
                           + _strings(getattr(configuration, "password", None)))
                service = K8sService(client, None)
                results = [self._read(client, service, one) for one in queries]
        except Exception as exc:  # pylint: disable=broad-except
            result.update(failed=True, msg=scrub("k8s_objects_info: %s" % to_text(exc), secrets))
            if Display().verbosity >= 3:
                result["exception"] = scrub(traceback.format_exc(), secrets)
            return result
        return self.finish(result, results)

    @staticmethod
    def _read(client, service, one):
        found = service.find(one["kind"], one["api_version"], name=one.get("name"), namespace=one.get("namespace"),
                             label_selectors=one["label_selectors"], field_selectors=one["field_selectors"])
        entry = {"query": _shown_query(one), "resources": found.get("resources") or [],
                 "api_found": bool(found.get("api_found"))}
        if one["wait"] and entry["api_found"]:
            try:
                resource = client.resource(one["kind"], one["api_version"])
            except (ResourceNotFoundError, ResourceNotUniqueError):
                resource = None
            if resource is not None and len(entry["resources"]) == 1:
                predicate = get_waiter(client, resource, condition=_module_condition(one["wait_condition"])).predicate
                entry["ready"] = bool(predicate(ResourceInstance(client, copy.deepcopy(entry["resources"][0]))))
            else:
                entry["ready"] = False
        return entry

    @staticmethod
    def finish(result, results):
        result["results"] = results
        result["resources"] = [obj for entry in results for obj in entry["resources"]]
        result["api_found"] = all(entry["api_found"] for entry in results)
        return result

    def read_on_target(self, result, queries, auth, task_vars, secrets):
        """Every query through kubernetes.core.k8s_info, as a module on the task's target."""
        results = []
        for one in queries:
            module_args = dict(auth)
            module_args.update(api_version=one["api_version"], kind=one["kind"])
            for key in ("name", "namespace", "label_selectors", "field_selectors"):
                if one.get(key):
                    module_args[key] = one[key]
            answer = self._execute_module(module_name=INFO_MODULE, module_args=module_args, task_vars=task_vars)
            if answer.get("failed"):
                result.update(failed=True, msg=scrub("k8s_objects_info: %s" % to_text(answer.get("msg")), secrets))
                return result
            results.append({"query": _shown_query(one), "resources": answer.get("resources") or [],
                            "api_found": bool(answer.get("api_found"))})
        return self.finish(result, results)

    def read(self, result, queries, auth, task_vars, secrets):
        """Every query, here when the worker reads as the module would, else through kubernetes.core.k8s_info."""
        why_not = self.why_not_here(task_vars)
        result["in_worker"] = not why_not
        if why_not:
            result["in_worker_reason"] = why_not
            return self.read_on_target(result, queries, auth, task_vars, secrets)
        return self.read_here(result, queries, auth, secrets)
