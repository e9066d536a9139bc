# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What loading the collection's filter plugins costs a worker.

The first template of a task that names any ``gpu_ops.cluster`` filter makes ansible-core load every filter file of
the collection, in the forked worker that runs the task. A filter file that imports a cloud or Kubernetes client
makes each such worker pay that import (about 0.1-0.2 s here); the filters need none of them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from ansible_collections.gpu_ops.cluster.plugins.filter import validate as validate_filter

FILTERS = Path(validate_filter.__file__).parent
# the folder that holds ansible_collections/ (not resolved: the collection may be a symlink into it)
HOLDER = Path(validate_filter.__file__).parents[5]
# client libraries the modules and engines use; none is a filter's business
# (the bare `azure` namespace package is not one: finding out whether azure-identity is installed imports it)
HEAVY = ("requests", "urllib3", "google.auth", "google.oauth2", "cryptography", "kubernetes", "azure.identity",
         "azure.core", "msal")

PROBE = """
import importlib, json, sys
for name in sys.argv[1:]:
    importlib.import_module("ansible_collections.gpu_ops.cluster.plugins.filter." + name)
print(json.dumps(sorted(sys.modules)))
"""


def loaded_modules(names):
    """The modules a fresh interpreter holds after importing the filter files ``names``."""
    proc = subprocess.run([sys.executable, "-c", PROBE] + list(names), capture_output=True, text=True, check=False,
                          timeout=120, env=dict(os.environ, PYTHONPATH=str(HOLDER)))
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def heavy_of(modules):
    return sorted(m for m in modules if any(m == h or m.startswith(h + ".") for h in HEAVY))


def test_loading_every_filter_file_imports_no_client_library():
    names = sorted(p.stem for p in FILTERS.glob("*.py") if p.stem != "__init__")
    assert "validate" in names and len(names) > 5
    assert heavy_of(loaded_modules(names)) == []


def probe(*names, then=""):
    """The heavy modules a fresh interpreter holds after importing the modules ``names`` (full names) and running
    ``then`` (Python, with the last module as ``last``)."""
    script = PROBE.replace('"ansible_collections.gpu_ops.cluster.plugins.filter." + name', "name").replace(
        "print(", "last = sys.modules[sys.argv[-1]]\n%s\nprint(" % then)
    proc = subprocess.run([sys.executable, "-c", script] + list(names), capture_output=True, text=True, check=False,
                          timeout=120, env=dict(os.environ, PYTHONPATH=str(HOLDER)))
    assert proc.returncode == 0, proc.stderr
    return heavy_of(json.loads(proc.stdout))


def test_the_probe_sees_a_client_library_when_one_is_imported():
    # the checks here would pass on a probe that saw nothing: the same probe sees what a GCP session imports
    assert "requests" in probe("google.auth.transport.requests")


def test_the_cloud_modules_import_no_client_library_until_a_session_is_made():
    """The preflight imports the three cloud modules in the controller (validate_only) to check their requests:
    nothing is sent, so neither google-auth nor requests nor azure-identity is needed there."""
    modules = ["ansible_collections.gpu_ops.cluster.plugins.modules." + name
               for name in ("gke_cluster", "gke_multinetwork", "gpu_nodepool")]
    assert probe(*modules) == []
    # and building a session's parts brings them in: the imports were moved, not lost
    session = "ansible_collections.gpu_ops.cluster.plugins.module_utils._gcp.session"
    assert {"google.auth", "requests"} <= set(probe(session, then="last._google(); last.requests_adapters()"))
    transport = "ansible_collections.gpu_ops.cluster.plugins.module_utils._core.transport"
    assert "requests" in probe(transport, then="assert len(last.request_errors()[0]) == 3")


def test_an_access_token_session_needs_no_google_auth():
    """auth_kind=accesstoken sends the token as it is (nothing refreshes it): a module run that uses one never imports
    google-auth, whose import (with the key-signing code it pulls in) was about a quarter of the run's CPU."""
    session = "ansible_collections.gpu_ops.cluster.plugins.module_utils._gcp.session"
    heavy = probe(session, then=("s = last.GcpSession('p', auth_kind='accesstoken', access_token='t0ken')\n"
                                 "assert s.http.session.headers['Authorization'] == 'Bearer t0ken'"))
    assert "requests" in heavy
    assert not [name for name in heavy if name.startswith(("google.auth", "google.oauth2", "cryptography"))]
