# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Kubernetes naming rules (plugin_utils/_k8s/names.py) and the filters roles reach them through."""

from __future__ import annotations

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.gpu_ops.cluster.plugins.filter.k8s_names import (
    k8s_apply_batches,
    k8s_manifest_problems,
    k8s_name_problems,
    k8s_objects,
    node_taint_tolerations,
)
from ansible_collections.gpu_ops.cluster.plugins.plugin_utils._k8s import names as _k8s_names

GOOD = [
    ("namespace", "gpu-ops"),
    ("namespace", "a" * 63),
    ("object_name", "nccl-test.v1"),
    ("object_name", "a" * 253),
    ("helm_release", "nvidia-device-plugin"),
    ("helm_release", "a" * 53),
    ("label_key", "cloud.google.com/gke-accelerator"),
    ("label_key", "app"),
    ("label_value", ""),
    ("label_value", "nvidia-h100-mega-80gb"),
    ("label_value", 8),
    ("labels", {"app": "x", "nvidia.com/mig.strategy": "single"}),
    ("image", "ubuntu"),
    ("image", "nvcr.io/nvidia/k8s-device-plugin:v0.17.0"),
    ("image", "us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpxo/nccl-plugin-gpudirecttcpx-dev:v1.0.8-1"),
    ("image", "localhost:5000/team/x@sha256:" + "0" * 64),
    ("registry", "mirror.example.com:5000/gke"),
    ("registry", "us-docker.pkg.dev"),
    ("path_segment", "10-gpu-networks"),
    ("path_segment", "a.b_c-d"),
]

# (rule, value, words in the message): a hostile new user's names
BAD = [
    ("namespace", "GPU", "not a DNS-1123 label"),
    ("namespace", "gpu_ops", "not a DNS-1123 label"),
    ("namespace", "-gpu", "not a DNS-1123 label"),
    ("namespace", "gpu-", "not a DNS-1123 label"),
    ("namespace", "a" * 64, "64 characters long, a DNS-1123 label has at most 63"),
    ("namespace", "", "must not be empty"),
    ("namespace", None, "is required"),
    ("namespace", 7, "must be a string, got int"),
    ("namespace", ["a"], "must be a string, got list"),
    ("namespace", "gpu.ops", "not a DNS-1123 label"),
    ("namespace", "g\u00f6pu", "'g\\xf6pu' is not a DNS-1123 label"),
    ("namespace", "gpu\nops", "'gpu\\nops'"),
    ("object_name", "a..b", "not a DNS-1123 subdomain"),
    ("object_name", "../etc", "not a DNS-1123 subdomain"),
    ("object_name", "a" * 254, "at most 253"),
    ("helm_release", "a" * 54, "a Helm release name has at most 53"),
    ("helm_release", "My_Release", "not a Helm release name"),
    ("label_key", "bad key", "not a label key"),
    ("label_key", "/app", "empty prefix"),
    ("label_key", "example.com/", "no name after the prefix"),
    ("label_key", "Example_.com/app", "the prefix of"),
    ("label_key", "a" * 64, "at most 63"),
    ("label_value", "-x", "not a label value"),
    ("label_value", "a b", "not a label value"),
    ("label_value", "a" * 64, "a label value has at most 63"),
    ("label_value", True, "must be a string, got bool"),
    ("label_value", None, "must be a string, got NoneType"),
    ("labels", ["app=x"], "must be a dict"),
    ("labels", {"app": "x y"}, "app: 'x y' is not a label value"),
    ("image", "x:", "not an image reference"),
    ("image", "UPPER/x", "must be lowercase"),
    ("image", "nvcr.io/nvidia/X:1", "not an image reference"),
    ("image", "nvcr.io/x:1 ; rm -rf /", "not an image reference"),
    ("image", "x@sha256:abc", "not an image reference"),
    ("image", "x:" + "t" * 129, "not an image reference"),
    ("image", "", "must not be empty"),
    ("registry", "https://mirror.example.com", "is not a registry"),
    ("registry", "mirror.example.com/Team", "is not a registry"),
    ("registry", "mirror.example.com/x:1", "is not a registry"),
    ("path_segment", "..", "would leave its folder"),
    ("path_segment", ".", "would leave its folder"),
    ("path_segment", "../../etc", "path separator"),
    ("path_segment", "/etc/cron.d", "path separator"),
    ("path_segment", "a\\b", "path separator"),
    ("path_segment", "-rf", "not a plain name"),
    ("path_segment", ".hidden", "not a plain name"),
    ("path_segment", "step one", "not a plain name"),
    ("path_segment", "\u00e9tape", "not a plain name"),
    ("path_segment", "a\x00b", "not a plain name"),
    ("path_segment", "a" * 129, "at most 128"),
]


@pytest.mark.parametrize("rule, value", GOOD, ids=["%s-%d" % (g[0], i) for i, g in enumerate(GOOD)])
def test_valid_names_pass(rule, value):
    assert _k8s_names.check(rule, value) is None


