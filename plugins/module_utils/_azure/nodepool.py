# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
#
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
"""AKS engine of gpu_ops.cluster.gpu_nodepool (provider aks): one agent pool through ARM.

The shape of the run is ``_nodepool.NodePoolEngine`` (validate -> read -> plan -> preflight -> apply
-> result):

1. Validate every option before any request (names, counts, autoscaler bounds, taints, labels, and
   the multi-instance GPU rules from the MIG catalog: a known profile, a VM size that supports it,
   not on Azure Linux, not with the cluster autoscaler).
2. Read the pool once (waiting first when an operation on it is still running), and plan with
   ``_plan.Plan``: sparse compare of what the user set; a change to an immutable property
   (vmSize, gpuInstanceProfile, osSKU, gpuProfile.driver) names the options and fails unless
   ``recreate: true``, which deletes the pool and creates it again.
3. Before a create, check that the cluster exists (preflight).
4. Outside check mode, carry the plan out. ARM agent pools are written with PUT, which replaces
   the pool, so an update sends the current pool (read-only properties removed) with the wanted
   changes applied: nothing the user did not set is lost. Every write is waited for (LRO).

A PUT whose first attempt reached ARM but whose answer was lost (connection reset) is retried by
the HTTP layer and then meets "another operation is in progress" (409): the engine waits for that
operation and re-reads, so the run converges with one pool.
"""

from __future__ import annotations

import copy
import re

from ansible_collections.gpu_ops.cluster.plugins.module_utils._catalog import mig as mig_catalog
from ansible_collections.gpu_ops.cluster.plugins.module_utils._mig import nodes as mig_nodes
from ansible_collections.gpu_ops.cluster.plugins.module_utils._azure.session import ArmSession
from ansible_collections.gpu_ops.cluster.plugins.module_utils._core.transport import ApiError
from ansible_collections.gpu_ops.cluster.plugins.module_utils._nodepool.engine import NodePoolEngine, PoolError
from ansible_collections.gpu_ops.cluster.plugins.module_utils._nodepool.engine import foreign_option_problems
from ansible_collections.gpu_ops.cluster.plugins.module_utils._nodepool.engine import input_check as check_engine
from ansible_collections.gpu_ops.cluster.plugins.module_utils._nodepool.engine import run as run_engine
from ansible_collections.gpu_ops.cluster.plugins.module_utils._core.plan import differing_fields
from ansible_collections.gpu_ops.cluster.plugins.module_utils._core.problems import Problems, check_labels, parse_taints

# The AKS REST api-version used for agent pools: the one azure-mgmt-containerservice 41.8's models
# describe (tests/contract/arm_models.py checks every request body against them).
API_VERSION = "2026-08-01"
KIND = "agentPool"
PROVIDER_PATH = "resourceGroups/%s/providers/Microsoft.ContainerService/managedClusters/%s"

GPU_DRIVERS = ("Install", "None")
MODES = ("User", "System")
MIG_STRATEGIES = ("single", "mixed")

# option -> ARM property that cannot change on an existing pool
IMMUTABLE = (
    ("vm_size", "properties.vmSize"),
    ("gpu_instance_profile", "properties.gpuInstanceProfile"),
    ("os_sku", "properties.osSKU"),
    ("gpu_driver", "properties.gpuProfile.driver"),
)
IMMUTABLE_FIELDS = dict((field, option) for option, field in IMMUTABLE)
IMMUTABLE_FIELDS["properties.gpuProfile"] = "gpu_driver"  # when the pool has no gpuProfile at all

# what AKS uses when a pool document leaves these out (compared as if present)
SERVER_DEFAULTS = (("osSKU", "Ubuntu"), ("osType", "Linux"), ("mode", "User"), ("enableAutoScaling", False))
DEFAULT_GPU_DRIVER = "Install"

# read-only properties of an AgentPool (azure-mgmt-containerservice models, visibility "read";
# tests/contract checks this list against the SDK)
READ_ONLY_TOP = ("id", "name", "type", "systemData")
READ_ONLY_PROPERTIES = ("provisioningState", "currentOrchestratorVersion", "eTag")
READ_ONLY_NESTED = (("status", "provisioningError"), ("localDNSProfile", "state"))
# server-chosen properties of the old pool that must not be copied into a recreated one
NOT_CARRIED_ON_RECREATE = ("nodeImageVersion", "powerState", "status", "creationData")

