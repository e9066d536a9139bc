# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""meta/execution-environment.yml: `ansible-builder create` makes a build context with our requirements.

`create` needs no container engine; the image itself is not built here.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from ansible_collections.gpu_ops.cluster.tests.integration.conftest import REPO_ROOT

INPUTS = ("meta/execution-environment.yml", "requirements.txt", "bindep.txt", "requirements.yml", "galaxy.yml")
# never in the collection tarball: local toolchains, build outputs, test output
NOT_SHIPPED = (".venv", ".collections", ".build", "dist/", "context/", "rendered/", "tests/output/", "benchmarks/results/")


def tool(name):
    candidate = Path(sys.executable).parent / name
    return str(candidate) if candidate.exists() else name


@pytest.fixture(scope="module")
def context(tmp_path_factory):
    """The EE inputs laid out as in the repository, the collection tarball in dist/, and the created context."""
    work = tmp_path_factory.mktemp("ee")
    for name in INPUTS:
        (work / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO_ROOT / name, work / name)
    subprocess.run([tool("ansible-galaxy"), "collection", "build", str(REPO_ROOT), "--output-path", str(work / "dist")],
                   check=True, capture_output=True, text=True, cwd=str(work))
    proc = subprocess.run([tool("ansible-builder"), "create", "-f", str(work / "meta/execution-environment.yml"),
                           "-c", str(work / "context"), "--output-filename", "Containerfile"],
                          capture_output=True, text=True, cwd=str(work), check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return work


def test_context_carries_our_requirements(context):
    build = context / "context" / "_build"
    for name in ("requirements.txt", "bindep.txt", "requirements.yml"):
        assert (build / name).read_text(encoding="utf-8") == (REPO_ROOT / name).read_text(encoding="utf-8"), name
    tarballs = list((build / "gpu_ops_cluster").glob("gpu_ops-cluster-*.tar.gz"))
    assert len(tarballs) == 1


def test_containerfile_installs_interpreter_ansible_collections_and_this_collection(context):
    text = (context / "context" / "Containerfile").read_text(encoding="utf-8")
    core = next(line.split("==")[1] for line in (REPO_ROOT / "tests/requirements-2.19.txt").read_text().splitlines()
                if line.startswith("ansible-core=="))
    assert 'ARG EE_BASE_IMAGE="quay.io/centos/centos:stream9"' in text
    assert 'ARG PYCMD="/usr/bin/python3.11"' in text
    assert 'ARG ANSIBLE_INSTALL_REFS="ansible-core==%s ansible-runner==' % core in text
    assert "ansible-galaxy collection install $ANSIBLE_GALAXY_CLI_COLLECTION_OPTS -r requirements.yml" in text
    assert "--user-pip=requirements.txt --user-bindep=bindep.txt" in text
    final = text.split("FROM base AS final", 1)[1]
    assert "ansible-galaxy collection install --no-deps -p /usr/share/ansible/collections" in final


def test_collection_tarball_leaves_out_local_and_test_output(context):
    tarball = next((context / "dist").glob("gpu_ops-cluster-*.tar.gz"))
    with tarfile.open(tarball) as archive:
        names = archive.getnames()
    assert "roles/awx_job_templates/tasks/main.yml" in names and "playbooks/awx_setup.yml" in names
    assert "meta/execution-environment.yml" in names
    leaked = [n for n in names if n.startswith(NOT_SHIPPED)]
    assert not leaked, leaked