@pytest.mark.parametrize("rule, value, words", BAD, ids=["%s-%d" % (b[0], i) for i, b in enumerate(BAD)])
def test_bad_names_are_refused_naming_the_option(rule, value, words):
    problems = k8s_name_problems([{"option": "my_role_thing", "rule": rule, "value": value}])
    assert len(problems) == 1, problems
    assert problems[0].startswith("my_role_thing: ") and words in problems[0], problems
    assert "\n" not in problems[0] and len(problems[0]) < 400


def test_every_problem_at_once_and_optional_values_skipped():
    problems = k8s_name_problems([
        {"option": "a_namespace", "rule": "namespace", "value": "BAD"},
        {"option": "a_release", "rule": "helm_release", "value": "ok"},
        {"option": "a_selector", "rule": "labels", "value": {}, "required": False},
        {"option": "a_image", "rule": "image", "value": None, "required": False},
        {"option": "a_step", "rule": "path_segment", "value": ".."},
    ])
    assert [p.split(":")[0] for p in problems] == ["a_namespace", "a_step"]


@pytest.mark.parametrize("checks, words", [
    ({"option": "x", "rule": "namespace", "value": "x"}, "must be a list"),
    (["x"], "check 0 must be a dict"),
    ([{"rule": "namespace", "value": "x"}], "check 0 must be a dict with option"),
    ([{"option": "x", "rule": "hostname", "value": "x"}], "rule 'hostname' is not one of"),
    (None, "must be a list"),
])
def test_malformed_checks_are_filter_errors(checks, words):
    with pytest.raises(AnsibleFilterError, match="k8s_name_problems: .*" + words.replace("(", r"\(")):
        k8s_name_problems(checks)


SECRET = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "creds-do-not-show"},
          "stringData": {"token": "hunter2-do-not-print"}}
CM = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm", "namespace": "ns"}}


@pytest.mark.parametrize("manifests, path", [
    ([CM, SECRET], "apply_manifests[1]"),
    ([{"apiVersion": "v1", "kind": "List", "items": [CM, SECRET]}], "apply_manifests[0].items[1]"),
    ([{"apiVersion": "v1", "kind": "SecretList", "items": [SECRET]}], "apply_manifests[0].items[0]"),
    ([{"apiVersion": "v1", "kind": "ConfigMapList", "items": [SECRET]}], "apply_manifests[0].items[0]"),
    ([{"kind": "List", "items": [{"kind": "List", "items": [SECRET]}]}], "apply_manifests[0].items[0].items[0]"),
    ([{"items": [SECRET]}], "apply_manifests[0].items[0]"),
    ([dict(SECRET, kind="secret")], "apply_manifests[0]"),
    ([dict(SECRET, kind="Secret", metadata={"name": "Bad Name"})], "apply_manifests[0]"),
])
def test_secrets_are_refused_at_any_depth_without_showing_them(manifests, path):
    problems = k8s_manifest_problems(manifests)
    assert problems and problems[0].startswith(path + ": a Secret cannot go through"), problems
    text = repr(problems)
    assert "hunter2" not in text and "creds-do-not-show" not in text and "Bad Name" not in text


@pytest.mark.parametrize("manifests, words", [
    ({"kind": "ConfigMap"}, "apply_manifests: must be a list"),
    ([42], "apply_manifests[0]: must be a Kubernetes object (a dict), got int"),
    ([dict(CM, apiVersion="")], "apply_manifests[0].apiVersion: is required"),
    ([dict(CM, kind=None)], "apply_manifests[0].kind: is required"),
    ([dict(CM, kind="Config Map")], "is not a Kubernetes kind"),
    ([dict(CM, metadata=None)], "apply_manifests[0].metadata: is required"),
    ([dict(CM, metadata={})], "apply_manifests[0].metadata.name: is required"),
    ([dict(CM, metadata={"name": "../../etc/passwd"})], "metadata.name: '../../etc/passwd' is not a DNS-1123"),
    ([dict(CM, metadata={"name": "cm", "namespace": "Kube_System"})], "metadata.namespace: 'Kube_System'"),
    ([dict(CM, metadata={"name": "cm", "labels": {"a b": "c"}})], "metadata.labels: 'a b' is not a label key"),
    ([dict(CM, metadata={"name": "cm", "labels": {"a": "c" * 64}})], "metadata.labels: a: "),
    ([dict(CM, metadata={"name": "cm", "annotations": {"/x": "anything goes here"}})], "metadata.annotations: '/x'"),
    ([{"kind": "List", "items": "not a list"}], "apply_manifests[0].items: a List must hold a list"),
    ([{"kind": "List", "items": [dict(CM, metadata={"name": "A"})]}], "apply_manifests[0].items[0].metadata.name"),
    ([{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "a/b"}}],
     "may not be '.' or '..' nor hold '/'"),
])
def test_objects_the_apply_role_cannot_take(manifests, words):
    problems = k8s_manifest_problems(manifests)
    assert any(words in p for p in problems), problems


