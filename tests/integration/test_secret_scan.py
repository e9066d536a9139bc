# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""No credential in any output, in any form: every credential option of every cloud module, at ``-vvv``; and what
playbooks/validate.yml reads (live from the Kubernetes double, or offline from a snapshot file a user sent) at the
default verbosity, ``-v`` and ``-vvv``.

One ``ansible-playbook -vvv`` run holds every case as a task (``ignore_errors``, registered), against the GCP
double (its token endpoint for service-account keys), the ARM double and a Microsoft Entra authority double
(client secrets). Cases: a credential with a trailing newline (works, stripped), one with CR/LF inside (refused,
naming the option), and doubles answering 401 / 500 (or, at the token endpoints, refusing the login) with the
credential quoted back in every form (tests/doubles/hostile.py). Then the run's stdout, stderr and every
registered result are searched for every secret in every form; each case's own outcome is checked as well.
"""

from __future__ import annotations

import base64
import json
import os
import uuid
from urllib.parse import quote, quote_plus

import pytest
import yaml

from ansible.release import __version__ as ansible_core_version

from ansible_collections.gpu_ops.cluster.tests.doubles.entra import EntraDouble
from ansible_collections.gpu_ops.cluster.tests.integration.conftest import AZURE_CLUSTER, AZURE_RESOURCE_GROUP
from ansible_collections.gpu_ops.cluster.tests.integration.test_playbook_validate import PLAYBOOK as VALIDATE, _seed

CORE_LINE = tuple(int(part) for part in ansible_core_version.split(".")[:2])
TENANT = "7d4bb8c0-6b1e-4a84-9d1e-0000000000aa"
CLIENT = "3f9a2e11-5c4d-4e5f-8a7b-0000000000bb"
GCP_MODULES = {
    "gke_cluster": dict(name="scan", location="us-central1-a", multi_networking=False),
    "gke_multinetwork": dict(cluster="scan", location="us-central1", gpudirect="tcpx"),
    "gpu_nodepool_gke": dict(provider="gke", cluster="scan", location="us-central1-a", name="l4",
                             machine_type="g2-standard-8", accelerator_type="nvidia-l4", accelerator_count=1,
                             node_count=1),
}
AKS_POOL = dict(provider="aks", cluster=AZURE_CLUSTER, name="scan", vm_size="Standard_NC24ads_A100_v4", node_count=1)


def forms(secret):
    """Every form a secret may be written in (written here on its own, not taken from the code under test)."""
    found = set()
    for text in (secret, secret.strip()):
        data = text.encode("utf-8")
        found.update((text, repr(text)[1:-1], json.dumps(text)[1:-1], quote(text, safe=""), quote(text), quote_plus(text),
                      text.encode("unicode_escape").decode("ascii")))
        for encoded in (base64.b64encode(data).decode(), base64.urlsafe_b64encode(data).decode()):
            found.update((encoded, encoded.rstrip("=")))
    return set(f for f in found if len(f) >= 8)


def _unique(prefix):
    return "%s-%s" % (prefix, uuid.uuid4().hex)


class Scenario:
    """The play, its variables, what each case expects, and the secrets to search for."""

    def __init__(self, gcp, arm, entra, folder):
        self.gcp, self.arm, self.entra, self.folder = gcp, arm, entra, folder
        self.cases = {}  # case id -> (expected status, text the message must hold, text it must not)
        self.secrets = {}  # name -> value
        self.tasks = []
        self.variables = {}

    def add(self, case, module, args, expect, holds=None, lacks=None, variables=None):
        action = "gpu_ops.cluster.gpu_nodepool" if module.startswith("gpu_nodepool") else "gpu_ops.cluster." + module
        self.tasks.append({"name": case, action: args, "register": "r_%d" % len(self.tasks),
                           "ignore_errors": True, "check_mode": True})
        self.variables.update(variables or {})
        self.cases[case] = (expect, holds, lacks)

    # ---- GCP: access_token, service_account_contents, service_account_file
    def gcp_cases(self, module, own):
        gcp = self.gcp
        token = gcp.token
        self.secrets["gcp token"] = token
        base = dict(own, container_endpoint=gcp.url, compute_endpoint=gcp.url, max_retries=0)
        key = gcp.service_account_key(project="scan-project", name="sa-" + module.replace("_", "-")[:20])
        self.secrets[module + " private_key"] = key["private_key"]
        self.secrets[module + " private_key_id"] = key["private_key_id"]
        key_text = json.dumps(key)
        self.secrets[module + " key json"] = key_text
        key_file = self.folder / ("%s-key.json" % module)
        key_file.write_text(key_text + "\n", encoding="utf-8")
        bad_token = "ya29.%s\r\n%s" % (uuid.uuid4().hex, uuid.uuid4().hex)
        self.secrets[module + " crlf token"] = bad_token
        bad_key = dict(key, client_email="sa@scan-project.iam.gserviceaccount.com\r\nX-Injected: 1")
        v = module.replace("-", "_")
        token_args = dict(base, auth_kind="accesstoken", access_token="{{ %s_token }}" % v)
        self.add("%s access_token with a trailing newline" % module, module,
                 dict(token_args, project="scan-project"), "ok", variables={v + "_token": token + "\n"})
        self.add("%s access_token with CR/LF inside" % module, module,
                 dict(token_args, project="scan-project", access_token="{{ %s_bad_token }}" % v), "failed",
                 holds="access_token", variables={v + "_bad_token": bad_token})
        self.add("%s access_token refused with 401, echoed" % module, module,
                 dict(token_args, project="echo401-" + v.replace("_", "-")), "failed",
                 holds="expired or is not valid", lacks="refresh_token")
        self.add("%s access_token answered 500, echoed" % module, module,
                 dict(token_args, project="echo500-" + v.replace("_", "-")), "failed", holds="HTTP 500")
        sa_args = dict(base, auth_kind="serviceaccount", project="scan-project")
        self.add("%s service_account_contents (a dict)" % module, module,
                 dict(sa_args, service_account_contents="{{ %s_key }}" % v), "ok", variables={v + "_key": key})
        self.add("%s service_account_contents text with a trailing newline" % module, module,
                 dict(sa_args, service_account_contents="{{ %s_key_text }}" % v), "ok",
                 variables={v + "_key_text": key_text + "\n"})
        self.add("%s service_account_contents with CR/LF in client_email" % module, module,
                 dict(sa_args, service_account_contents="{{ %s_bad_key }}" % v), "failed",
                 # (Ansible masks every string of a no_log dict, "service_account" among them: the option's name
                 # comes out as "********_contents")
                 holds="_contents: its field client_email", variables={v + "_bad_key": bad_key})
        self.add("%s service_account_file holding a key and a trailing newline" % module, module,
                 dict(sa_args, service_account_file=str(key_file)), "ok")
        self.add("%s service_account_file path with a trailing newline" % module, module,
                 dict(sa_args, service_account_file=str(key_file) + "\n"), "failed", holds="service_account_file")
        echo_key = gcp.service_account_key(project="scan-project", name="echo-" + module.replace("_", "-")[:20],
                                           echo_login=True)
        self.secrets[module + " echoed private_key"] = echo_key["private_key"]
        self.add("%s service_account_contents refused at the token endpoint, echoed" % module, module,
                 dict(sa_args, service_account_contents="{{ %s_echo_key }}" % v), "failed",
                 # ansible-core before 2.19 turns the JSON text into a dict, and masks every string of a no_log dict:
                 # the token URL too
                 holds="Google login failed at %s" % ("%stoken" % gcp.url if CORE_LINE >= (2, 19) else "********"),
                 variables={v + "_echo_key": json.dumps(echo_key)})

    # ---- Azure: client_secret (tenant_id and client_id are identifiers, not secrets)
    def aks_cases(self):
        secret = "Q~%s.%s_x" % (uuid.uuid4().hex, uuid.uuid4().hex[:8])
        self.entra.add_application(TENANT, CLIENT, secret)
        self.entra.echo = True
        wrong = "Q~" + uuid.uuid4().hex
        crlf = "Q~%s\r\n%s" % (uuid.uuid4().hex, uuid.uuid4().hex)
        self.secrets.update({"client secret": secret, "wrong client secret": wrong, "crlf client secret": crlf})
        base = dict(AKS_POOL, subscription_id=self.arm.subscription, arm_endpoint=self.arm.url, tenant_id=TENANT,
                    client_id=CLIENT, authority_host=self.entra.authority, max_retries=0,
                    resource_group=AZURE_RESOURCE_GROUP)
        self.add("aks client_secret with a trailing newline", "gpu_nodepool_aks",
                 dict(base, client_secret="{{ aks_secret }}"), "ok", variables={"aks_secret": secret + "\n"})
        self.add("aks client_secret with CR/LF inside", "gpu_nodepool_aks",
                 dict(base, client_secret="{{ aks_crlf }}"), "failed", holds="client_secret",
                 variables={"aks_crlf": crlf})
        self.add("aks client_secret refused at the authority, echoed", "gpu_nodepool_aks",
                 dict(base, client_secret="{{ aks_wrong }}"), "failed",
                 holds="Azure login failed at %s" % self.entra.authority, lacks="ARM request failed",
                 variables={"aks_wrong": wrong})
        for status in (401, 500):
            group = "rg-echo%d" % status
            self.arm.add_resource_group(group)
            self.arm.fault("echo_auth", count=1000, match="/resourcegroups/%s/" % group, code=status)
            self.add("aks token answered %d by ARM, echoed" % status, "gpu_nodepool_aks",
                     dict(base, client_secret="{{ aks_secret }}", resource_group=group), "failed",
                     holds="ARM request failed: HTTP %d" % status)


@pytest.fixture(scope="module")
def scan(run_playbook_module, tmp_path_factory):
    from ansible_collections.gpu_ops.cluster.tests.doubles.arm import ArmDouble  # pylint: disable=import-outside-toplevel
    from ansible_collections.gpu_ops.cluster.tests.doubles.gcp import GcpDouble  # pylint: disable=import-outside-toplevel

    folder = tmp_path_factory.mktemp("secret-scan")
    with GcpDouble() as gcp, ArmDouble(retry_after=0) as arm, EntraDouble(arm) as entra:
        arm.add_cluster(AZURE_RESOURCE_GROUP, AZURE_CLUSTER, kubernetes_version="1.33.2")
        gcp.inject("echo_auth", path="/projects/echo401-", status=401, count=1000)
        gcp.inject("echo_auth", path="/projects/echo500-", status=500, count=1000)
        scenario = Scenario(gcp, arm, entra, folder)
        for module, own in GCP_MODULES.items():
            scenario.gcp_cases(module, own)
        scenario.aks_cases()
        # gpu_nodepool needs its cluster (the cases run in check mode)
        setup = {"name": "setup: the cluster", "gpu_ops.cluster.gke_cluster": dict(
            GCP_MODULES["gke_cluster"], project="scan-project", auth_kind="accesstoken", access_token=gcp.token,
            container_endpoint=gcp.url, compute_endpoint=gcp.url)}
        tasks = [setup] + scenario.tasks + [{"name": "every registered result", "ansible.builtin.debug": {
            "var": "[%s]" % ", ".join("r_%d" % i for i in range(len(scenario.tasks)))}}]
        play = [dict(name="secret scan", hosts="localhost", gather_facts=False, tasks=tasks)]
        env = {k: "" for k in os.environ if k.startswith(("AZURE_", "IDENTITY_", "MSI_", "GOOGLE_"))}
        env["REQUESTS_CA_BUNDLE"] = entra.ca_file
        result = run_playbook_module(play, extra_vars=scenario.variables, env=env, verbosity=3)
        with arm.lock:
            scenario.secrets.update(("arm token %d" % i, t) for i, t in enumerate(arm.tokens))
        yield scenario, result


def test_every_case_ran_and_ended_as_expected(scan):
    scenario, result = scan
    assert result.rc == 0, result.output
    by_name = {r["task"]: r for r in result.results}
    for case, (expect, holds, lacks) in scenario.cases.items():  # failed under ignore_errors is "ignored"
        record = by_name.get(case)
        assert record is not None, "case %r did not run:\n%s" % (case, result.output[-4000:])
        message = record["result"].get("msg") or ""
        assert record["status"] == {"failed": "ignored"}.get(expect, expect), "%s: %s %s" % (case, record["status"], message)
        if holds:
            assert holds in message, "%s: %r not in %r" % (case, holds, message)
        if lacks:
            assert lacks not in message, "%s: %r in %r" % (case, lacks, message)


def test_no_secret_in_any_form_anywhere(scan):
    scenario, result = scan
    searched = {"stdout": result.stdout, "stderr": result.stderr,
                "registered results": json.dumps([r["result"] for r in result.results])}
    leaks = []
    for name, secret in scenario.secrets.items():
        for form in forms(secret):
            leaks.extend("%s (%r) in %s" % (name, form[:24], where) for where, text in searched.items() if form in text)
    assert not leaks, "\n".join(leaks[:40])
    # the scan searched something real: -vvv output of module processes, and every case's result
    assert "ESTABLISH LOCAL CONNECTION" in result.stdout
    assert len(result.results) == len(scenario.cases) + 2


# ---- playbooks/validate.yml: values planted where a cluster keeps credentials, live and offline, at three verbosities

VERBOSITIES = (0, 1, 3)


def _planted_cluster(k8s, secrets):
    """The healthy cluster of test_playbook_validate with a credential in every place a workload may keep one."""
    planted = dict((where, _unique("planted-" + where)) for where in (
        "pod-env", "pod-init-env", "pod-args", "pod-command", "pod-annotation", "last-applied", "secret-data",
        "secret-string-data", "daemonset-env", "daemonset-args", "policy-env", "node-annotation"))
    secrets.update(planted)
    _seed(k8s)
    k8s.put({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "hf", "namespace": "default"},
             "data": {"token": base64.b64encode(planted["secret-data"].encode()).decode()},
             "stringData": {"other": planted["secret-string-data"]}})
    init = {"name": "init", "image": "busybox", "env": [{"name": "INIT_TOKEN", "value": planted["pod-init-env"]}]}
    main = {"name": "t", "image": "pytorch", "command": ["sh", "-c", "run --key " + planted["pod-command"]],
            "args": ["--token", planted["pod-args"]], "resources": {"limits": {"nvidia.com/mig-1g.5gb": "1"}},
            "env": [{"name": "API_TOKEN", "value": planted["pod-env"]},
                    {"name": "FROM_SECRET", "valueFrom": {"secretKeyRef": {"name": "hf", "key": "token"}}}]}
    annotations = {"example.com/api-key": planted["pod-annotation"],
                   "kubectl.kubernetes.io/last-applied-configuration": json.dumps({"token": planted["last-applied"]})}
    k8s.put({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "planted", "namespace": "default", "annotations": annotations},
             "spec": {"nodeName": "dgx-0", "initContainers": [init], "containers": [main]}})
    k8s.modify("DaemonSet", "nvidia-driver-daemonset", lambda d: d["spec"]["template"]["spec"]["containers"][0].update(
        env=[{"name": "REGISTRY_PASSWORD", "value": planted["daemonset-env"]}], args=["--password", planted["daemonset-args"]]),
        namespace="gpu-operator")
    k8s.modify("ClusterPolicy", "cluster-policy", lambda p: p["spec"]["driver"].update(
        env=[{"name": "HTTPS_PROXY", "value": "http://user:%s@proxy:3128" % planted["policy-env"]}]))
    k8s.modify("Node", "dgx-1", lambda n: n["metadata"].setdefault("annotations", {}).update(note=planted["node-annotation"]))


def _planted_snapshot(path, secrets):
    """A snapshot file as a user may send it: raw objects (env values, command lines, annotations) and Secrets."""
    planted = dict((where, _unique("planted-file-" + where)) for where in (
        "pod-env", "pod-args", "pod-annotation", "secret-in-pods", "secret-part", "secret-under-gke", "target-field"))
    secrets.update(planted)
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "hf", "namespace": "default"},
              "data": {"token": base64.b64encode(planted["secret-in-pods"].encode()).decode()}}
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "gpu-0", "labels": {"nvidia.com/gpu.present": "true"}},
            "status": {"allocatable": {"nvidia.com/gpu": "8"}, "nodeInfo": {"kubeletVersion": "v1.32.2"}}}
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "trainer", "namespace": "default",
                                                           "annotations": {"example.com/api-key": planted["pod-annotation"]}},
           "spec": {"nodeName": "gpu-0", "containers": [{"name": "t", "image": "pytorch", "args": [planted["pod-args"]],
                                                         "resources": {"limits": {"nvidia.com/gpu": "8"}},
                                                         "env": [{"name": "API_TOKEN", "value": planted["pod-env"]}]}]},
           "status": {"phase": "Running"}}
    document = {"format": "gpu_ops.cluster/validate-snapshot", "version": 1,
                "target": {"name": "sent-by-a-user", "kind": "kubernetes", "token": planted["target-field"]},
                "kubernetes": {"nodes": [node], "daemonsets": [], "pods": [pod, secret], "cluster_policies": [],
                               "nic_cluster_policies": [],
                               "secrets": [dict(secret, data={"token": base64.b64encode(planted["secret-part"].encode()).decode()})]},
                "gke": {"cluster": None, "node_pools": None, "nics": None,
                        "also": dict(secret, data={"token": base64.b64encode(planted["secret-under-gke"].encode()).decode()})}}
    path.write_text(json.dumps(document), encoding="utf-8")
    return "sent-by-a-user"


@pytest.fixture(scope="module")
def validate_runs(run_playbook_module, k8s_double_module, tmp_path_factory):
    """validate.yml live and offline at each verbosity: {(mode, verbosity): (result, report folder)}, the secrets."""
    folder = tmp_path_factory.mktemp("validate-secret-scan")
    secrets = {"kubeconfig token": k8s_double_module.token}
    _planted_cluster(k8s_double_module, secrets)
    target = _planted_snapshot(folder / "sent.json", secrets)
    # the connection as the playbooks take it, the kubeconfig itself (a dict, its token inside) in gpu_ops_kubeconfig
    with open(k8s_double_module.kubeconfig, encoding="utf-8") as handle:
        kubeconfig = yaml.safe_load(handle)
    runs = {}
    for verbosity in VERBOSITIES:
        out = folder / ("live-%d" % verbosity)
        result = run_playbook_module(VALIDATE, extra_vars=dict(validate_clusters="localhost", validate_hosts="no-such-group",
                                                               validate_output_dir=str(out), gpu_ops_kubeconfig=kubeconfig),
                                     env={"KUBECONFIG": str(folder / "no-such-kubeconfig")}, verbosity=verbosity)
        runs[("live", verbosity)] = (result, out / "localhost")
        out = folder / ("offline-%d" % verbosity)
        result = run_playbook_module(VALIDATE, extra_vars=dict(validate_snapshot=str(folder / "sent.json"),
                                                               validate_output_dir=str(out)), verbosity=verbosity)
        runs[("offline", verbosity)] = (result, out / target)
    yield runs, secrets


@pytest.mark.parametrize("mode", ["live", "offline"])
@pytest.mark.parametrize("verbosity", VERBOSITIES)
def test_validate_shows_no_planted_secret_at_any_verbosity(validate_runs, mode, verbosity):
    runs, secrets = validate_runs
    result, reports = runs[(mode, verbosity)]
    written = sorted(p.name for p in reports.iterdir())
    # the run validated: every report written, the snapshot (live) too
    assert written == (["ctrf.json", "junit.xml", "report.md", "snapshot.json"] if mode == "live" else
                       ["ctrf.json", "junit.xml", "report.md"]), result.output
    searched = {"stdout": result.stdout, "stderr": result.stderr,
                "registered results": json.dumps([r["result"] for r in result.results])}
    searched.update(("file " + name, (reports / name).read_text(encoding="utf-8")) for name in written)
    leaks = []
    for name, secret in secrets.items():
        for form in forms(secret):
            leaks.extend("%s (%r) in %s" % (name, form[:24], where) for where, text in searched.items() if form in text)
    assert not leaks, "\n".join(leaks[:40])
    if verbosity >= 3:
        assert "ESTABLISH LOCAL CONNECTION" in result.stdout
    if mode == "live":
        # the checks still judged the planted pod: its GPU request counts, its env names are kept
        snapshot = json.loads((reports / "snapshot.json").read_text(encoding="utf-8"))
        [pod] = [p for p in snapshot["kubernetes"]["pods"] if p["metadata"]["name"] == "planted"]
        assert pod["spec"]["containers"][0]["env"] == [{"name": "API_TOKEN"}, {"name": "FROM_SECRET"}]
