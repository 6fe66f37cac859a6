#!/usr/bin/env bash
# The container image (`make image`, scripts/build-image.sh) built and run without a container
# engine: two builds give the same digest; skopeo reads the archive (tag, config: non-root user,
# entrypoint, OCI labels); umoci unpacks it; the root file system has no shell, no package manager,
# no documentation but copyright files, and exactly the libraries kgpu loads; `kgpu --version`,
# `kubectl-gpu --version` and `kgpu inventory` run in it through chroot as the image's user; the
# agent runs in it as the DaemonSet runs it (root, read-only root file system, the kubelet and NFD
# directories mounted) on the fake NVML placed where the NVIDIA container toolkit puts the driver's
# library, serves a DCGM series for every GPU, creates its device-plugin socket and labels, and stops
# on SIGTERM; without one of its libraries the image does not run. Sizes are bounded.
# Usage: image_test.sh SOURCE_DIR BUILD_DIR FAKE_NVML_LIBRARY
# Needs root (chroot, mount namespaces); exits 77 (skipped) without it.
set -uo pipefail
src=$1
build=$2
fake_nvml=$3
max_compressed=$((32 * 1024 * 1024))
max_unpacked=$((80 * 1024 * 1024))

if [ "$(id -u)" -ne 0 ]; then
  echo "skip: needs root to chroot into the unpacked image and mount its read-only root"
  exit 77
fi
source "$(dirname "$0")/checks.sh"
check() {  # check DESCRIPTION COMMAND...
  local what=$1
  shift
  if "$@"; then ok "$what"; else fail "$what"; fi
}
field() {  # field JSON_FILE PYTHON_EXPRESSION_ON_j
  /usr/bin/python3 -c "import json,sys; j=json.load(open(sys.argv[1])); print($2)" "$1"
}

version=$(sed -n 's/^project(kgpu VERSION \([0-9][0-9.]*\).*/\1/p' "$src/CMakeLists.txt")
start=$SECONDS

# Two builds into two directories: the same archive, byte for byte.
for n in 1 2; do
  if ! "$src/scripts/build-image.sh" "$build" "$work/out$n" > "$work/build$n.log" 2>&1; then
    cat "$work/build$n.log"
    echo "FAIL: build $n of the image" >&2
    exit 1
  fi
done
cat "$work/build1.log"
echo "two builds: $((SECONDS - start)) s"
archive=$work/out1/kgpu-$version.oci.tar
digest=$(sed -n 's/^digest: //p' "$work/build1.log")
check "the same digest from two builds ($digest)" [ "$digest" = "$(sed -n 's/^digest: //p' "$work/build2.log")" ]
check "the same archive from two builds" cmp -s "$archive" "$work/out2/kgpu-$version.oci.tar"

# A second OCI implementation (containers/image, as skopeo copy uses to push) reads the archive.
if ! skopeo inspect --raw "oci-archive:$archive:$version" > "$work/manifest.json" ||
  ! skopeo inspect --config "oci-archive:$archive:$version" > "$work/config.json"; then
  echo "FAIL: skopeo cannot read $archive:$version" >&2
  exit 1
fi
check "the tag $version names the manifest $digest" [ "sha256:$(sha256sum < "$work/manifest.json" | cut -d' ' -f1)" = "$digest" ]
user=$(field "$work/config.json" 'j["config"]["User"]')
check "the default user is non-root and numeric (runAsNonRoot can check it): $user" grep -qE '^[1-9][0-9]*(:[0-9]+)?$' <<<"$user"
check "the entrypoint is /usr/bin/kgpu" [ "$(field "$work/config.json" 'j["config"]["Entrypoint"]')" = "['/usr/bin/kgpu']" ]
label() { field "$work/config.json" "j['config']['Labels'].get('org.opencontainers.image.$1', '')"; }
check "label version = $version" [ "$(label version)" = "$version" ]
revision=$(git -C "$src" rev-parse HEAD)
r=$(label revision)
check "label revision = $revision (-dirty when built from a modified tree)" [ "$r" = "$revision" -o "$r" = "$revision-dirty" ]
created=$(date -u -d "@${SOURCE_DATE_EPOCH:-$(git -C "$src" log -1 --format=%ct)}" +%Y-%m-%dT%H:%M:%SZ)
c1=$(label created)
c2=$(field "$work/config.json" 'j["created"]')
check "label and config created = $created" [ "$c1" = "$created" -a "$c2" = "$created" ]
for l in source title description; do check "label $l" [ -n "$(label $l)" ]; done
image_refs=$(grep -rhoE 'ghcr.io/kgpu/kgpu:[^" ]+' "$src/deploy" | sort -u)
check "deploy/ names ghcr.io/kgpu/kgpu:$version (found: $(echo $image_refs))" [ "$image_refs" = "ghcr.io/kgpu/kgpu:$version" ]