def test_valid_objects_and_lists_pass_and_flatten():
    rbac = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": "system:gpu-ops:reader"}}
    manifests = [CM, {"apiVersion": "v1", "kind": "List", "items": [rbac, {"kind": "ConfigMapList", "items": [CM]}]}]
    assert k8s_manifest_problems(manifests) == []
    assert k8s_objects(manifests) == [CM, rbac, CM]
    with pytest.raises(AnsibleFilterError, match="k8s_objects: the input must be a list"):
        k8s_objects({"kind": "List"})
    with pytest.raises(AnsibleFilterError, match="where must be a non-empty string"):
        k8s_manifest_problems([], where="")


# ------------------------------------------------------------------ apply batches (one kubernetes.core.k8s call each)

READY = {"type": "Ready", "status": "True"}


def _obj(kind, name):
    return {"apiVersion": "v1", "kind": kind, "metadata": {"name": name}}


def _names(batches):
    return [[o["metadata"]["name"] for o in b["definition"]] for b in batches]


def test_apply_batches_without_a_wait_condition_send_everything_in_one_call():
    objects = [_obj("Namespace", "a"), _obj("ConfigMap", "b"), _obj("Network", "c")]
    assert k8s_apply_batches(objects) == [{"definition": objects, "wait_condition": {},
                                           "label": "Namespace/a, ConfigMap/b, Network/c"}]
    # a condition for no kind in particular goes to every object: still one call
    assert k8s_apply_batches(objects, READY, []) == [{"definition": objects, "wait_condition": READY,
                                                      "label": "Namespace/a, ConfigMap/b, Network/c"}]


def test_apply_batches_split_where_the_wait_condition_changes_and_keep_the_order():
    objects = [_obj("Namespace", "ns"), _obj("GKENetworkParamSet", "p1"), _obj("GKENetworkParamSet", "p2"),
               _obj("Network", "n1"), _obj("Network", "n2"), _obj("ConfigMap", "cm"), _obj("Network", "n3")]
    batches = k8s_apply_batches(objects, READY, ["Network"])
    assert _names(batches) == [["ns", "p1", "p2"], ["n1", "n2"], ["cm"], ["n3"]]
    assert [b["wait_condition"] for b in batches] == [{}, READY, {}, READY]
    assert [o for b in batches for o in b["definition"]] == objects
    # a deletion hands the objects reversed: the batches follow that order
    assert _names(k8s_apply_batches(objects[::-1], READY, ["Network"])) == \
        [["n3"], ["cm"], ["n2", "n1"], ["p2", "p1", "ns"]]


def test_apply_batches_leave_out_unserved_objects_and_join_their_neighbours():
    objects = [_obj("Namespace", "ns"), _obj("ConfigMap", "cm"), _obj("Network", "n1")]
    assert _names(k8s_apply_batches(objects, {}, [], [objects[1]])) == [["ns", "n1"]]
    assert k8s_apply_batches(objects, None, [], objects) == []
    assert k8s_apply_batches([]) == []


@pytest.mark.parametrize("args, words", [
    (({"kind": "List"},), "the input must be a list of Kubernetes objects"),
    (([42],), "the input must be a list of Kubernetes objects"),
    (([], "Ready"), "wait_condition must be a dict, got str"),
    (([], {}, "Network"), "wait_condition_kinds must be a list, got str"),
    (([], {}, [], {"kind": "ConfigMap"}), "leave_out must be a list, got dict"),
])
def test_apply_batches_refuse_malformed_input(args, words):
    with pytest.raises(AnsibleFilterError, match="k8s_apply_batches: " + words):
        k8s_apply_batches(*args)


# ------------------------------------------------------------------ node taints -> tolerations


def test_node_taint_tolerations_equal_with_a_value_exists_without():
    assert node_taint_tolerations(["sku=gpu:NoSchedule", "dedicated:NoExecute"]) == [
        {"key": "sku", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"},
        {"key": "dedicated", "operator": "Exists", "effect": "NoExecute"},
    ]
    assert node_taint_tolerations([]) == [] and node_taint_tolerations(None) == []


def test_node_taint_tolerations_use_the_module_rules_and_name_the_variable():
    with pytest.raises(AnsibleFilterError) as err:
        node_taint_tolerations(["sku=gpu", "a=b:Sometimes", "bad key=x:NoSchedule", "ok=1:NoSchedule"], "pool_taints")
    message = str(err.value)
    assert message.startswith("node_taint_tolerations: pool_taints: 'sku=gpu' is not written key=value:Effect")
    assert "'a=b:Sometimes' has effect 'Sometimes'; allowed: NoSchedule, PreferNoSchedule, NoExecute" in message
    assert "'bad key=x:NoSchedule' is not written key=value:Effect" in message
    assert "ok=1" not in message


@pytest.mark.parametrize("taints", ["sku=gpu:NoSchedule", [{"key": "sku"}], {"sku": "gpu"}])
def test_node_taint_tolerations_refuse_anything_but_a_list_of_text(taints):
    with pytest.raises(AnsibleFilterError, match="node_taints must be a list of key=value:Effect strings"):
        node_taint_tolerations(taints)
