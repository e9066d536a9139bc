# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fixtures shared by every integration test (real ``ansible-playbook`` runs against local doubles).

Sections: (0) spreading files over xdist workers, (1) running playbooks, (2) the Kubernetes API
double, (3) cloud doubles (GCP/Azure engineers: add your fixtures in section 3, keep the others as they are).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import yaml

from ansible_collections.gpu_ops.cluster.tests.doubles.k8s import K8sDouble

# =============================================================================================
# 0. Spreading files over xdist workers (-n 2)
# =============================================================================================

# Seconds each file took at -n 2 on the shared 2-core machine (2026-11-23, per-test times summed per
# file). Only the order matters: the slowest files start first, so that no long file starts last and
# keeps one worker busy alone at the end. A file not listed counts as FILE_SECONDS_UNKNOWN; refresh
# the table when a file grows a lot. The tests of the doubles that need this environment
# (tests/doubles/tests/test_k8s*.py, test_awx.py) run in the same pytest session and are listed too.
FILE_SECONDS = {
    "test_playbook_gke_gpudirect.py": 623,
    "test_gpudirect_roles.py": 598,
    "test_role_apply.py": 553,
    "test_helm_operators.py": 278,
    "test_role_mig_manager.py": 193,
    "test_operators_roles.py": 186,
    "test_role_mps.py": 165,
    "test_role_kube_connection.py": 125,
    "test_k8s_kubernetes_core.py": 137,
    "test_playbook_gpu_hosts.py": 133,
    "test_role_gcp_gpu_vpcs.py": 131,
    "test_playbook_aks_mig.py": 117,
    "test_role_nvidia_device_plugin.py": 86,
    "test_bad_role_input.py": 42,
    "test_playbook_site.py": 70,
    "test_render_mode.py": 80,
    "test_playbook_inventory.py": 90,
    "test_playbook_validate_rbac.py": 85,
    "test_module_gke_multinetwork.py": 57,
    "test_playbook_awx_setup.py": 56,
    "test_awx_slicing.py": 38,
    "test_secret_scan.py": 55,
    "test_role_nvidia_device_plugin_helm.py": 47,
    "test_playbook_gpu_operator.py": 43,
    "test_module_gpu_nodepool_aks.py": 37,
    "test_action_groups.py": 18,
    "test_defaults_origin.py": 11,
    "test_bad_input.py": 9,
    "test_k8s.py": 8,
    "test_k8s_helm.py": 5,
}
FILE_SECONDS_UNKNOWN = 30


def skipped_item(item_result):
    """Whether one item of a looped task was skipped by its condition: ansible-core 2.19 marks it ``skipped: true``,
    2.21 leaves that key out of the item and keeps ``skip_reason`` and ``false_condition``."""
    return bool(item_result.get("skipped")) or "false_condition" in item_result


def _file_seconds(item):
    return FILE_SECONDS.get(item.path.name, FILE_SECONDS_UNKNOWN)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """With -n and no --dist: whole files per worker, so a module-scoped fixture (one playbook run shared by
    many tests) runs once instead of once per worker, and files in the order the workers collected them."""
    if config.getvalue("dist") != "load":
        return None
    from xdist.scheduler import LoadFileScheduling  # pylint: disable=import-outside-toplevel

    config.option.loadscopereorder = False  # keep the order below, not "most tests first"
    return LoadFileScheduling(config, log)


def pytest_collection_modifyitems(config, items):
    """On xdist workers: slowest files first (a stable sort keeps each file's own order)."""
    if hasattr(config, "workerinput"):
        items.sort(key=lambda item: -_file_seconds(item))


# =============================================================================================
# 1. Running playbooks
# =============================================================================================

REPO_ROOT = Path(__file__).resolve().parents[2]
RECORDER_DIR = Path(__file__).resolve().parent / "callback_plugins"