SETTLED_STATES = ("succeeded", "failed", "canceled", "cancelled")

SUBSCRIPTION_ID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\Z")
# The path parameters' rules of the ContainerService REST API (the older generated SDKs carried them as
# validation): a resource group 1-90 characters (common-types ResourceGroupNameParameter, not ending with '.'),
# a managed cluster 1-63 (ResourceNameParameter), an agent pool ^[a-z][a-z0-9]{0,11}$ (AgentPoolNameParameter; a
# Windows pool has at most 6 characters, and this engine creates Linux pools only).
RESOURCE_GROUP = re.compile(r"^[-\w._()]{0,89}[-\w_()]\Z", re.UNICODE)
CLUSTER_NAME = re.compile(r"^[A-Za-z0-9](?:[-_A-Za-z0-9]{0,61}[A-Za-z0-9])?\Z")
POOL_NAME = re.compile(r"^[a-z][a-z0-9]{0,11}\Z")
VM_SIZE = re.compile(r"^standard_[a-z0-9_]+\Z", re.IGNORECASE)
VERSION = re.compile(r"^\d+\.\d+(?:\.\d+)?\Z")
RESERVED_LABEL_PREFIXES = ("kubernetes.azure.com/",)

# gpu_nodepool options of the GKE provider, with the value that counts as "not set". The GCP account
# options (_core.argspec.GCP_ACCOUNT_SPEC) are not listed: module_defaults of group/gpu_ops.cluster.gcp reach
# every member of the group, AKS pools included, so they are ignored here rather than refused.
GKE_ONLY = dict(
    location=None, node_locations=None, machine_type=None, accelerator_type=None,
    accelerator_count=None, gpu_driver_version=None, gpu_partition_size=None, gpu_sharing=None, gpudirect=None,
    additional_node_networks=None, gvnic=None, image_type="COS_CONTAINERD", placement_policy=None,
    reservation_affinity=None, host_maintenance_interval=None, service_account=None, oauth_scopes=None,
    disk_size_gb=None, disk_type=None, spot=None, auto_upgrade=False, auto_repair=True, node_version=None,
    accelerator_network_profile=None,
)


# --------------------------------------------------------------------------- validation


def validate(params):
    """All input problems of an AKS pool that can be found without a request (a Problems object)."""
    problems = Problems()
    foreign_option_problems(problems, params, GKE_ONLY, "aks", "a GKE")
    check_target(problems, params)
    if params.get("state", "present") == "absent":
        return problems
    _check_pattern(problems, "vm_size", params.get("vm_size"), VM_SIZE, "an Azure VM size such as Standard_ND96asr_v4")
    _check_choice(problems, "mode", params.get("mode"), MODES)
    _check_choice(problems, "gpu_driver", params.get("gpu_driver"), GPU_DRIVERS)
    _check_choice(problems, "mig_strategy", params.get("mig_strategy"), MIG_STRATEGIES)
    _check_pattern(problems, "orchestrator_version", params.get("orchestrator_version"), VERSION,
                   "a Kubernetes version such as 1.33 or 1.33.2")
    _check_counts(problems, params)
    _check_mig(problems, params.get("vm_size"), params.get("gpu_instance_profile"), params.get("os_sku"),
               params.get("enable_autoscaling"))
    check_labels(problems, "node_labels", params.get("node_labels"))
    for key in params.get("node_labels") or {}:
        if any(str(key).startswith(prefix) for prefix in RESERVED_LABEL_PREFIXES):
            problems.add("node_labels", "%r uses the prefix AKS reserves for its own labels (%s)"
                         % (key, ", ".join(RESERVED_LABEL_PREFIXES)))
    parse_taints(problems, "node_taints", params.get("node_taints"))
    return problems


def check_target(problems, params, name_required=True):
    """The names of the ARM path (subscription, resource group, cluster, pool): checked before any request, reads too."""
    _check_pattern(problems, "subscription_id", params.get("subscription_id"), SUBSCRIPTION_ID,
                   "a subscription ID (a GUID such as 00000000-0000-0000-0000-000000000000)", required=True)
    _check_pattern(problems, "resource_group", params.get("resource_group"), RESOURCE_GROUP,
                   "1 to 90 letters, digits, '-', '_', '.', '(' or ')', not ending with '.'", required=True)
    _check_pattern(problems, "cluster", params.get("cluster"), CLUSTER_NAME,
                   "1 to 63 letters, digits, '-' or '_', starting and ending with a letter or digit", required=True)
    _check_pattern(problems, "name", params.get("name"), POOL_NAME,
                   "1 to 12 lowercase letters and digits, starting with a letter", required=name_required)


