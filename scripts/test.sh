#!/usr/bin/env bash
# The whole test suite, set up from nothing: `make test` (and so .ci/run) runs this.
#
# Primary line: ansible-core 2.19 on Python 3.11 runs every step.
# Second line:  ansible-core 2.21 on Python 3.12, when that interpreter is present, runs
#               sanity, units, contract and the integration smoke subset (integration_smoke_files) again.
#
#   scripts/test.sh              everything
#   STEPS="sanity units" scripts/test.sh     a subset (names below)
set -uo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root" || exit 1
all_steps="sanity units contract integration integration-smoke lint molecule build"
steps=${STEPS:-$all_steps}
passed=0
failed=0
failures=()

log() { printf '\n=== %s\n' "$*"; }

run_step() {
    local line=$1 name=$2
    shift 2
    local start=$SECONDS
    log "[$line] $name"
    if "$@"; then
        passed=$((passed + 1))
        printf '=== [%s] %s passed in %ss\n' "$line" "$name" $((SECONDS - start))
    else
        failed=$((failed + 1))
        failures+=("$line:$name")
        printf '=== [%s] %s FAILED in %ss\n' "$line" "$name" $((SECONDS - start))
    fi
}

find_python312() {
    local candidate
    for candidate in python3.12 "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.12*/bin/python3.12; do
        if command -v "$candidate" >/dev/null 2>&1 && "$candidate" -c 'import sys; assert sys.version_info[:2] == (3, 12)' 2>/dev/null; then
            echo "$candidate"
            return
        fi
    done
}

# ansible-test insists on running inside ansible_collections/<ns>/<name>: copy what git knows
# about (tracked, plus untracked files that are not ignored) into such a tree.
stage_collection() {
    local build=$1
    local dest="$build/ansible_collections/gpu_ops/cluster"
    rm -rf "$dest"
    mkdir -p "$dest" "$build/ansible_collections/kubernetes"
    git ls-files -co --exclude-standard -z | while IFS= read -r -d '' f; do
        [ -e "$f" ] && printf '%s\0' "$f"
    done | tar --null -T - -cf - | tar -xf - -C "$dest"
    ln -sfn "$root/.collections/ansible_collections/kubernetes/core" "$build/ansible_collections/kubernetes/core"
    # awx.awx: only playbooks/awx_setup.yml and its tests use it
    mkdir -p "$build/ansible_collections/awx" && ln -sfn "$root/.collections/ansible_collections/awx/awx" "$build/ansible_collections/awx/awx"
    echo "$dest"
}

check_no_ignores() {
    local found
    found=$(find tests/sanity -name 'ignore-*.txt' -size +0 2>/dev/null)
    if [ -n "$found" ]; then
        echo "sanity ignore files must stay empty: $found" >&2
        return 1
    fi
}

sanity() {
    check_no_ignores && (cd "$stage" && "$venv/bin/ansible-test" sanity --local --python "$pyver" --color no)
}

units() {
    (cd "$stage" && "$venv/bin/ansible-test" units --local --python "$pyver" --color no)
}

pytest_in_stage() {
    (cd "$stage" && PATH="$venv/bin:$PATH" ANSIBLE_COLLECTIONS_PATH="$build" PYTHONPATH="$build" \
        "$venv/bin/python" -m pytest -p no:cacheprovider -q "$@")
}

# The tests of the test doubles live in tests/doubles/tests/: the Python-only ones run with the contract step, the
# ones that need the integration environment (kubernetes.core, helm, the integration fixtures) with the integration
# step. Every file there is in exactly one list (check_double_lists fails the step otherwise).
double_contract_files=(
    tests/doubles/tests/test_arm.py
    tests/doubles/tests/test_fake_nvidia_smi.py
    tests/doubles/tests/test_gcp.py
)
double_integration_files=(
    tests/doubles/tests/test_awx.py
    tests/doubles/tests/test_k8s.py
    tests/doubles/tests/test_k8s_helm.py
    tests/doubles/tests/test_k8s_kubernetes_core.py
)

check_double_lists() {
    local f listed=" ${double_contract_files[*]} ${double_integration_files[*]} " status=0
    for f in tests/doubles/tests/test_*.py; do
        case $listed in
            *" $f "*) ;;
            *) echo "$f is in neither double_contract_files nor double_integration_files (scripts/test.sh)" >&2; status=1 ;;
        esac
    done
    for f in "${double_contract_files[@]}" "${double_integration_files[@]}"; do
        [ -f "$f" ] || { echo "$f is listed in scripts/test.sh but does not exist" >&2; status=1; }
    done
    return $status
}

