#!/usr/bin/env bash
# Build the collection tarball, install it into an empty tree, and render every plugin's and
# role's documentation from the installed copy (what a user of the tarball would see).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# away from the repository's ansible.cfg, which points at the working tree
cd "$work"
export ANSIBLE_CONFIG="$work/ansible.cfg"
printf '[defaults]\ncollections_path = %s\n' "$work/collections" > "$ANSIBLE_CONFIG"
export ANSIBLE_COLLECTIONS_PATH="$work/collections"

# no made-up address in the metadata: a URL field is either left out of galaxy.yml or a real one
if grep -v '^[[:space:]]*#' "$root/galaxy.yml" | grep -nEi '\b(example\.(invalid|com|org|net)|localhost|placeholder|changeme|todo)\b'; then
    echo "galaxy.yml carries a placeholder (above): fill the field with a real value or leave it out" >&2
    exit 1
fi
ansible-galaxy collection build "$root" --output-path "$work/dist" --force
tarball=$(ls "$work"/dist/gpu_ops-cluster-*.tar.gz)
echo "built $(basename "$tarball") ($(du -k "$tarball" | cut -f1) KiB)"
# developer-only trees stay out of what users install (galaxy.yml build_ignore)
if tar -tzf "$tarball" | grep -E '^(\./)?((molecule|tests/output|benchmarks|scripts|rendered|rendered-operators|rendered-rdma|rendered-rdma-a4x|\.ci)/|(Makefile|ansible\.cfg|pytest\.ini)$)'; then
    echo "the tarball carries developer-only files (above); add them to build_ignore in galaxy.yml" >&2
    exit 1
fi
# and it carries what a user needs (grep reads a saved listing: grep -q closing a pipe early fails under pipefail)
tar -tzf "$tarball" > "$work/listing"
for wanted in MANIFEST.json FILES.json README.md meta/runtime.yml plugins/modules/gke_cluster.py \
        plugins/module_utils/_core/contract.py roles/apply/meta/argument_specs.yml playbooks/site.yml docs/layout.md; do
    if ! grep -qx "\(\./\)\?$wanted" "$work/listing"; then
        echo "the tarball lacks $wanted" >&2
        exit 1
    fi
done
# the shipped MANIFEST.json: every URL it names is a real one (left-out fields are null)
tar -xzf "$tarball" -C "$work" MANIFEST.json
python3 - "$work/MANIFEST.json" <<'PY'
import json, re, sys
info = json.load(open(sys.argv[1], encoding="utf-8"))["collection_info"]
bad = {k: info.get(k) for k in ("repository", "documentation", "homepage", "issues")
       if info.get(k) and re.search(r"example\.(invalid|com|org|net)|localhost|placeholder", info[k], re.I)}
if bad:
    sys.exit("MANIFEST.json carries placeholder URLs: %s" % bad)
print("MANIFEST.json URLs: %s" % {k: info.get(k) for k in ("repository", "documentation", "homepage", "issues")})
PY
ansible-galaxy collection install "$tarball" -p "$work/collections" --no-deps
ln -s "$root/.collections/ansible_collections/kubernetes" "$work/collections/ansible_collections/kubernetes"

count=0
for kind in module filter role; do
    names=$(ansible-doc -t "$kind" -l gpu_ops.cluster --json | python3 -c 'import json, sys; print(" ".join(sorted(json.load(sys.stdin))))')
    for name in $names; do
        ansible-doc -t "$kind" "$name" >/dev/null
        count=$((count + 1))
    done
done
echo "ansible-doc rendered $count modules, filters and roles from the installed tarball"