def _check_pattern(problems, option, value, pattern, what, required=False):
    if value is None or value == "":
        if required:
            problems.add(option, "is required with provider=aks")
        return
    if not isinstance(value, str) or not pattern.match(value):
        problems.add(option, "%r is not valid: expected %s" % (value, what))


def _check_choice(problems, option, value, allowed):
    if value is not None and value not in allowed:
        problems.add(option, "%r is not one of: %s" % (value, ", ".join(allowed)))


def _check_counts(problems, params):
    count, low, high = params.get("node_count"), params.get("min_count"), params.get("max_count")
    system = params.get("mode") == "System"
    for option, value in (("node_count", count), ("min_count", low), ("max_count", high)):
        if value is not None and not 0 <= value <= 1000:
            problems.add(option, "%s is out of range: allowed 0 to 1000" % value)
    if system and count == 0:
        problems.add("node_count", "a System pool needs at least 1 node")
    if params.get("enable_autoscaling"):
        if low is None or high is None:
            problems.add("enable_autoscaling", "needs min_count and max_count")
        elif low > high:
            problems.add("min_count", "%s is greater than max_count %s" % (low, high))
        elif count is not None and not low <= count <= high:
            problems.add("node_count", "%s is outside min_count..max_count (%s..%s)" % (count, low, high))
    elif low is not None or high is not None:
        problems.add("min_count" if low is not None else "max_count",
                     "is only used with enable_autoscaling: true")


def _check_mig(problems, vm_size, profile, os_sku, autoscaling):
    """The multi-instance GPU rules of the MIG catalog, with effective values (the options, or the pool's current values)."""
    well_formed = vm_size if vm_size is not None and VM_SIZE.match(vm_size) else None
    problems.extend(mig_catalog.aks_pool_problems(well_formed, profile, os_sku, autoscaling))


# --------------------------------------------------------------------------- documents


def desired_properties(params, current=None):
    """The ARM properties the options set (camelCase, unset options left out)."""
    props = {}
    mapping = (
        ("vm_size", "vmSize"), ("node_count", "count"), ("gpu_instance_profile", "gpuInstanceProfile"),
        ("os_sku", "osSKU"), ("mode", "mode"), ("orchestrator_version", "orchestratorVersion"),
        ("enable_autoscaling", "enableAutoScaling"), ("min_count", "minCount"), ("max_count", "maxCount"),
    )
    for option, field in mapping:
        if params.get(option) is not None:
            props[field] = params[option]
    if params.get("node_labels") is not None:
        props["nodeLabels"] = dict(("%s" % k, "%s" % v) for k, v in params["node_labels"].items())
    if params.get("node_taints") is not None:
        props["nodeTaints"] = list(params["node_taints"])
    if params.get("gpu_driver") is not None:
        props["gpuProfile"] = dict(driver=params["gpu_driver"])
    if props.get("enableAutoScaling") is False:
        props.pop("minCount", None)
        props.pop("maxCount", None)
    if current is None:
        props.setdefault("osType", "Linux")
        props.setdefault("mode", "User")
        props.setdefault("type", "VirtualMachineScaleSets")
        if props.get("enableAutoScaling"):
            count = props.get("count")
            if count is None or not props["minCount"] <= count <= props["maxCount"]:
                props["count"] = props["minCount"]
    return props


def strip_read_only(document):
    """A copy of an agent pool without the properties ARM computes."""
    document = copy.deepcopy(document or {})
    for key in READ_ONLY_TOP:
        document.pop(key, None)
    props = document.get("properties") or {}
    for key in READ_ONLY_PROPERTIES:
        props.pop(key, None)
    for parent, key in READ_ONLY_NESTED:
        if isinstance(props.get(parent), dict):
            props[parent].pop(key, None)
            if not props[parent]:
                props.pop(parent)
    document["properties"] = props
    return dict(properties=props)