compressed=$(field "$work/manifest.json" 'j["config"]["size"] + sum(l["size"] for l in j["layers"])')
mkdir "$work/layout"
tar -C "$work/layout" -xf "$archive"
umoci unpack --image "$work/layout:$version" "$work/bundle" > /dev/null || {
  echo "FAIL: umoci cannot unpack the image" >&2
  exit 1
}
root=$work/bundle/rootfs
unpacked=$(find "$root" -type f -printf '%s\n' | awk '{n += $1} END {print n}')
echo "size: $compressed bytes compressed, $unpacked bytes unpacked"
check "compressed size $compressed <= $max_compressed" [ "$compressed" -le "$max_compressed" ]
check "unpacked size $unpacked <= $max_unpacked" [ "$unpacked" -le "$max_unpacked" ]

# Contents.
check "no /bin/sh" [ ! -e "$root/bin/sh" -a ! -e "$root/usr/bin/sh" ]
check "no shell, package manager or busybox anywhere" \
  [ -z "$(find "$root" ! -type d \( -name sh -o -name bash -o -name dash -o -name busybox -o -name dpkg -o -name 'apt*' \) -print)" ]
check "no man pages" [ ! -e "$root/usr/share/man" ]
check "no documentation but copyright files" [ -z "$(find "$root/usr/share/doc" -type f ! -name copyright -print)" ]
check "CA bundle" grep -q 'BEGIN CERTIFICATE' "$root/etc/ssl/certs/ca-certificates.crt"
check "passwd names kgpu 65532:65532" grep -q '^kgpu:x:65532:65532:' "$root/etc/passwd"
check "group names kgpu 65532" grep -q '^kgpu:x:65532:$' "$root/etc/group"
ldso=/usr/lib64/ld-linux-x86-64.so.2
loaded=$(chroot "$root" "$ldso" --list /usr/bin/kgpu) || fail "the loader cannot list kgpu's libraries in the image"
unresolved=$(grep 'not found' <<<"$loaded")
check "every library resolves in the image${unresolved:+: $unresolved}" [ -n "$loaded" -a -z "$unresolved" ]
n_loaded=$(grep -c '=> /\|^\s*/' <<<"$loaded")
n_files=$(find "$root/usr/lib" -type f -name '*.so*' | wc -l)
check "exactly the libraries kgpu loads: $n_files files, $n_loaded loaded" [ "$n_files" -eq "$n_loaded" ]

# The commands, as the image's default user.
as_user=(chroot --userspec="$user" "$root")
check "kgpu --version" [ "$("${as_user[@]}" /usr/bin/kgpu --version 2>&1)" = "kgpu $version" ]
check "kubectl-gpu --version" [ "$("${as_user[@]}" /usr/bin/kubectl-gpu --version 2>&1)" = "kgpu $version" ]
check "kubectl-gpu answers as the kubectl plugin" grep -q 'Usage: kubectl gpu' <("${as_user[@]}" /usr/bin/kubectl-gpu --help 2>&1)