def collections_path():
    """ANSIBLE_COLLECTIONS_PATH: the environment's, else the tree this collection sits in, else .collections."""
    if os.environ.get("ANSIBLE_COLLECTIONS_PATH"):
        return os.environ["ANSIBLE_COLLECTIONS_PATH"]
    if REPO_ROOT.parent.name == "gpu_ops" and REPO_ROOT.parent.parent.name == "ansible_collections":
        return str(REPO_ROOT.parents[2])
    return str(REPO_ROOT / ".collections")


def ansible_playbook_binary():
    candidate = Path(sys.executable).parent / "ansible-playbook"
    return str(candidate) if candidate.exists() else "ansible-playbook"


class PlaybookResult:
    """What one ansible-playbook run did: rc, stdout, stderr and the recorded task results."""

    def __init__(self, args, rc, stdout, stderr, records):
        self.args, self.rc, self.stdout, self.stderr = args, rc, stdout, stderr
        self.results = [r for r in records if "task" in r]
        self.stats = next((r["stats"] for r in records if "stats" in r), {})

    def tasks(self, name=None, action=None):
        """Task records whose name contains ``name`` and/or whose action is ``action``."""
        return [r for r in self.results if (name is None or name in r["task"])
                and (action is None or r["action"] == action or r["action"].endswith("." + action))]

    def task(self, name=None, action=None):
        """The one task record matching (AssertionError otherwise)."""
        found = self.tasks(name, action)
        assert len(found) == 1, "expected one task %r/%r, found %d:\n%s" % (name, action, len(found), self.output)
        return found[0]

    @property
    def changed(self):
        return [r for r in self.results if r["changed"] and r["status"] == "ok"]

    @property
    def failed(self):
        return [r for r in self.results if r["status"] in ("failed", "unreachable")]

    def retry_lines(self):
        """stdout's ``FAILED - RETRYING: [host]: <task>`` lines with the role prefix ansible-core 2.21 adds to a
        role task's name (``[host]: ns.coll.role : Wait ...``) taken out, so one assertion fits both lines."""
        return "\n".join(re.sub(r"^(FAILED - RETRYING: \[[^\]]+\]: )[\w.]+ : ", r"\1", line)
                         for line in self.stdout.splitlines() if line.startswith("FAILED - RETRYING: "))

    @property
    def output(self):
        return "$ %s\nrc=%s\n--- stdout\n%s\n--- stderr\n%s" % (" ".join(self.args), self.rc, self.stdout, self.stderr)

    def assert_ok(self):
        assert self.rc == 0 and not self.failed, self.output
        return self

    def assert_failed(self):
        assert self.rc != 0 and self.failed, self.output
        return self


def _write_playbook(playbook, folder):
    """A playbook path as is; YAML text or a list of plays written to the run folder."""
    if isinstance(playbook, Path) or (isinstance(playbook, str) and "\n" not in playbook):
        return str(playbook)
    path = folder / "playbook.yml"
    path.write_text(playbook if isinstance(playbook, str) else yaml.safe_dump(playbook, sort_keys=False), encoding="utf-8")
    return str(path)


