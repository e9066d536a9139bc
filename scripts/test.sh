#!/usr/bin/env bash
# The whole test suite, set up from nothing: `make test` (and so .ci/run) runs this.
#
# The matrix: the ansible-core lines meta/runtime.yml supports that matter to users (2.16: AAP 2.5's control plane;
# 2.16, 2.18 and 2.20: the lines Red Hat's certification checker runs sanity on; 2.19 and 2.21: the newest).
#   core-2.19  Python 3.11  every step (the full integration suite, lint, molecule, the build)
#   core-2.18  Python 3.11  sanity, units-controller  } in the background, beside core-2.19's integration step
#   core-2.20  Python 3.12  sanity, units-controller  } (units-controller: the unit tests that can depend on the core line)
#   core-2.21  Python 3.12  sanity, units, contract, the integration smoke subset (integration_smoke_files)
#   core-2.16  Python 3.11  sanity, units, contract, the integration smoke subset: in the background, beside core-2.21
# Integration and smoke steps mostly wait on playbooks and the doubles (about one of CI's two cores), so the lines in
# the background cost little wall time. The lines on Python 3.12 are skipped, saying so, when no Python 3.12 is found.
# The output ends with each line's steps, times and test counts.
#
# Time (CI: a fresh clone on 2 cores, limit 45 min). Before the matrix: 34-37 min (core-2.19: sanity 70 s, units
# 95-121 s, integration 911-1093 s, lint+molecule+build ~100 s; core-2.21: sanity 70-85 s, units 95-123 s, smoke
# 285-340 s; bootstraps ~2 min). The new lines, measured on the development machine (2 cores at a load of ~13, so
# wall times are 3-5x CI's; CPU time is the better guide): a virtualenv 30-97 s wall; sanity (with that line's own
# sanity virtualenvs) 201-478 s wall, ~105 s CPU; units (3021 tests) 500-703 s wall, ~210 s CPU; the 2.16 smoke
# subset 860 s wall, 345 s CPU (2.21's takes 285-340 s on CI). In sequence that is ~11 min for core-2.16 and ~5 min
# each for core-2.18 and core-2.20: ~56 min. As arranged, core-2.18 and core-2.20 (~10 min) fit in core-2.19's
# ~17 min integration step and core-2.16 (~11 min) beside core-2.21 (~10 min): ~40-43 min expected, to be confirmed
# by CI's first run of the matrix. CI's first run took 43 min, with core-2.19's integration step at 1375 s beside the
# middle lines against 1092-1162 s alone; so core-2.18 and core-2.20 run the unit tests that can depend on the core line
# (units_controller below), not the whole unit suite.
#
#   scripts/test.sh              everything
#   STEPS="sanity units" scripts/test.sh     a subset (names below)
#   LINES="core-2.16" scripts/test.sh        only these lines (core-2.19 core-2.18 core-2.20 core-2.21 core-2.16)
set -uo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root" || exit 1
all_steps="sanity units contract integration integration-smoke lint molecule build"
steps=${STEPS:-$all_steps}
passed=0
failed=0
failures=()

log() { printf '\n=== %s\n' "$*"; }

summary=()

# what a step's output says it ran: the sanity tests, or the tests of its pytest runs (ansible-test units runs three)
counts_of() {
    local out=$1 sanity
    sanity=$(grep -c '^Running sanity test' "$out")
    if [ "$sanity" -gt 0 ]; then
        echo "$sanity sanity tests"
        return
    fi
    grep -E '^=* ?[0-9]+ (passed|failed)' "$out" | grep -oE '[0-9]+ (passed|failed|errors?|skipped)' \
        | awk '{n[$2] += $1} END {s = ""; for (k in n) s = s (s ? ", " : "") n[k] " " k; print s ? s : "-"}'
}

