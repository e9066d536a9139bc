# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One place per fact: no role repeats a catalog name as a literal of its own.

Every module-level string constant of plugins/module_utils/_catalog/*.py that is 8 characters or longer and holds a
``.``, ``/`` or ``-`` (label keys, resource names, chart names, repository URLs, selectors) is searched in the roles'
tasks, handlers, templates, defaults and vars - outside comments, as a whole word (``30-gpu-operator`` does not repeat
``gpu-operator``). A role reads such a name through a filter (the plan filters' ``names``, ``mig_label_patches``,
``device_plugin_chart``, ...). ALLOWED names the few hits that stay, each with its reason; an entry that no longer
hits fails too, so the list cannot rot.
"""

from __future__ import annotations

import ast
import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CATALOG = os.path.join(ROOT, "plugins", "module_utils", "_catalog")
ROLE_PARTS = ("tasks", "handlers", "templates", "defaults", "vars")

# (role file, literal) -> why it stays
ALLOWED = {
    # The user's names for their release and namespace; they equal the chart name by upstream convention only.
    ("roles/gpu_operator/defaults/main.yml", "gpu-operator"): "gpu_operator_release_name default",
    ("roles/network_operator/defaults/main.yml", "network-operator"): "network_operator_release_name default",
    ("roles/nvidia_device_plugin/defaults/main.yml", "nvidia-device-plugin"): "release name and namespace defaults",
    ("roles/mig_manager/defaults/main.yml", "gpu-operator"): "mig_manager_namespace default (where the user installed it)",
    # A toleration key is the GPU taint (GKE, AKS and the operators' docs taint GPU nodes with it), a user-overridable
    # default or a pod template field - not the extended resource name, though it is spelt the same.
    ("roles/nvidia_device_plugin/defaults/main.yml", "nvidia.com/gpu"): "nvidia_device_plugin_tolerations default",
    ("roles/gpu_operator/templates/vectoradd.yaml.j2", "nvidia.com/gpu"): "toleration key",
    # Text of an error message (a hint naming the upstream chart and the MIG resource pattern), not a value a task uses.
    ("roles/network_operator/tasks/_install.yml", "network-operator"): "helm pull hint in the kubeVersion refusal",
    ("roles/nvidia_device_plugin/vars/main.yml", "nvidia.com/mig-"): (
        "the time-slicing message names the pattern; follow-up: MIG devices of a layout (the selectattr match)"),
    # Follow-ups: these read the GPU resource name and GKE's accelerator label in place; no filter result
    # carries them to these roles yet. The toleration keys in the same templates are the taint (see above).
    ("roles/gke_gpu_cluster/tasks/_verify.yml", "nvidia.com/gpu"): "follow-up: check the pool through mig_verify_nodes",
    ("roles/gke_gpu_cluster/tasks/_verify.yml", "cloud.google.com/gke-accelerator"): "follow-up: as above",
    ("roles/nccl_test/templates/nccl-test.yaml.j2", "nvidia.com/gpu"): "follow-up: resource limit key and toleration",
    ("roles/rdma_test/templates/rdma-test.yaml.j2", "nvidia.com/gpu"): "follow-up: resource limit key and toleration",
}


def catalog_literals():
    """literal -> 'file:NAME' of every module-level string constant worth scanning for."""
    found = {}
    for name in sorted(os.listdir(CATALOG)):
        if not name.endswith(".py"):
            continue
        with open(os.path.join(CATALOG, name), encoding="utf-8") as handle:
            tree = ast.parse(handle.read())
        for node in tree.body:
            if isinstance(node, ast.Assign):
                targets, value = node.targets, node.value
            elif isinstance(node, ast.AnnAssign) and node.value is not None:
                targets, value = [node.target], node.value
            else:
                continue
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                text = value.value
                if len(text) >= 8 and re.search(r"[./-]", text):
                    found.setdefault(text, "%s:%s" % (name, ",".join(getattr(t, "id", "?") for t in targets)))
    return found


def _role_files(root):
    roles = os.path.join(root, "roles")
    for role in sorted(os.listdir(roles)):
        for part in ROLE_PARTS:
            for folder, _dirs, files in os.walk(os.path.join(roles, role, part)):
                for name in sorted(files):
                    path = os.path.join(folder, name)
                    yield os.path.relpath(path, root).replace(os.sep, "/"), path


def _uncommented(text):
    """The lines without Jinja comments and YAML comment lines (blanked, so that line numbers stay)."""
    text = re.sub(r"\{#.*?#\}", lambda match: "\n" * match.group(0).count("\n"), text, flags=re.S)
    return ["" if line.lstrip().startswith("#") else line for line in text.splitlines()]


def scan(root=ROOT, literals=None):
    """{(role file, literal): [line numbers]} of every catalog literal a role repeats."""
    literals = catalog_literals() if literals is None else literals
    patterns = {text: re.compile(r"(?<![\w./-])%s(?![\w/-]|\.\w)" % re.escape(text)) for text in literals}
    hits = {}
    for relative, path in _role_files(root):
        with open(path, encoding="utf-8") as handle:
            lines = _uncommented(handle.read())
        for number, line in enumerate(lines, 1):
            for text, pattern in patterns.items():
                if pattern.search(line):
                    hits.setdefault((relative, text), []).append(number)
    return hits


def test_the_catalog_has_literals_to_look_for():
    literals = catalog_literals()
    for text in ("cluster-policy", "app=nvidia-driver-daemonset", "nvidia.com/mig.config", "nvidia.com/mig.config.state",
                 "nic-cluster-policy", "https://nvidia.github.io/k8s-device-plugin", "nvidia-device-plugin"):
        assert text in literals, text


def test_no_role_repeats_a_catalog_literal():
    literals = catalog_literals()
    hits = scan(literals=literals)
    unexplained = ["%s: %r (%s) on line(s) %s" % (path, text, literals[text], ", ".join(map(str, lines)))
                   for (path, text), lines in sorted(hits.items()) if (path, text) not in ALLOWED]
    assert unexplained == [], ("roles repeat catalog names - read them through a filter, or allow them in "
                               "tests/unit/test_role_literals.py with the reason:\n  " + "\n  ".join(unexplained))


def test_every_allowed_entry_still_hits():
    hits = scan()
    assert sorted(set(ALLOWED) - set(hits)) == []


def test_the_scan_finds_a_repeated_name_but_not_a_comment_or_a_longer_word(tmp_path):
    tasks = tmp_path / "roles" / "demo" / "tasks"
    tasks.mkdir(parents=True)
    (tasks / "main.yml").write_text(
        "# waits for cluster-policy\n"
        "- name: Wait\n"
        "  kubernetes.core.k8s_info: {kind: ClusterPolicy, name: cluster-policy}\n"
        "  vars: {step: 30-cluster-policy-x, label: nvidia.com/mig.config.state}\n")
    (tmp_path / "roles" / "demo" / "templates").mkdir()
    (tmp_path / "roles" / "demo" / "templates" / "a.j2").write_text("{# cluster-policy #}\nkey: nvidia.com/mig.config\n")
    hits = scan(str(tmp_path), {"cluster-policy": "x", "nvidia.com/mig.config": "y", "nvidia.com/mig.config.state": "z"})
    assert hits == {("roles/demo/tasks/main.yml", "cluster-policy"): [3],
                    ("roles/demo/tasks/main.yml", "nvidia.com/mig.config.state"): [4],
                    ("roles/demo/templates/a.j2", "nvidia.com/mig.config"): [2]}