def make_runner(tmp_path):
    """A run_playbook(playbook, extra_vars=..., env=..., check=..., diff=..., verbosity=...) callable."""
    counter = {"n": 0}

    def run_playbook(playbook, extra_vars=None, env=None, check=False, diff=False, verbosity=0, timeout=900,
                     extra_args=()):
        counter["n"] += 1
        run_dir = tmp_path / ("run-%02d" % counter["n"])
        (run_dir / "tmp").mkdir(parents=True)
        inventory = run_dir / "inventory.ini"
        inventory.write_text("localhost ansible_connection=local ansible_python_interpreter=%s\n" % sys.executable,
                             encoding="utf-8")
        config = run_dir / "ansible.cfg"
        config.write_text("[defaults]\nretry_files_enabled = false\nhost_key_checking = false\n"
                          "interpreter_python = auto_silent\n", encoding="utf-8")
        results_file = run_dir / "results.jsonl"
        args = [ansible_playbook_binary(), "-i", str(inventory), _write_playbook(playbook, run_dir)]
        if extra_vars:
            vars_file = run_dir / "extra_vars.json"
            vars_file.write_text(json.dumps(extra_vars), encoding="utf-8")
            args += ["-e", "@%s" % vars_file]
        if check:
            args.append("--check")
        if diff:
            args.append("--diff")
        if verbosity:
            args.append("-" + "v" * verbosity)
        args += list(extra_args)
        short_tmp = tempfile.mkdtemp(prefix="gpo-")
        environment = {k: v for k, v in os.environ.items() if not k.startswith(("ANSIBLE_", "K8S_AUTH_"))}
        environment.update({
            "ANSIBLE_CONFIG": str(config),
            "ANSIBLE_COLLECTIONS_PATH": collections_path(),
            "ANSIBLE_HOME": str(run_dir / "ansible_home"),
            "ANSIBLE_LOCAL_TEMP": str(run_dir / "tmp"),
            "ANSIBLE_REMOTE_TEMP": str(run_dir / "tmp"),
            "ANSIBLE_CALLBACK_PLUGINS": str(RECORDER_DIR),
            "ANSIBLE_CALLBACKS_ENABLED": "gpu_ops_recorder",
            "ANSIBLE_STDOUT_CALLBACK": "ansible.builtin.default",
            "ANSIBLE_CALLBACK_RESULT_FORMAT": "yaml",
            "ANSIBLE_NOCOLOR": "1",
            "ANSIBLE_FORCE_COLOR": "0",
            "GPU_OPS_RESULTS_FILE": str(results_file),
            # kubernetes.core keeps its discovery cache in the temp folder: one per run (short: ansible-core
            # 2.21 puts a unix socket there, and those paths are limited to 108 characters)
            "TMPDIR": short_tmp,
            "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]),
        })
        environment.update(env or {})
        try:
            proc = subprocess.run(args, cwd=str(run_dir), env=environment, capture_output=True, text=True,
                                  timeout=timeout, check=False)
        finally:
            shutil.rmtree(short_tmp, ignore_errors=True)
        records = []
        if results_file.exists():
            records = [json.loads(line) for line in results_file.read_text(encoding="utf-8").splitlines() if line]
        return PlaybookResult(args, proc.returncode, proc.stdout, proc.stderr, records)

    return run_playbook


def render_playbook(tmp_path_factory, playbook, inventory, name="render"):
    """Run a playbook of the repository in render mode with one of its inventories: (render folder, result).

    The run must succeed; module-scoped fixtures call it once and share what it wrote.
    """
    work = tmp_path_factory.mktemp(name)
    out = work / "rendered"
    result = make_runner(work)(str(REPO_ROOT / "playbooks" / playbook), extra_vars={"gpu_ops_render_dir": str(out)},
                               extra_args=["-i", str(REPO_ROOT / "inventories" / inventory)])
    result.assert_ok()
    return out, result


@pytest.fixture
def run_playbook(tmp_path):
    """Run the venv's ansible-playbook on localhost; returns a PlaybookResult."""
    return make_runner(tmp_path)


@pytest.fixture(scope="module")
def run_playbook_module(tmp_path_factory):
    """run_playbook for module-scoped fixtures (one playbook run shared by several tests)."""
    return make_runner(tmp_path_factory.mktemp("playbooks"))


# =============================================================================================
# 2. Kubernetes API double
# =============================================================================================

@pytest.fixture
def k8s_double():
    """A fresh Kubernetes API double per test (every CRD from tests/contract/crd_schemas installed)."""
    double = K8sDouble().start()
    try:
        yield double
    finally:
        double.stop()


@pytest.fixture(scope="module")
def k8s_double_module():
    """One Kubernetes API double shared by a test module (faster; tests must not depend on each other)."""
    double = K8sDouble().start()
    try:
        yield double
    finally:
        double.stop()


# ---- Helm: charts installed for real by kubernetes.core.helm (see tests/charts/README.md) ----

TEST_CHARTS = REPO_ROOT / "tests" / "charts"


