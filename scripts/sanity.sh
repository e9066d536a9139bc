#!/usr/bin/env bash
# Run ansible-test sanity on a private staged copy, for quick checks while developing:
#   scripts/sanity.sh --test validate-modules --test pylint plugins/modules/foo.py
# (make test runs the whole sanity suite; this stages into its own folder so parallel runs do not collide)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(mktemp -d)
trap 'rm -rf "$build"' EXIT
dest="$build/ansible_collections/gpu_ops/cluster"
mkdir -p "$dest" "$build/ansible_collections/kubernetes"
cd "$root"
git ls-files -co --exclude-standard -z | while IFS= read -r -d '' f; do
    [ -e "$f" ] && printf '%s\0' "$f"
done | tar --null -T - -cf - | tar -xf - -C "$dest"
ln -sfn "$root/.collections/ansible_collections/kubernetes/core" "$build/ansible_collections/kubernetes/core"
cd "$dest"
venv=${VENV:-$root/.venv}
"$venv/bin/ansible-test" sanity --local --python "$("$venv/bin/python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')" --color no "$@"