def merged_body(current, wanted, recreate=False):
    """The PUT body: the current pool (read-only properties removed) with the wanted properties applied."""
    body = strip_read_only(current)
    props = body["properties"]
    if recreate:
        for key in NOT_CARRIED_ON_RECREATE:
            props.pop(key, None)
    for key, value in wanted.items():
        if key == "gpuProfile" and isinstance(props.get("gpuProfile"), dict):
            props["gpuProfile"] = dict(props["gpuProfile"], **value)
        else:
            props[key] = copy.deepcopy(value)
    if props.get("enableAutoScaling"):
        low, high = props.get("minCount"), props.get("maxCount")
        if low is not None and high is not None:
            props["count"] = min(max(props.get("count", low), low), high)
    else:
        props.pop("minCount", None)
        props.pop("maxCount", None)
    return body


def compare(wanted, current):
    """Dotted properties that differ (labels compare as whole maps, taints as sets).

    A property the pool document leaves out counts as its AKS default (osSKU Ubuntu, GPU driver
    Install, ...), so a re-run with the default spelled out is no change.
    """
    have = copy.deepcopy((current or {}).get("properties") or {})
    for key, value in SERVER_DEFAULTS:
        if have.get(key) is None:
            have[key] = value
    if "gpuProfile" in wanted:
        gpu = have.get("gpuProfile") if isinstance(have.get("gpuProfile"), dict) else {}
        have["gpuProfile"] = dict(gpu, driver=gpu.get("driver") or DEFAULT_GPU_DRIVER)
    if wanted.get("vmSize") and str(have.get("vmSize") or "").lower() == wanted["vmSize"].lower():
        wanted = dict(wanted, vmSize=have["vmSize"])  # VM sizes are case-insensitive
    current = dict(properties=have)
    sparse = dict((k, v) for k, v in wanted.items() if k not in ("nodeLabels", "nodeTaints"))
    if _autoscaling(wanted, have):
        sparse.pop("count", None)  # the autoscaler owns the node count
    fields = differing_fields(dict(properties=sparse), current)
    if "nodeLabels" in wanted and (have.get("nodeLabels") or {}) != wanted["nodeLabels"]:
        fields.append("properties.nodeLabels")
    if "nodeTaints" in wanted and sorted(have.get("nodeTaints") or []) != sorted(wanted["nodeTaints"]):
        fields.append("properties.nodeTaints")
    return sorted(fields)


def _autoscaling(wanted, have):
    if wanted.get("enableAutoScaling") is not None:
        return bool(wanted["enableAutoScaling"])
    return bool(have.get("enableAutoScaling"))


def expected_resources(params, pool=None):
    """Extended resources one node of the pool advertises, from the MIG catalog; None when unknown.

    The VM size and GPU instance profile are the pool's (``pool``, an agent-pool document) where it
    has them, else the options'; the strategy is ``mig_strategy``.
    """
    props = (pool or {}).get("properties") or {}
    vm_size = props.get("vmSize") or params.get("vm_size")
    profile = props.get("gpuInstanceProfile") or params.get("gpu_instance_profile")
    strategy = params.get("mig_strategy")
    if not vm_size:
        return None
    try:
        if profile:
            info = mig_catalog.aks_profile(vm_size, profile)
            return mig_nodes.expected_node_resources(info["gpu_model"], info["gpus_per_vm"], info["layout"],
                                                     strategy or "single")
        size, facts = mig_catalog.aks_vm_size(vm_size)
        del size
        return {mig_catalog.GPU_RESOURCE: facts["gpus"]}
    except ValueError:
        return None


# --------------------------------------------------------------------------- engine