run_step() {
    local line=$1 name=$2 out status
    shift 2
    local start=$SECONDS
    log "[$line] $name"
    out=$(mktemp "${TMPDIR:-/tmp}/gpu_ops_cluster-step.XXXXXX")
    "$@" 2>&1 | tee "$out"
    status=${PIPESTATUS[0]}
    if [ "$status" -eq 0 ]; then
        passed=$((passed + 1))
        printf '=== [%s] %s passed in %ss\n' "$line" "$name" $((SECONDS - start))
        summary+=("$(printf '%-10s %-18s passed %5ss  %s' "$line" "$name" $((SECONDS - start)) "$(counts_of "$out")")")
    else
        failed=$((failed + 1))
        failures+=("$line:$name")
        printf '=== [%s] %s FAILED in %ss\n' "$line" "$name" $((SECONDS - start))
        summary+=("$(printf '%-10s %-18s FAILED %5ss  %s' "$line" "$name" $((SECONDS - start)) "$(counts_of "$out")")")
    fi
    rm -f "$out"
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

# The collection as users get it: the tarball `ansible-galaxy collection build` makes, unpacked into its own tree.
stage_tarball() {
    local build=$1
    local dest="$build/ansible_collections/gpu_ops/cluster"
    rm -rf "$build"
    mkdir -p "$dest" "$build/dist" "$build/ansible_collections/kubernetes"
    (cd "$build" && "$venv/bin/ansible-galaxy" collection build "$root" --output-path "$build/dist" --force) >&2 || return 1
    tar -xzf "$build"/dist/gpu_ops-cluster-*.tar.gz -C "$dest" || return 1
    ln -sfn "$root/.collections/ansible_collections/kubernetes/core" "$build/ansible_collections/kubernetes/core"
    echo "$dest"
}

# Sanity: core-2.19 checks the working tree (the tarball's content and the developer tools: scripts/, benchmarks/);
# the certification lines (2.16, 2.18, 2.20) and 2.21 check the built tarball, as Red Hat's checker does.
sanity() {
    local tree=$stage
    check_no_ignores || return 1
    if [ "$line" != core-2.19 ]; then
        tree=$(stage_tarball "$build-tarball") || return 1
        echo "sanity of the built tarball ($(basename "$(ls "$build-tarball"/dist/*.tar.gz)"))"
    fi
    (cd "$tree" && "$venv/bin/ansible-test" sanity --local --python "$pyver" --color no)
}

units() {
    (cd "$stage" && "$venv/bin/ansible-test" units --local --python "$pyver" --color no)
}

# core-2.18 and core-2.20: the unit tests whose outcome can depend on the ansible-core line (the controller's action
# and filter plugins and their engines, the modules' AnsibleModule, the private-name and action-group checks). The
# engines' own tests (module_utils: catalogs, parsers, cloud engines) and the tree's checks run on 2.16, 2.19 and 2.21.
units_controller() {
    (cd "$stage" && "$venv/bin/ansible-test" units --local --python "$pyver" --color no \
        tests/unit/plugins/action/ tests/unit/plugins/filter/ tests/unit/plugins/modules/ tests/unit/plugins/plugin_utils/ \
        tests/unit/test_private_names.py tests/unit/test_action_groups.py)
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

# SKIP_SECOND_LINE=1 (older name): the primary line only
if [ -n "${SKIP_SECOND_LINE:-}" ] && [ -z "${LINES:-}" ]; then
    LINES=core-2.19
    log "SKIP_SECOND_LINE is set: only the ansible-core 2.19 line runs"
fi

wanted_line() { case " ${LINES:-core-2.19 core-2.18 core-2.20 core-2.21 core-2.16} " in *" $1 "*) return 0 ;; esac; return 1; }

run_line() {
    line=$1 venv=$2 python=$3 requirements=$4 line_steps=$5
    wanted_line "$line" || return 0
    if [ -z "$python" ]; then
        log "Python 3.12 not found: the ansible-core ${line#core-} line is skipped"
        return
    fi
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
        case " $steps " in *" ${step%-controller} "*) ;; *) continue ;; esac
        case $step in
            sanity) run_step "$line" sanity sanity ;;
            units) run_step "$line" units units ;;
            units-controller) run_step "$line" units-controller units_controller ;;
            contract) run_step "$line" contract contract ;;
            integration) start_side_lines middle_lines; run_step "$line" integration integration; finish_side_lines ;;
            integration-smoke) run_step "$line" integration-smoke integration_smoke ;;
            lint) run_step "$line" ansible-lint lint ;;
            molecule) run_step "$line" molecule molecule_test ;;
            build) run_step "$line" build-and-doc build_and_doc ;;
        esac
    done
}

python312=$(find_python312)

# Lines that run beside another one, in the background: core-2.18 and core-2.20 (sanity, units) beside core-2.19's
# integration step, core-2.16 beside core-2.21. Integration and smoke steps mostly wait on playbooks and the doubles
# (about one of CI's two cores). A side line's output is shown, and its steps counted, once it ends.
middle_lines() {
    run_line core-2.18 "$root/.venv218" python3.11 tests/requirements-2.18.txt "sanity units-controller"
    run_line core-2.20 "$root/.venv220" "$python312" tests/requirements-2.20.txt "sanity units-controller"
}
oldest_line() {
    run_line core-2.16 "$root/.venv216" python3.11 tests/requirements-2.16.txt "sanity units contract integration-smoke"
}
side_pid=
start_side_lines() {
    side_out=$(mktemp "${TMPDIR:-/tmp}/gpu_ops_cluster-side.XXXXXX")
    side_counts=$(mktemp "${TMPDIR:-/tmp}/gpu_ops_cluster-side-counts.XXXXXX")
    # (a subshell: its counts come back through $side_counts)
    # shellcheck disable=SC2030
    (
        passed=0 failed=0 failures=() summary=()
        "$1"
        { echo "$passed $failed"; printf '%s\n' "${failures[@]}"; echo "--"; printf '%s\n' "${summary[@]}"; } > "$side_counts"
    ) > "$side_out" 2>&1 &
    side_pid=$!
    case $1 in middle_lines) side_name="core-2.18 and core-2.20" ;; oldest_line) side_name=core-2.16 ;; *) side_name=$1 ;; esac
}
# shellcheck disable=SC2031
finish_side_lines() {
    [ -n "$side_pid" ] || return 0
    wait "$side_pid"
    side_pid=
    if [ -s "$side_out" ]; then
        log "the output of $side_name (run beside the steps above)"
        cat "$side_out"
    fi
    local side_passed side_failed entry part=failures
    read -r side_passed side_failed < "$side_counts"
    passed=$((passed + ${side_passed:-0}))
    failed=$((failed + ${side_failed:-0}))
    while IFS= read -r entry; do
        case $part:$entry in
            *:--) part=summary ;;
            failures:?*) failures+=("$entry") ;;
            summary:?*) summary+=("$entry") ;;
        esac
    done < <(tail -n +2 "$side_counts")
    rm -f "$side_out" "$side_counts"
}

if wanted_line core-2.19; then
    run_line core-2.19 "$root/.venv" python3.11 tests/requirements-2.19.txt "sanity units contract integration lint molecule build"
fi
# with core-2.19 left out or its integration step not run, the middle lines run here
if ! { wanted_line core-2.19 && case " $steps " in *" integration "*) true ;; *) false ;; esac; }; then
    start_side_lines middle_lines
    finish_side_lines
fi

start_side_lines oldest_line
run_line core-2.21 "$root/.venv312" "$python312" tests/requirements-2.21.txt "sanity units contract integration-smoke"
finish_side_lines

echo
log "the matrix: each line's steps"
printf '%s\n' "${summary[@]}"
echo
if [ "$failed" -gt 0 ]; then
    echo "failed steps: ${failures[*]}"
fi
echo "steps: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
