#!/usr/bin/env bash
# The main job on a simulated node: `kgpu inventory`, then `kgpu agent` serving GPU metrics, the
# kubelet device plugins (with an NVIDIA-format time-slicing config) and the node labels, all in a
# temporary directory standing in for the kubelet's and NFD's directories; then `kgpu doctor` live
# against a small cluster served by the API-server stand-in.
# Usage: scripts/demo.sh BUILD_DIR NODE_YAML [SECONDS]   (SECONDS=0: serve until Ctrl-C)
set -euo pipefail
build=${1:?build dir}
node=${2:?node description}
seconds=${3:-30}
port=${KGPU_DEMO_PORT:-9400}
lib="$build/tools/fake-nvml/libnvidia-ml.so.1"
export KGPU_FAKE_NVML_CONFIG="$node"

"$build/kgpu" inventory --nvml-library "$lib"
echo
state=$(mktemp -d /tmp/kgpu-demo.XXXXXX)
mkdir -p "$state/device-plugins" "$state/features.d"
printf '%s\n' 'version: v1' 'sharing:' '  timeSlicing:' '    failRequestsGreaterThanOne: true' '    resources:' \
  '    - name: nvidia.com/gpu' '      rename: nvidia.com/gpu.shared' '      replicas: 4' '      devices: [0, 1]' \
  > "$state/config.yaml"
NODE_NAME=${NODE_NAME:-demo-node} "$build/kgpu" agent --nvml-library "$lib" -a "127.0.0.1:$port" -c 1000 \
  --pod-resources-socket "" --device-plugin-dir "$state/device-plugins" --cdi-root "$state/cdi" \
  --output-file "$state/features.d/gfd" --config-file "$state/config.yaml" &
agent=$!
trap 'kill $agent 2>/dev/null || true; wait $agent 2>/dev/null || true; rm -rf "$state"' EXIT
for _ in $(seq 50); do
  curl -sf "http://127.0.0.1:$port/health" >/dev/null 2>&1 && break
  sleep 0.1
done
sleep 1.5
echo "Serving http://127.0.0.1:$port/metrics (dcgm-exporter compatible). A few lines of it:"
curl -s "http://127.0.0.1:$port/metrics" | grep -E '^(DCGM_FI_DEV_GPU_UTIL|DCGM_FI_DEV_POWER_USAGE|DCGM_FI_PROF_PIPE_TENSOR_ACTIVE)\{gpu="[04]"|^kgpu_samples_total|^kgpu_device_plugin_devices' || true
echo
echo "Device plugin sockets (GPUs 0-1 time-sliced x4 as nvidia.com/gpu.shared; no kubelet here, so not registered):"
ls "$state/device-plugins"
echo "Readiness (/ready; /health is the liveness probe):"
curl -s "http://127.0.0.1:$port/ready" || true
echo "Node labels written for NFD, a few of them:"
grep -E '^nvidia.com/(gpu[.](product|count|replicas|sharing-strategy)|cuda[.]driver-version[.]full)=' "$state/features.d/gfd" || true
echo
# A small cluster to look at: the API-server stand-in serving three GPU nodes and two teams'
# workloads (examples/cluster/demo.yaml), and kgpu doctor reading it live through its API client.
# The agent's node joins the cluster with the labels it wrote for NFD and its GPUs as capacity, and
# a notebook holds half of them.
python3 - "$state/features.d/gfd" "${NODE_NAME:-demo-node}" > "$state/node.json" <<'PY'
import json, sys
labels = dict(l.strip().split("=", 1) for l in open(sys.argv[1]) if "=" in l)
gpus = labels.get("nvidia.com/gpu.count", "0")
node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": sys.argv[2], "labels": labels},
        "spec": {"taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]},
        "status": {"capacity": {"cpu": "96", "memory": "1031865Mi", "nvidia.com/gpu": gpus, "pods": "110"},
                   "allocatable": {"cpu": "95", "memory": "1001865Mi", "nvidia.com/gpu": gpus, "pods": "110"},
                   "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}]}}
pod = {"apiVersion": "v1", "kind": "Pod",
       "metadata": {"name": "notebook-alice", "namespace": "team-a", "creationTimestamp": "2026-11-28T09:00:00Z"},
       "spec": {"nodeName": sys.argv[2], "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}],
                "containers": [{"name": "jupyter", "image": "quay.io/jupyter/pytorch-notebook:cuda12-2025-11-24",
                                "resources": {"limits": {"nvidia.com/gpu": "4"}, "requests": {"nvidia.com/gpu": "4"}}}]},
       "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}}
print(json.dumps({"apiVersion": "v1", "kind": "List", "items": [node, pod]}))
PY
"$build/tools/apiserver/kgpu-apiserver" --tls --cert-dir "$state/apiserver" --token demo \
  --kubeconfig "$state/kubeconfig" --port-file "$state/apiserver.port" \
  --load examples/cluster/demo.yaml --load "$state/node.json" > "$state/apiserver.log" 2>&1 &
apiserver=$!
trap 'kill $agent $apiserver 2>/dev/null || true; wait $agent $apiserver 2>/dev/null || true; rm -rf "$state"' EXIT
for _ in $(seq 100); do [ -s "$state/apiserver.port" ] && break; sleep 0.05; done
echo "kgpu doctor, live against 4 H100 nodes (examples/cluster/demo.yaml and this agent's node; kgpu-apiserver on https://127.0.0.1:$(cat "$state/apiserver.port")):"
"$build/kgpu" doctor --kubeconfig "$state/kubeconfig" --no-checklist || true
if [ "$seconds" = 0 ]; then
  echo "Ctrl-C to stop."
  wait $agent
else
  echo "Stopping in ${seconds}s (make run RUN_FOR=0 serves until Ctrl-C)."
  sleep "$seconds"
fi