contract() { check_double_lists && pytest_in_stage tests/contract "${double_contract_files[@]}"; }

# the playbook runs mostly wait on subprocesses and doubles: two workers halve the wall time
integration() { check_double_lists && pytest_in_stage -n 2 tests/integration "${double_integration_files[@]}"; }

# The second line re-runs the integration files where ansible-core versions differ (no_log and verbose
# output, module_defaults and action groups, argument-spec validation, kubernetes.core and helm), so that
# a fresh-clone run stays well under CI's time; the first line runs them all.
integration_smoke_files=(
    tests/integration/test_action_groups.py
    tests/integration/test_bad_input.py
    tests/integration/test_bad_role_input.py
    tests/integration/test_module_gpu_nodepool_aks.py
    tests/integration/test_playbook_gke_gpudirect.py
    tests/integration/test_role_apply.py
    tests/integration/test_role_nvidia_device_plugin_helm.py
    tests/integration/test_secret_scan.py
    tests/doubles/tests/test_k8s_kubernetes_core.py
)
integration_smoke() { pytest_in_stage -n 2 "${integration_smoke_files[@]}"; }

# ansible-lint and molecule install collections under ~/.ansible; give them a HOME of their own so
# that a copy left there can never shadow the working tree (for them or for anything else).
# A new, empty HOME for every step: ansible-lint and molecule install the collection under
# ~/.ansible, and a copy left by an earlier run (another checkout, an older commit) would be found
# before the working tree.
with_isolated_home() {
    local home rc
    home=$(mktemp -d "${TMPDIR:-/tmp}/gpu_ops_cluster-home-$line.XXXXXX") || return 1
    (HOME=$home "$@")
    rc=$?
    rm -rf "$home"
    return $rc
}

lint() {
    (PATH="$venv/bin:$PATH" ANSIBLE_COLLECTIONS_PATH="$root/.collections" \
        with_isolated_home "$venv/bin/ansible-lint" --offline --profile production)
}

molecule_test() {
    (cd "$root" && PATH="$venv/bin:$PATH" ANSIBLE_COLLECTIONS_PATH="$root/.collections" \
        with_isolated_home "$venv/bin/molecule" test --all)
}

build_and_doc() {
    PATH="$venv/bin:$PATH" bash "$root/scripts/check_build.sh"
}

run_line() {
    line=$1 venv=$2 python=$3 requirements=$4 line_steps=$5
    if ! bash scripts/bootstrap.sh "$venv" "$python" "$requirements"; then
        failed=$((failed + 1))
        failures+=("$line:bootstrap")
        return
    fi
    pyver=$("$venv/bin/python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
    # outside the repository: ansible-test lists files with git, and .build would be ignored
    build="${GPU_OPS_BUILD_DIR:-${TMPDIR:-/tmp}/gpu_ops_cluster-build}/$line"
    stage=$(stage_collection "$build")
    for step in $line_steps; do
        case " $steps " in *" $step "*) ;; *) continue ;; esac
        case $step in
            sanity) run_step "$line" sanity sanity ;;
            units) run_step "$line" units units ;;
            contract) run_step "$line" contract contract ;;
            integration) run_step "$line" integration integration ;;
            integration-smoke) run_step "$line" integration-smoke integration_smoke ;;
            lint) run_step "$line" ansible-lint lint ;;
            molecule) run_step "$line" molecule molecule_test ;;
            build) run_step "$line" build-and-doc build_and_doc ;;
        esac
    done
}

run_line core-2.19 "$root/.venv" python3.11 tests/requirements-2.19.txt "sanity units contract integration lint molecule build"

python312=$(find_python312)
if [ -n "$python312" ] && [ -z "${SKIP_SECOND_LINE:-}" ]; then
    run_line core-2.21 "$root/.venv312" "$python312" tests/requirements-2.21.txt "sanity units contract integration-smoke"
elif [ -n "${SKIP_SECOND_LINE:-}" ]; then
    log "SKIP_SECOND_LINE is set: the ansible-core 2.21 line is skipped"
else
    log "Python 3.12 not found: the ansible-core 2.21 line is skipped"
fi

echo
if [ "$failed" -gt 0 ]; then
    echo "failed steps: ${failures[*]}"
fi
echo "steps: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
