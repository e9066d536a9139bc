# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Our modules run in the Ansible worker where that is the same as a module process (plugin_utils/_inprocess.py).

The same task runs in the worker (the default on a local connection with the controller's Python) and as a
module process (``gpu_ops_in_process: false``) against the GCP double: the results are equal - changed, the
module's return, check mode, diff, a failure with its module_defaults note, no_log masking. Become, async and
another interpreter each send the module to a module process (-vvv says which way each task ran).
"""

from __future__ import annotations

import json
import os
import stat
import sys

import pytest

from ansible_collections.gpu_ops.cluster.plugins.plugin_utils import _inprocess

# on an ansible-core line whose module result steps the worker does not reproduce (2.21) every run is a module
# process: test_secret_scan holds that there
pytestmark = pytest.mark.skipif(not _inprocess.supported(), reason="this ansible-core line runs our modules as module processes")

FABRIC = dict(cluster="a3high", location="us-central1", gpudirect="tcpx")
IN_WORKER = "gpu_ops.cluster: gpu_ops.cluster.%s runs in the worker"
AS_PROCESS = "gpu_ops.cluster: gpu_ops.cluster.%s runs as a module process: %s"
OPT_OUT = {"gpu_ops_in_process": False}


def task(name, module="gke_multinetwork", args=None, subprocess=False, **keywords):
    entry = {"name": name, "gpu_ops.cluster." + module: dict(FABRIC) if args is None else args,
             "register": name.replace(" ", "_"), "ignore_errors": True}
    if subprocess:
        entry["vars"] = dict(OPT_OUT)
    entry.update(keywords)
    return entry


def play(tasks, defaults, **keywords):
    return [dict(name="in-process", hosts="localhost", gather_facts=False, module_defaults=defaults, tasks=tasks,
                 **keywords)]


def results(run):
    return {r["task"]: r for r in run.results}


def comparable(record):
    """A task record without what differs between two runs of the same task anyway (its name)."""
    return {key: value for key, value in record.items() if key != "task"}


def test_the_same_task_in_the_worker_and_as_a_module_process_gives_the_same_result(run_playbook, gcp_double,
                                                                                   gcp_defaults):
    defaults = dict(gcp_defaults, **{"gpu_ops.cluster.gke_cluster": {"release_channel": "bogus"}})
    tasks = [
        task("plan in", check_mode=True, diff=True), task("plan sub", subprocess=True, check_mode=True, diff=True),
        task("create in", diff=True),
        task("again sub", subprocess=True), task("again in"),
        task("remove sub", args=dict(FABRIC, state="absent"), subprocess=True),
        task("create sub", subprocess=True, diff=True),
        # a failure of the module's own (bad value from module_defaults) and one of the engine (bad location)
        task("bad default in", "gke_cluster", dict(name="c", location="us-central1-a")),
        task("bad default sub", "gke_cluster", dict(name="c", location="us-central1-a"), subprocess=True),
        task("bad location in", args=dict(FABRIC, location="nowhere-9")),
        task("bad location sub", args=dict(FABRIC, location="nowhere-9"), subprocess=True),
        task("info in", "gke_multinetwork_info", dict(FABRIC)),
        task("info sub", "gke_multinetwork_info", dict(FABRIC), subprocess=True),
        task("versions in", "gke_server_config_info", dict(location="us-central1")),
        task("versions sub", "gke_server_config_info", dict(location="us-central1"), subprocess=True),
        task("pools in", "gpu_nodepool_info", dict(provider="gke", cluster="none", location="us-central1")),
        task("pools sub", "gpu_nodepool_info", dict(provider="gke", cluster="none", location="us-central1"),
             subprocess=True),
    ]
    run = run_playbook(play(tasks, defaults), verbosity=3)
    assert run.rc == 0, run.output
    by_name = results(run)
    for first, second in [("plan in", "plan sub"), ("create in", "create sub"), ("again in", "again sub"),
                          ("bad default in", "bad default sub"), ("bad location in", "bad location sub"),
                          ("info in", "info sub"), ("versions in", "versions sub"), ("pools in", "pools sub")]:
        assert comparable(by_name[first]) == comparable(by_name[second]), (first, second)
    plan, create = by_name["plan in"]["result"], by_name["create in"]["result"]
    assert plan["changed"] and create["changed"] and not by_name["again in"]["result"]["changed"]
    assert plan["diff"] and plan["diff"] == create["diff"]
    assert by_name["bad default in"]["status"] == "ignored"
    assert "release_channel comes from module_defaults for gpu_ops.cluster.gke_cluster" in \
        by_name["bad default in"]["result"]["msg"]
    assert by_name["bad location in"]["status"] == "ignored" and by_name["bad location in"]["result"]["msg"]
    assert by_name["info in"]["result"]["additional_node_networks"]
    # the token is masked in the invocation either way, and never printed
    assert by_name["create in"]["result"]["invocation"]["module_args"]["access_token"] == \
        "VALUE_SPECIFIED_IN_NO_LOG_PARAMETER"
    assert gcp_double.token not in run.stdout + run.stderr
    # which way each ran: every task of the first kind in the worker, every other one as a module process
    for module in ("gke_multinetwork", "gke_cluster", "gke_multinetwork_info", "gke_server_config_info",
                   "gpu_nodepool_info"):
        assert IN_WORKER % module in run.stdout
        assert AS_PROCESS % (module, "gpu_ops_in_process is false") in run.stdout
    assert run.stdout.count("runs in the worker") == 8 and run.stdout.count("runs as a module process") == 9


def test_become_async_and_another_interpreter_run_a_module_process(run_playbook, gcp_double, gcp_defaults, tmp_path):
    # a sudo that runs the command as this user (ansible-core builds the same command line for it) and a python
    # that is another file (a wrapper of this one): each must send the module to a module process
    fake_sudo = tmp_path / "sudo"
    fake_sudo.write_text('#!/bin/sh\nwhile [ $# -gt 0 ] && [ "$1" != "-u" ]; do shift; done\nshift 2\nexec "$@"\n')
    python = tmp_path / "python"
    python.write_text('#!/bin/sh\nexec %s "$@"\n' % sys.executable)
    for path in (fake_sudo, python):
        path.chmod(path.stat().st_mode | stat.S_IXUSR)
    tasks = [
        task("plain", check_mode=True),
        task("become", check_mode=True, become=True, vars={"ansible_become_exe": str(fake_sudo)}),
        task("async", check_mode=True, **{"async": 60, "poll": 1}),
        task("interpreter", check_mode=True, vars={"ansible_python_interpreter": str(python)}),
        task("pythonpath", check_mode=True, environment={"PYTHONPATH": os.pathsep.join(sys.path)}),
    ]
    run = run_playbook(play(tasks, gcp_defaults), verbosity=3)
    assert run.rc == 0, run.output
    by_name = results(run)
    assert {name: record["status"] for name, record in by_name.items()} == dict.fromkeys(by_name, "ok")
    for name in ("become", "async", "interpreter", "pythonpath"):
        assert by_name[name]["result"]["changed"] and \
            by_name[name]["result"]["networks"] == by_name["plain"]["result"]["networks"], name
    module = "gke_multinetwork"
    assert run.stdout.count(IN_WORKER % module) == 1
    for reason in ("the task uses become", "the task runs async",
                   "the target's python interpreter is not this controller's",
                   "the task's environment sets a PYTHON* variable"):
        assert AS_PROCESS % (module, reason) in run.stdout, reason
    assert gcp_double.mutating_requests() == []


def test_the_task_environment_reaches_the_module_in_the_worker(run_playbook, gcp_double, gcp_defaults, tmp_path):
    # GOOGLE_APPLICATION_CREDENTIALS from the task's environment: application-default credentials read that file
    # (a service-account key the double's token endpoint accepts); the worker's own environment has none
    key = tmp_path / "key.json"
    key.write_text(json.dumps(gcp_double.service_account_key()))
    args = dict(FABRIC, auth_kind="application")
    defaults = {"group/gpu_ops.cluster.gcp": {k: v for k, v in gcp_defaults["group/gpu_ops.cluster.gcp"].items()
                                              if k not in ("access_token", "auth_kind")}}
    tasks = [task("env in", args=args, check_mode=True, environment={"GOOGLE_APPLICATION_CREDENTIALS": str(key)}),
             task("env sub", args=args, check_mode=True, subprocess=True,
                  environment={"GOOGLE_APPLICATION_CREDENTIALS": str(key)})]
    run = run_playbook(play(tasks, defaults), verbosity=3, env={"GOOGLE_APPLICATION_CREDENTIALS": ""})
    assert run.rc == 0, run.output
    by_name = results(run)
    assert by_name["env in"]["status"] == "ok" and by_name["env in"]["result"]["changed"], run.output
    assert comparable(by_name["env in"]) == comparable(by_name["env sub"])
    assert IN_WORKER % "gke_multinetwork" in run.stdout
