#!/usr/bin/env bash
# Builds the real Kubernetes control plane the end-to-end tests run against (test/kube/go.mod):
# kube-apiserver, kube-controller-manager, kube-scheduler, etcd and kwok, with CGO off, into a
# cache outside the checkout keyed by the module's pins, so a machine builds them once:
#   ${KGPU_KUBE_CACHE:-~/.cache/kgpu/kube}/<k8s version>-<hash of go.mod's pins and go.sum>/
# Prints that folder on stdout. Does nothing but print it when the five binaries are there.
# Exit status 1, with a message naming what is missing, when Go is absent or too old, or the
# module proxy cannot serve a module of the graph.
# With --check it builds nothing: prints the folder when complete, else exits 3.
# Usage: scripts/kube-plane.sh [--check]    (environment: KGPU_KUBE_CACHE, GOFLAGS as usual)
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
mod=$repo/test/kube
bins=(kube-apiserver kube-controller-manager kube-scheduler etcd kwok)
# kwok's own Stages (nodes Ready with leases, pods Running, Job pods Succeeded, deletions done):
# the files of the kwok module itself, copied next to the binaries for `kwok --config`.
stages=(node/fast/node-initialize.yaml node/heartbeat-with-lease/node-heartbeat-with-lease.yaml
  pod/fast/pod-ready.yaml pod/fast/pod-complete.yaml pod/fast/pod-delete.yaml)

die() { echo "kube-plane: $*" >&2; exit 1; }

version=$(awk '$1 == "k8s.io/kubernetes" { print $2; exit }' "$mod/go.mod")
[ -n "$version" ] || die "$mod/go.mod: no requirement on k8s.io/kubernetes"
# The pins decide the key; comments in go.mod do not.
key=$( (grep -v '^[[:space:]]*//' "$mod/go.mod"; cat "$mod/go.sum") | sha256sum | cut -c1-12)
root=${KGPU_KUBE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kgpu/kube}
dest=$root/$version-$key

complete() {
  local b
  for b in "${bins[@]}"; do [ -x "$1/$b" ] || return 1; done
  [ -d "$1/kwok-stages" ] || return 1
  [ -f "$1/.complete" ]
}
if complete "$dest"; then
  echo "$dest"
  exit 0
fi
if [ "${1:-}" = "--check" ]; then
  echo "kube-plane: the test control plane is not built in $dest (scripts/setup.sh or scripts/kube-plane.sh builds it)" >&2
  exit 3
fi

command -v go >/dev/null || die "Go is needed to build the test control plane (test/kube/go.mod needs go 1.26); none on PATH"
gov=$(go env GOVERSION)
case "$gov" in
  go1.2[6-9]* | go1.[3-9][0-9]*) ;;
  *) die "Go $gov on PATH is older than the 1.26 that k8s.io/kubernetes $version needs" ;;
esac

cd "$mod"
echo "kube-plane: building kube-apiserver, kube-controller-manager, kube-scheduler ($version), etcd and kwok into $dest (once per machine)" >&2
if ! out=$(GOFLAGS=-mod=readonly go mod download 2>&1); then
  echo "$out" | tail -20 >&2
  die "the Go module proxy ($(go env GOPROXY)) did not serve every module of test/kube/go.mod (above)"
fi

minor=${version#v}
major=${minor%%.*}
minor=${minor#*.}
minor=${minor%%.*}
vpkg=k8s.io/component-base/version
ldflags="-s -w -X $vpkg.gitVersion=$version -X $vpkg.gitMajor=$major -X $vpkg.gitMinor=$minor -X $vpkg.gitTreeState=clean -X $vpkg.buildDate=1970-01-01T00:00:00Z"

mkdir -p "$root"
tmp=$(mktemp -d "$root/.build.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
t0=$(date +%s)
CGO_ENABLED=0 GOFLAGS=-mod=readonly go build -trimpath -tags selinux,notest -ldflags "$ldflags" -o "$tmp/" \
  k8s.io/kubernetes/cmd/kube-apiserver \
  k8s.io/kubernetes/cmd/kube-controller-manager \
  k8s.io/kubernetes/cmd/kube-scheduler \
  sigs.k8s.io/kwok/cmd/kwok
CGO_ENABLED=0 GOFLAGS=-mod=readonly go build -trimpath -ldflags "-s -w" -o "$tmp/etcd" go.etcd.io/etcd/server/v3
for b in "${bins[@]}"; do [ -x "$tmp/$b" ] || die "go build left no $b"; done
kwok_dir=$(go list -m -f '{{.Dir}}' sigs.k8s.io/kwok)
mkdir -p "$tmp/kwok-stages"
for s in "${stages[@]}"; do
  [ -f "$kwok_dir/kustomize/stage/$s" ] || die "sigs.k8s.io/kwok has no kustomize/stage/$s"
  install -m 0644 "$kwok_dir/kustomize/stage/$s" "$tmp/kwok-stages/$(basename "$s")"
done
echo "$version $(date -u +%FT%TZ) built in $(($(date +%s) - t0)) s" > "$tmp/.complete"
rm -rf "$dest"
mv "$tmp" "$dest"
trap - EXIT
# Other pins built here before (other branches, older releases): the three newest stay.
ls -1dt "$root"/v*-*/ 2>/dev/null | tail -n +4 | while read -r old; do rm -rf "$old"; done
echo "kube-plane: built in $(($(date +%s) - t0)) s" >&2
echo "$dest"
