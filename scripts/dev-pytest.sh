#!/usr/bin/env bash
# Run pytest on a subset, the way scripts/test.sh runs it, from a staged copy of the working tree:
#
#   scripts/dev-pytest.sh tests/integration/test_role_apply.py -k secret
#   LINE=core-2.21 scripts/dev-pytest.sh tests/unit
#
# Uses .venv (.venv312 for LINE=core-2.21, .venv216, .venv218, .venv220 for the others) as prepared by
# scripts/bootstrap.sh (scripts/test.sh prepares them all); set
# GPU_OPS_BUILD_DIR to keep concurrent checkouts from sharing a staging folder.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
line=${LINE:-core-2.19}
case $line in
    core-2.19) venv="$root/.venv" ;;
    core-2.21) venv="$root/.venv312" ;;
    core-2.16 | core-2.18 | core-2.20) venv="$root/.venv2${line#core-2.}" ;;
    *) echo "LINE must be one of core-2.16 core-2.18 core-2.19 core-2.20 core-2.21" >&2; exit 2 ;;
esac
build="${GPU_OPS_BUILD_DIR:-${TMPDIR:-/tmp}/gpu_ops_cluster-build}/dev-$line"
dest="$build/ansible_collections/gpu_ops/cluster"
rm -rf "$dest"
mkdir -p "$dest" "$build/ansible_collections/kubernetes"
git ls-files -co --exclude-standard -z | while IFS= read -r -d '' f; do
    [ -e "$f" ] && printf '%s\0' "$f"
done | tar --null -T - -cf - | tar -xf - -C "$dest"
ln -sfn "$root/.collections/ansible_collections/kubernetes/core" "$build/ansible_collections/kubernetes/core"
# awx.awx: only playbooks/awx_setup.yml and its tests use it
mkdir -p "$build/ansible_collections/awx" && ln -sfn "$root/.collections/ansible_collections/awx/awx" "$build/ansible_collections/awx/awx"
cd "$dest"
PATH="$venv/bin:$PATH" ANSIBLE_COLLECTIONS_PATH="$build" PYTHONPATH="$build" \
    exec "$venv/bin/python" -m pytest -p no:cacheprovider -q "$@"