class PoolEngine(NodePoolEngine):
    """Plans and applies one AKS agent pool; the session is an _azure.session.ArmSession."""

    PROVIDER, API = "aks", "ARM"
    validate = staticmethod(validate)
    expected_resources = staticmethod(expected_resources)

    @classmethod
    def open_session(cls, context, **options):
        return context.session(ArmSession, **options)

    def __init__(self, context, session):
        super().__init__(context, session)
        base = PROVIDER_PATH % (self.params["resource_group"], self.params["cluster"])
        self.cluster_url = session.url(base, API_VERSION)
        self.pool_url = session.url("%s/agentPools/%s" % (base, self.params["name"]), API_VERSION)

    # ---------------------------------------------------------------- reads

    def read_back(self):
        return self.session.get(self.pool_url)

    def desired_document(self):
        return self.plan.changes[-1].request

    def read(self):
        """The pool, after any running operation on it has finished (None when absent)."""
        current = self.read_back()
        state = _state(current)
        if current is not None and state not in SETTLED_STATES and not self.check_mode:
            method = "DELETE" if state == "deleting" else "GET"
            current = self.session.wait_for_state(self.pool_url, method=method, first=current)
        return current

    def preflight(self):
        """Before a create: the cluster exists (render mode: an earlier step of the run creates it)."""
        if self.session.render or not any(c.action == "create" for c in self.plan.changes):
            return
        if self.session.get(self.cluster_url) is None:
            raise PoolError("cluster %s was not found in resource group %s (subscription %s)" % (
                self.params["cluster"], self.params["resource_group"], self.params["subscription_id"]))

    # ---------------------------------------------------------------- planning

    def plan_present(self, current):
        params = self.params
        name = params["name"]
        if current is None:
            if not params.get("vm_size"):
                raise PoolError("vm_size: is required to create agent pool %s" % name)
            wanted = desired_properties(params)
            body = dict(properties=wanted)
            self.plan.create(KIND, name, after=body, request=body)
            return
        have = current.get("properties") or {}
        problems = Problems()
        _check_mig(problems,
                   params.get("vm_size") or have.get("vmSize"),
                   params.get("gpu_instance_profile") or have.get("gpuInstanceProfile"),
                   params.get("os_sku") or have.get("osSKU"),
                   params["enable_autoscaling"] if params.get("enable_autoscaling") is not None
                   else have.get("enableAutoScaling"))
        if problems:
            raise PoolError(problems.message("gpu_nodepool (provider aks) for the existing pool %s" % name))
        wanted = desired_properties(params, current)
        fields = compare(wanted, current)
        immutable = [f for f in fields if f in IMMUTABLE_FIELDS]
        failed = _state(current) in ("failed", "canceled", "cancelled")
        if immutable:
            if not params.get("recreate"):
                raise PoolError(
                    "%s cannot be changed on the existing agent pool %s (%s); set recreate: true to delete and "
                    "recreate the pool" % (", ".join(IMMUTABLE_FIELDS[f] for f in immutable), name, "; ".join(
                        "%s: %s -> %s" % (f, _dotted(current, f), _dotted(dict(properties=wanted), f))
                        for f in immutable)))
            body = merged_body(current, wanted, recreate=True)
            self.plan.recreate(KIND, name, before=current, after=body, fields=fields, request=body)
            return
        if fields or failed:
            body = merged_body(current, wanted)
            if failed:
                self.warnings.append("agent pool %s was in provisioning state %s: sending it again to reconcile"
                                     % (name, have.get("provisioningState")))
                fields = fields + ["properties.provisioningState"]
            self.plan.update(KIND, name, before=current, after=body, fields=fields, request=body)

    def plan_absent(self, current):
        if current is not None:
            self.plan.delete(KIND, self.params["name"], before=current)

    # ---------------------------------------------------------------- applying

    def apply(self):
        wait = self.params.get("wait", True) is not False
        for change in self.plan.changes:
            if change.action == "delete":
                self._delete(wait)
            elif change.action == "recreate":
                self._delete(True)
                self.answered = self._put(change.request, wait)
            else:
                self.answered = self._put(change.request, wait)

    def _put(self, body, wait):
        try:
            response = self.session.put(self.pool_url, body)
        except ApiError as exc:
            if exc.status != 409:
                raise
            # an operation on the pool is running: our own earlier attempt that reached ARM (its
            # answer lost), or someone else's. Wait for it, then check the outcome.
            settled = self.session.wait_for_state(self.pool_url)
            if settled is not None and not compare(body["properties"], settled) and _state(settled) == "succeeded":
                return settled
            response = self.session.put(self.pool_url, body)
        if not wait:
            return response.body
        return self.session.wait(response)

    def _delete(self, wait):
        try:
            response = self.session.delete(self.pool_url)
        except ApiError as exc:
            if exc.status != 409:
                raise
            current = self.session.wait_for_state(self.pool_url)
            if current is None:
                return
            response = self.session.delete(self.pool_url)
        if wait:
            self.session.wait(response)


def _state(document):
    return str(((document or {}).get("properties") or {}).get("provisioningState") or "").lower() or None


def _dotted(document, path):
    value = document
    for part in path.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


def run(params, context, **session_options):
    """Entry point of gpu_nodepool for provider aks (the contract of ``_core.contract``; ``session_options``
    go to ArmSession, for tests)."""
    return run_engine(params, context, PoolEngine, **session_options)


def input_check(params):
    """What ``validate_only`` returns for provider aks: the input problems, without any request."""
    return check_engine(params, PoolEngine)