def chart_path(name):
    """The path of the test chart tests/charts/<name> (a stand-in for the upstream chart of that name)."""
    path = TEST_CHARTS / name
    assert (path / "Chart.yaml").is_file(), "no test chart %s (known: %s)" % (
        path, sorted(p.name for p in TEST_CHARTS.iterdir() if (p / "Chart.yaml").is_file()))
    return str(path)


def helm_binary():
    """The helm that scripts/bootstrap.sh puts in the virtualenv (or one on PATH); fails, never skips."""
    found = shutil.which("helm", path=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]))
    if not found:
        pytest.fail("helm not found next to %s or on PATH: run `bash scripts/bootstrap.sh .venv python3.11 "
                    "tests/requirements-2.19.txt`, which installs it" % sys.executable)
    return found


@pytest.fixture
def helm_k8s(tmp_path):
    """A Kubernetes API double over TLS (helm sends its credentials only over TLS), with ``env`` for
    ansible-playbook: the kubeconfig, and helm's cache/config/data folders kept inside the test's folder."""
    helm = helm_binary()
    double = K8sDouble(tls=True).start()
    home = tmp_path / "helm-home"
    double.helm_env = dict(double.env(), KUBECONFIG=double.kubeconfig, HELM_CACHE_HOME=str(home / "cache"), HELM_CONFIG_HOME=str(home / "config"),
                           HELM_DATA_HOME=str(home / "data"),
                           PATH=os.pathsep.join([str(Path(helm).parent), str(Path(sys.executable).parent),
                                                 os.environ.get("PATH", "")]))
    try:
        yield double
    finally:
        double.stop()


# =============================================================================================
# 3. Cloud doubles (GCP, Azure)
# =============================================================================================

# ---- Azure: the ARM double (tests/doubles/arm.py) ----

AZURE_RESOURCE_GROUP = "gpu-rg"
AZURE_CLUSTER = "gpu-aks"


@pytest.fixture
def arm_double():
    """A fresh ARM double with one AKS cluster (AZURE_RESOURCE_GROUP/AZURE_CLUSTER, Kubernetes 1.33.2).

    LRO answers carry ``Retry-After: 0`` so playbooks poll at once.
    """
    from ansible_collections.gpu_ops.cluster.tests.doubles.arm import ArmDouble  # pylint: disable=import-outside-toplevel

    double = ArmDouble(retry_after=0).start()
    double.add_cluster(AZURE_RESOURCE_GROUP, AZURE_CLUSTER, kubernetes_version="1.33.2")
    try:
        yield double
    finally:
        double.stop()


@pytest.fixture
def arm_env(arm_double):
    """Environment for ansible-playbook: azure-identity's DefaultAzureCredential gets its tokens from the
    double's managed-identity endpoint (no AZURE_* variables leak in from outside)."""
    env = {k: "" for k in os.environ if k.startswith("AZURE_")}
    env.update(arm_double.msi_environment())
    return env


@pytest.fixture
def azure_defaults(arm_double):
    """module_defaults for group/gpu_ops.cluster.azure pointing at the double."""
    defaults = dict(subscription_id=arm_double.subscription, arm_endpoint=arm_double.url)
    return {"group/gpu_ops.cluster.azure": defaults}


# ---- GCP: the GCP double (tests/doubles/gcp.py) ----

GCP_PROJECT = "gpu-project"


@pytest.fixture
def gcp_double():
    """A fresh GCP double (GKE + Compute Engine) per test, no operation latency (set_latency to add some)."""
    from ansible_collections.gpu_ops.cluster.tests.doubles.gcp import GcpDouble  # pylint: disable=import-outside-toplevel

    double = GcpDouble().start()
    try:
        yield double
    finally:
        double.stop()


@pytest.fixture
def gcp_defaults(gcp_double):
    """module_defaults for group/gpu_ops.cluster.gcp pointing at the double (project GCP_PROJECT, its token)."""
    return {"group/gpu_ops.cluster.gcp": gcp_double.module_args(project=GCP_PROJECT)}
