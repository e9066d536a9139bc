# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every input check of every module a playbook runs is reached by the playbook's preflight, before its first change.

The checks are read from the source (tests/unit/checks_scan.py): every ``option: why`` a module's engine can report,
from its entry point (``run``) through the collection's code. The playbooks are read as Ansible runs them: their
plays, the roles and task files they include (a role's ``preflight_tasks`` file included), each task with the
variables its includes set. A module task of a play after the preflight needs its checks; the plays up to the
preflight (the preflight play and the read-only plays before it) reach:

- what a module task there can report: with ``validate_only`` (literal, or a variable the include sets true) the
  checks of the engine's ``input_check``, otherwise (check mode, or a read-only module) those of its ``run``;
- what a filter named there (in the tasks, or in ``vars/main.yml`` of a role whose preflight runs) can report.

A check the preflight cannot make (it needs what the cloud, the host or the cluster answers, or what a write returned)
is listed below with the reason; the test fails when a listed one is reached (or gone), and names the playbook, the
module and the check of every one that is neither.
"""

from __future__ import annotations

import functools
import glob
import os
import re

import pytest
import yaml

from ansible_collections.gpu_ops.cluster.tests.unit import checks_scan as scan
from ansible_collections.gpu_ops.cluster.tests.unit.test_role_checks_preflight import ROLES_WITHOUT_PREFLIGHT
from ansible_collections.gpu_ops.cluster.tests.unit.test_role_includes import internal

ROOT = scan.ROOT
PLAYBOOKS = os.path.join(ROOT, "playbooks")
MODULES = sorted(os.path.basename(p)[:-3] for p in glob.glob(os.path.join(ROOT, "plugins", "modules", "*.py")))
INCLUDE_ROLE = ("ansible.builtin.include_role", "ansible.builtin.import_role", "include_role", "import_role")
INCLUDE_TASKS = ("ansible.builtin.include_tasks", "ansible.builtin.import_tasks", "include_tasks", "import_tasks")
FILTER = re.compile(r"gpu_ops\.cluster\.([a-z0-9_]+)")
TASKS_FILE = re.compile(r"[A-Za-z0-9_]+\.yml")
VARIABLE = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)")

# (module, file, function): why no preflight can make the checks of that function. The reasons are of three kinds:
# the service's answer (preflight reads, after planning: docs/behaviour-contract.md), the resource or host as it is,
# and what a write returned.
NEEDS_STATE = {
    ("gpu_nodepool", "plugins/module_utils/_gcp/nodepool.py", "PoolEngine._workload_policy"):
        "the accelerator topology of the resource policy the project already holds under that name",
    ("gke_cluster", "plugins/module_utils/_gcp/cluster.py", "ClusterEngine._gate_current"):
        "the cluster's current version (a downgrade or a skipped minor is refused against it)",
    ("gke_cluster", "plugins/module_utils/_gcp/cluster.py", "ClusterEngine.plan_present"):
        "the fields of the existing cluster that cannot change (autopilot, multi-networking, immutable fields)",
    ("gke_cluster", "plugins/module_utils/_gcp/cluster.py", "_resolve_alias"):
        "the versions the location's server config offers for a release-channel alias",
    ("gke_cluster", "plugins/module_utils/_gcp/offers.py", "_read"):
        "the service's answer to a preflight read (a location, zone or type that does not exist)",
    ("gke_cluster", "plugins/module_utils/_gcp/offers.py", "check_image_type"):
        "the image types the location's server config offers",
    ("gke_cluster", "plugins/module_utils/_gcp/offers.py", "check_versions"):
        "the versions the location's server config offers",
    ("gpu_nodepool", "plugins/module_utils/_gcp/nodepool.py", "PoolEngine.check_cluster"):
        "the cluster the pool joins: it exists, is no Autopilot cluster, is not busy, has multi-networking, its version",
    ("gpu_nodepool", "plugins/module_utils/_gcp/nodepool.py", "PoolEngine.check_networks"):
        "the GPU NIC networks and subnetworks the pool names exist (the fabric the play converged before)",
    ("gpu_nodepool", "plugins/module_utils/_gcp/nodepool.py", "PoolEngine.plan_present"):
        "the fields of the existing pool that cannot change",
    ("gpu_nodepool", "plugins/module_utils/_gcp/nodepool.py", "PoolEngine._require_size"):
        "whether the pool exists: node_count is required to create it only",
    ("gpu_nodepool", "plugins/module_utils/_azure/nodepool.py", "PoolEngine.plan_present"):
        "whether the agent pool exists: vm_size is required to create it only",
    ("gpu_nodepool", "plugins/module_utils/_gcp/offers.py", "_read"):
        "the service's answer to a preflight read (a zone or type that does not exist)",
    ("gpu_nodepool", "plugins/module_utils/_gcp/offers.py", "check_image_type"):
        "the image types the location's server config offers",
    ("gpu_nodepool", "plugins/module_utils/_gcp/offers.py", "check_versions"):
        "the versions the location's server config offers",
    ("gpu_nodepool", "plugins/module_utils/_gcp/offers.py", "check_zone_offers"):
        "the machine, accelerator and disk types each zone of the pool offers",
    ("gpu_nodepool", "plugins/module_utils/_mig/nodes.py", "_sharing"):
        "the sharing settings the engine builds from gpu_sharing (checked by its validation) for the resources it "
        "returns after the run",
    ("gpu_nodepool", "plugins/module_utils/_mig/nodes.py", "shared_resources"): "as _sharing",
    ("gke_multinetwork", "plugins/module_utils/_gcp/offers.py", "_read"):
        "the service's answer to a preflight read (the region or zone)",
    ("gke_multinetwork", "plugins/module_utils/_gcp/offers.py", "check_network_profile"):
        "the RDMA network profiles the zone offers",
}

# (file, function): the cloud account's credentials, which validate_only neither needs nor checks (render mode has none).
# They are checked as a module opens its session, at the playbook's first cloud request, which is a read or the first
# write itself: nothing is sent before it. The test checks that the first module a playbook runs after its preflight
# is one that makes these checks.
CREDENTIALS = {
    ("plugins/module_utils/_core/transport.py", "clean_credential"): "a token, key or secret with control characters",
    ("plugins/module_utils/_gcp/session.py", "read_service_account_file"): "a key file that cannot be read",
    ("plugins/module_utils/_gcp/session.py", "service_account_info"): "a key that is not a service account's",
}

# The action plugins whose arguments no user writes: what they take (manifests, charts' objects, queries) the roles
# build from their options, which the roles' preflights check (k8s_manifest_problems, k8s_name_problems, their
# argument specs). What the action checks of them is the roles' own consistency: a failure there is a bug of the role.
BUILT_BY_ROLES = {
    "k8s_apply_plan": "the apply role's batches of the objects and charts the calling role built",
    "k8s_daemonset_wait": "the DaemonSets the GPUDirect and NRI roles applied, as the roles name them",
    "k8s_objects_info": "the queries of gke_gpu_cluster's verification, as the role builds them",
}

# (playbook, module, file, function): why that playbook's preflight need not make the check of that function there.
AT_THE_CALL = {
    ("gpu_operator_upgrade.yml", "gpu_host_facts", "plugins/module_utils/_host/facts.py", "run"):
        "as in validate.yml: the facts of the GPU hosts (the upgrade's host checks), with the module's defaults",
    ("validate.yml", "gpu_host_facts", "plugins/module_utils/_host/facts.py", "run"):
        "procfs_root and sysfs_root, the folders it checks, are the module's defaults there (the validate role passes "
        "nvidia_smi only): nothing a user sets",
    ("site.yml", "nccl_env", "plugins/module_utils/_host/nccl_conf.py", "check_dest"):
        "dest is nccl/nccl.conf of the render folder, which the task before creates; mode and owner are the module's "
        "defaults",
    ("site.yml", "nccl_env", "plugins/module_utils/_host/nccl_conf.py", "_owner_problems"):
        "owner and group are not set there (the module's defaults)",
}

# (playbook, module): the calls whose refusal is a result, not a stop - each call is read-only and ignore_errors, and
# the playbook reports the refusal. The test checks that every such call is.
REFUSAL_IS_A_RESULT = {
    ("validate.yml", "gke_multinetwork_info"):
        "validate.yml only reads until it writes its reports; a refused read is the target's snapshot entry and reaches "
        "its report as an `other` result naming the read; validate_gke is checked by the preflight (the validate role's "
        "__validate_gke_problems)",
    ("validate.yml", "gpu_nodepool_info"): "as gke_multinetwork_info",
    ("gpu_operator_upgrade.yml", "gke_multinetwork_info"):
        "the validate role's reads before and after the upgrade, as in validate.yml (its preflight runs in the upgrade's)",
    ("gpu_operator_upgrade.yml", "gpu_nodepool_info"): "as gke_multinetwork_info",
}

# (playbook, role): a role a playbook runs inside another role, whose preflight checks what it hands on
ROLE_IN_ROLE = {
    ("validate.yml", "nccl_test"):
        "the validate role's NCCL probe, imported with options the validate preflight checks (validate_performance_* "
        "through validate_option_problems) and values of its own; a refusal is rescued and recorded as the probe's result",
    ("validate.yml", "rdma_test"): "the validate role's ib_write_bw probe, as nccl_test",
    ("gpu_operator_upgrade.yml", "nccl_test"): "the validate role's NCCL probe, as in validate.yml",
    ("gpu_operator_upgrade.yml", "rdma_test"): "the validate role's ib_write_bw probe, as in validate.yml",
}

# (module, file, function): the role file of the preflight that makes the same check (YAML over the same option: the
# module's code cannot run there), and the text of its message. The test checks that the preflight of every playbook
# that runs the module walks that file and that the file holds the message.
SAME_CHECK_IN_ROLE = {
    ("mps_control", "plugins/module_utils/_host/mps.py", "_required_binary"):
        ("roles/mps/tasks/_validate.yml", "'mps_control_binary: '"),
    ("mps_control_info", "plugins/module_utils/_host/mps.py", "_required_binary"):
        ("roles/mps/tasks/_validate.yml", "'mps_control_binary: '"),
}


@functools.lru_cache(maxsize=None)
def _load(path):
    """A YAML file, read once (the walk only reads what it returns)."""
    with open(path, encoding="utf-8") as handle:
        return yaml.safe_load(handle) or []


def _true(value, known):
    """Whether a task argument is true where the task runs: a literal, or a template of a variable set true there."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        if value.strip().lower() in ("true", "yes"):
            return True
        return any(known.get(name) is True or str(known.get(name)).lower() == "true" for name in VARIABLE.findall(value))
    return False


class Walk:
    """The module tasks and the filters of a list of plays, each module task with its arguments in context."""

    def __init__(self):
        self.calls = []  # (module, validate_only, check mode)
        self.ignored = []  # (module, ignore_errors) of every call
        self.files = set()
        self.filters = set()
        self.roles = set()  # (role, entry point) of every include, a preflight's with the entry point it checks
        self.seen = set()

    def tasks(self, tasks, role, known, base):
        for task in tasks if isinstance(tasks, list) else []:
            if isinstance(task, dict):
                self.task(task, role, known, base)

    def task(self, task, role, known, base):
        here = dict(known, **(task.get("vars") or {}))
        own = {k: v for k, v in task.items() if k not in ("block", "rescue", "always")}
        self.filters.update(FILTER.findall(yaml.safe_dump(own)))
        for module in MODULES:
            args = task.get("gpu_ops.cluster." + module)
            if args is not None:
                args = args if isinstance(args, dict) else {}
                self.calls.append((module, _true(args.get("validate_only"), here), _true(task.get("check_mode"), here)))
                self.ignored.append((module, _true(task.get("ignore_errors"), here)))
        for key in ("block", "rescue", "always"):
            # a block's vars are its tasks' too
            self.tasks(task.get(key), role, here, base)
        for key in INCLUDE_ROLE:
            include = task.get(key)
            if isinstance(include, dict) and str(include.get("name", "")).startswith("gpu_ops.cluster."):
                self.role(include["name"].rsplit(".", 1)[-1], include.get("tasks_from", "main"), here)
        for key in INCLUDE_TASKS:
            include = task.get(key)
            name = include.get("file") if isinstance(include, dict) else include
            if not isinstance(name, str):
                continue
            if "preflight_tasks" in name:
                # roles/preflight's include of the calling role's read-only checks (preflight_tasks)
                caller = here.get("__preflight_caller_role")
                for file_name in TASKS_FILE.findall(str(here.get("preflight_tasks") or "")):
                    self.file(os.path.join(ROOT, "roles", caller, "tasks", file_name), caller, here)
            elif role:
                self.file(os.path.join(ROOT, "roles", role, "tasks", name), role, here)
            else:
                self.file(os.path.join(base, name), role, here)

    def role(self, role, entry, known):
        if "{{" in role:
            # a role picked by a variable ("{{ gke_gpudirect_choice }}_installer"): every role its name can be
            pattern = re.compile("^" + ".*".join(re.escape(part) for part in re.split(r"\{\{.*?\}\}", role)) + "\\Z")
            for name in sorted(os.listdir(os.path.join(ROOT, "roles"))):
                if pattern.match(name):
                    self.role(name, entry, known)
            return
        path = os.path.join(ROOT, "roles", role, "tasks", entry + ".yml")
        if role != "preflight":
            self.roles.add((role, known.get("preflight_entry_point", "main") if entry == "preflight" else entry))
            known = dict(known, __preflight_caller_role=role)
            vars_main = os.path.join(ROOT, "roles", role, "vars", "main.yml")
            if entry == "preflight" and os.path.exists(vars_main):
                with open(vars_main, encoding="utf-8") as handle:
                    self.filters.update(FILTER.findall(handle.read()))
        self.file(path, role, known)

    def file(self, path, role, known):
        key = (path, tuple(sorted((k, str(v)) for k, v in known.items())))
        if key in self.seen or not os.path.exists(path):
            return
        self.seen.add(key)
        self.files.add(os.path.relpath(path, ROOT))
        self.tasks(_load(path), role, known, os.path.dirname(path))


def _plays(playbook):
    plays = []
    for play in _load(os.path.join(PLAYBOOKS, playbook)):
        imported = play.get("ansible.builtin.import_playbook") or play.get("import_playbook")
        plays += _plays(imported) if imported else [play]
    return plays


def _is_preflight(play):
    return str(play.get("name", "")).startswith("Preflight")


def walk(plays):
    found = Walk()
    for play in plays:
        known = dict(play.get("vars") or {})
        for section in ("pre_tasks", "tasks", "post_tasks"):
            found.tasks(play.get(section) or [], None, known, PLAYBOOKS)
        for entry in play.get("roles") or []:
            name = entry.get("role", entry.get("name")) if isinstance(entry, dict) else entry
            found.role(str(name).rsplit(".", 1)[-1], "main", known)
    return found


def split(playbook):
    """(the plays up to its last preflight play, the plays after it) of a playbook."""
    plays = _plays(playbook)
    last = max([i for i, play in enumerate(plays) if _is_preflight(play)], default=-1)
    return plays[:last + 1], plays[last + 1:]


@functools.lru_cache(maxsize=None)
def walked(playbook):
    """(the walk of the plays up to the preflight, the walk of the plays after it) of a playbook."""
    return tuple(walk(plays) for plays in split(playbook))


def engines(module):
    """The engine files of a module (its imports of the collection), or its action plugin when it has none."""
    found = sorted(set(scan.source(os.path.join(ROOT, "plugins", "modules", module + ".py")).modules.values()))
    return found or [os.path.join(ROOT, "plugins", "action", module + ".py")]


def _entry(path, name):
    functions = scan.source(path).functions
    return [name] if name in functions else ["ActionModule.run"] if "ActionModule.run" in functions else []


@functools.lru_cache(maxsize=None)
def module_checks(module, entry="run"):
    """The input checks of a module from ``entry`` (``run``, ``run_info``, ``input_check``) of each of its engines."""
    if module == "mps_control_info" and entry == "run":
        entry = "run_info"
    return frozenset(site for path in engines(module) for name in _entry(path, entry) for site in scan.sites(path, name))


@functools.lru_cache(maxsize=None)
def filter_functions():
    """``{filter name: (file, function)}`` of the collection's filter plugins (their ``filters()`` tables)."""
    table = {}
    for path in glob.glob(os.path.join(ROOT, "plugins", "filter", "*.py")):
        src = scan.source(path)
        method = src.functions.get("FilterModule.filters")
        for node in scan.ast.walk(method) if method else []:
            if isinstance(node, scan.ast.Dict):
                for key, value in zip(node.keys, node.values):
                    if isinstance(key, scan.ast.Constant) and isinstance(value, scan.ast.Name) and value.id in src.functions:
                        table[key.value] = (path, value.id)
    return table


@functools.lru_cache(maxsize=None)
def reached_by(playbook):
    """The input checks the plays of a playbook up to its preflight make."""
    return frozenset(reach(walked(playbook)[0]))


def reach(before):
    """The input checks the plays up to the preflight make."""
    reached = set()
    for module, validate_only, dummy in before.calls:
        reached |= module_checks(module, "input_check" if validate_only else "run")
    table = filter_functions()
    for name in before.filters & set(table):
        reached |= set(scan.sites(*table[name]))
    return reached


def _excepted(playbook, module, site, before):
    if (module, site[0], site[1]) in NEEDS_STATE or (playbook, module, site[0], site[1]) in AT_THE_CALL:
        return True
    if site[:2] in CREDENTIALS and _first_module_checks_credentials(playbook):
        return True
    if module in BUILT_BY_ROLES or (playbook, module) in REFUSAL_IS_A_RESULT:
        return True
    same = SAME_CHECK_IN_ROLE.get((module, site[0], site[1]))
    return bool(same) and same[0] in before.files


def _first_module_checks_credentials(playbook):
    """Whether the first module the playbook runs after its preflight opens a cloud session (checks the credentials)."""
    calls = walked(playbook)[1].calls
    return bool(calls) and bool({site[:2] for site in module_checks(calls[0][0])} & set(CREDENTIALS))


def unreached(playbook):
    """``{module: [check, ...]}``: the checks of the modules the playbook runs after its preflight that it does not reach."""
    before, after = walked(playbook)
    reached = reached_by(playbook)
    missing = {}
    for module in sorted({module for module, dummy, dummy in after.calls}):
        left = sorted(site for site in module_checks(module) - reached if not _excepted(playbook, module, site, before))
        if left:
            missing[module] = left
    return missing


def _playbooks():
    return sorted(os.path.basename(p) for p in glob.glob(os.path.join(PLAYBOOKS, "*.yml")))


def test_the_scan_finds_the_checks_of_the_modules():
    # the cloud modules' validation, from the source: the options it names and the shared checks it calls
    def named(module, entry="run"):
        return {site[3] for site in module_checks(module, entry)} | {site[2] for site in module_checks(module, entry)}

    assert {"check_cidr", "check_no_overlap", "parse_time", "check_node_locations"} <= {
        site[1] for site in module_checks("gke_cluster", "input_check")} | named("gke_cluster", "input_check")
    assert {"mtu", "concurrency", "zone", "firewall_source_ranges"} <= named("gke_multinetwork", "input_check")
    assert {"machine_type", "accelerator_count", "_validate_gpudirect", "parse_taints", "aks_pool_problems"} <= {
        site[1] for site in module_checks("gpu_nodepool", "input_check")} | named("gpu_nodepool", "input_check")
    # the host modules: raised "option: why" messages
    assert {"gpus", "%s.gpu", "offline.count"} <= named("mig_profile")
    assert {"fabric", "overrides", "dest", "mode"} <= named("nccl_env")
    # what only the service can answer is in run, not in input_check
    assert len(module_checks("gke_cluster")) > len(module_checks("gke_cluster", "input_check")) > 20


def test_the_walk_finds_the_preflight_calls_in_context():
    before, after = walked("gke_gpudirect.yml")
    # the shared task files of the roles run with validate_only in the preflight, without it after
    assert {("gke_multinetwork", True), ("gke_cluster", True), ("gpu_nodepool", True)} <= {c[:2] for c in before.calls}
    assert {("gke_multinetwork", False), ("gke_cluster", False), ("gpu_nodepool", False)} <= {c[:2] for c in after.calls}
    assert "k8s_name_problems" in before.filters
    assert not any(validate_only for dummy, validate_only, dummy in after.calls)


@pytest.mark.parametrize("playbook", _playbooks())
def test_every_input_check_of_every_module_is_reached_by_the_preflight(playbook):
    missing = unreached(playbook)
    lines = ["%s: %s: %s (%s, %s)" % (playbook, module, site[3], site[0], site[1])
             for module, sites in missing.items() for site in sites]
    assert lines == [], (
        "checks of modules that run only at their task, after the playbook's first change; run them in the preflight play "
        "(the module with validate_only or in check mode, or a filter of the same function), or list them in NEEDS_STATE "
        "with the reason:\n" + "\n".join(lines))


def _unreached_everywhere():
    """``{(playbook, module, file, function)}`` of every check a playbook runs after its preflight and does not reach."""
    found = set()
    for playbook in _playbooks():
        before, after = walked(playbook)
        reached = reached_by(playbook)
        for module in {module for module, dummy, dummy in after.calls}:
            found |= {(playbook, module, site[0], site[1]) for site in module_checks(module) - reached}
    return found


def test_every_exception_is_a_check_that_is_run_and_not_reached():
    runs = _unreached_everywhere()
    stale = sorted((set(NEEDS_STATE) | set(SAME_CHECK_IN_ROLE)) - {entry[1:] for entry in runs})
    stale += sorted(set(AT_THE_CALL) - runs)
    stale += sorted(set(CREDENTIALS) - {entry[2:] for entry in runs})
    stale += sorted(set(REFUSAL_IS_A_RESULT) - {entry[:2] for entry in runs})
    stale += sorted(set(BUILT_BY_ROLES) - {entry[1] for entry in runs})
    assert stale == [], "reached by every preflight, or no longer a check: remove these exceptions: %s" % stale
    assert all(reason for table in (NEEDS_STATE, AT_THE_CALL, REFUSAL_IS_A_RESULT, BUILT_BY_ROLES, CREDENTIALS)
               for reason in table.values())


def test_the_credentials_are_checked_by_the_first_cloud_request():
    cloud = ("gke_gpudirect.yml", "gke_gpudirect_teardown.yml", "aks_mig.yml", "site.yml")
    firsts = {playbook: walked(playbook)[1].calls[0][:1] for playbook in cloud}
    assert firsts == {"gke_gpudirect.yml": ("gke_multinetwork",), "gke_gpudirect_teardown.yml": ("gke_multinetwork",),
                      "aks_mig.yml": ("gpu_nodepool",), "site.yml": ("gke_multinetwork",)}, firsts
    assert all(_first_module_checks_credentials(playbook) for playbook in firsts)


def test_a_refusal_that_is_a_result_is_read_only_and_ignored():
    for playbook, module in REFUSAL_IS_A_RESULT:
        dummy, after = walked(playbook)
        calls = [ignored for name, ignored in after.ignored if name == module]
        assert calls and all(calls), (playbook, module)
        assert module.endswith("_info"), "a module that only reads"


def test_a_check_the_role_makes_instead_is_in_the_role_file():
    for (module, dummy, dummy), (path, message) in SAME_CHECK_IN_ROLE.items():
        with open(os.path.join(ROOT, path), encoding="utf-8") as handle:
            assert message in handle.read(), (module, path, message)
        for playbook in _playbooks():
            before, after = walked(playbook)
            if module in {name for name, dummy, dummy in after.calls}:
                assert path in before.files, (playbook, module, path)


def test_every_role_a_playbook_runs_has_its_preflight_run_first():
    """Each role's checks are reached by its preflight (tests/unit/test_role_checks_preflight.py); here each playbook runs
    the preflight of every role and entry point it runs, in the plays before its first change."""
    missing, excepted = [], set()
    for playbook in _playbooks():
        before, after = walked(playbook)
        for role, entry in sorted(after.roles):
            if internal(role, entry) or role in ROLES_WITHOUT_PREFLIGHT:
                continue
            if (playbook, role) in ROLE_IN_ROLE:
                excepted.add((playbook, role))
            elif (role, entry) not in before.roles:
                missing.append("%s: %s (entry point %s)" % (playbook, role, entry))
    assert missing == [], "roles whose preflight the playbook does not run before its first change:\n" + "\n".join(missing)
    assert excepted == set(ROLE_IN_ROLE), "not (or no longer) a role run inside another: %s" % (set(ROLE_IN_ROLE) - excepted)