# The driver's library where the NVIDIA container toolkit mounts it (found through the loader's
# default path, as on a GPU node), and a node description.
install -m 0644 "$fake_nvml" "$root/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1"
install -D -m 0644 "$src/examples/nodes/dgx-h100.yaml" "$root/etc/kgpu-test/node.yaml"
export KGPU_FAKE_NVML_CONFIG=/etc/kgpu-test/node.yaml
gpus=$("${as_user[@]}" /usr/bin/kgpu inventory --json | /usr/bin/python3 -c 'import json,sys; print(len(json.load(sys.stdin)["gpus"]))')
check "kgpu inventory in the image sees the fake node's GPUs ($gpus)" [ "${gpus:-0}" -gt 0 ]

# The agent as the DaemonSet runs it: root, the root file system read-only, the host directories
# it writes into mounted (here: empty directories of the test).
for d in device-plugins features.d cdi; do mkdir -p "$work/host/$d"; done
mkdir -p "$root/var/lib/kubelet/device-plugins" "$root/etc/kubernetes/node-feature-discovery/features.d" "$root/var/run/cdi"
NODE_NAME=image-test unshare --mount sh -c '
  root=$1 host=$2
  mount --bind "$root" "$root" && mount -o remount,bind,ro "$root" &&
  mount --bind "$host/device-plugins" "$root/var/lib/kubelet/device-plugins" &&
  mount --bind "$host/features.d" "$root/etc/kubernetes/node-feature-discovery/features.d" &&
  mount --bind "$host/cdi" "$root/var/run/cdi" &&
  exec chroot "$root" /usr/bin/kgpu agent --address=127.0.0.1:0 --collect-interval=500 --pod-resources-socket ""' \
  sh "$root" "$work/host" > "$work/agent.log" 2>&1 &
agent_pid=$!
port=
for _ in $(seq 100); do
  port=$(sed -n 's/.*listening on 127.0.0.1:\([0-9][0-9]*\).*/\1/p' "$work/agent.log" | head -1)
  [ -n "$port" ] && break
  kill -0 "$agent_pid" 2>/dev/null || break
  sleep 0.1
done
if [ -z "$port" ]; then
  cat "$work/agent.log"
  fail "the agent in the image did not start"
else
  missing=
  for _ in $(seq 50); do
    metrics=$(curl -sf "http://127.0.0.1:$port/metrics")
    missing=
    for ((i = 0; i < gpus; i++)); do
      grep -qE "^DCGM_FI_DEV_[A-Z_]+\{([^}]*,)?gpu=\"$i\"" <<<"$metrics" || missing+=" $i"
    done
    [ -z "$missing" ] && break
    sleep 0.2
  done
  check "DCGM_FI_DEV_* series for each of the $gpus GPUs (missing:${missing:- none})" [ -z "$missing" ]
  check "the device-plugin socket in the mounted kubelet directory" [ -S "$work/host/device-plugins/nvidia-gpu.sock" ]
  eventually 50 [ -s "$work/host/features.d/gfd" ]
  check "GFD labels in the mounted features.d" grep -q '^nvidia.com/gpu.count=' "$work/host/features.d/gfd"
  kill -TERM "$agent_pid"
  eventually 50 eval '! kill -0 "$agent_pid" 2>/dev/null'
  if kill -0 "$agent_pid" 2>/dev/null; then
    fail "the agent did not stop within 5 s of SIGTERM"
  else
    wait "$agent_pid"
    status=$?
    agent_pid=
    check "the agent exits 0 on SIGTERM" [ "$status" -eq 0 ]
  fi
  if grep -qi 'read-only file system' "$work/agent.log"; then
    grep -i 'read-only file system' "$work/agent.log"
    fail "the agent wrote outside its mounted directories"
  fi
fi

# The test itself: the chroot sees only the image's libraries, so a missing one is a failure.
lib=$(readlink -f "$root/usr/lib/x86_64-linux-gnu/libyaml-cpp.so.0.7")
rm -f "$lib"
out=$(chroot "$root" /usr/bin/kgpu --version 2>&1)
check "without libyaml-cpp the image does not run" grep -q 'libyaml-cpp.so.0.7: cannot open shared object file' <<<"$out"

echo "image test: $((SECONDS - start)) s"
if [ "$failures" -ne 0 ]; then
  echo "$failures check(s) failed" >&2
  exit 1
fi
