#!/usr/bin/env bash
# The main job on a simulated node: `kgpu inventory`, then `kgpu agent` serving GPU metrics, the
# kubelet device plugins (with an NVIDIA-format time-slicing config) and the node labels, all in a
# temporary directory standing in for the kubelet's and NFD's directories; then `kgpu doctor` live
# against a small cluster served by the API-server stand-in, and `kgpu scheduler` placing a pod on
# the agent's GPUs the way kube-scheduler asks an extender to.
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
mkdir -p "$state/device-plugins" "$state/features.d" "$state/dev"
# Stand-ins for the GPUs' device nodes: the CDI spec is written only for devices whose node exists.
for i in $(seq 0 15); do : > "$state/dev/nvidia$i"; done
: > "$state/dev/nvidiactl"
printf '%s\n' 'version: v1' 'sharing:' '  timeSlicing:' '    failRequestsGreaterThanOne: true' '    resources:' \
  '    - name: nvidia.com/gpu' '      rename: nvidia.com/gpu.shared' '      replicas: 4' '      devices: [0, 1]' \
  > "$state/config.yaml"
NODE_NAME=${NODE_NAME:-demo-node} "$build/kgpu" agent --nvml-library "$lib" -a "127.0.0.1:$port" -c 1000 \
  --pod-resources-socket "" --device-plugin-dir "$state/device-plugins" --cdi-root "$state/cdi" \
  --dev-root "$state" --output-file "$state/features.d/gfd" --config-file "$state/config.yaml" &
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
echo
# kgpu scheduler: the agent, restarted with API access, reports its GPUs on its Node; the scheduler
# reads them (and counts the notebook's 4 GPUs, placed by someone else) and places a training pod,
# called exactly as kube-scheduler calls an extender (filter, then bind).
kill $agent 2>/dev/null || true
wait $agent 2>/dev/null || true
NODE_NAME=${NODE_NAME:-demo-node} "$build/kgpu" agent --nvml-library "$lib" -a "127.0.0.1:$port" -c 1000 \
  --pod-resources-socket "" --device-plugin-dir "$state/device-plugins" --cdi-root "$state/cdi" \
  --dev-root "$state" --output-file "$state/features.d/gfd" --config-file "$state/config.yaml" \
  --kubeconfig "$state/kubeconfig" --node-report-interval 500 > "$state/agent.log" 2>&1 &
agent=$!
"$build/kgpu" scheduler --kubeconfig "$state/kubeconfig" --address 127.0.0.1:0 --leader-elect=false \
  > "$state/scheduler.log" 2>&1 &
scheduler=$!
trap 'kill $agent $apiserver $scheduler 2>/dev/null || true; wait $agent $apiserver $scheduler 2>/dev/null || true; rm -rf "$state"' EXIT
api="https://127.0.0.1:$(cat "$state/apiserver.port")"
sport=""
for _ in $(seq 200); do
  sport=$(sed -n 's/.*listening on 127.0.0.1:\([0-9]*\).*/\1/p' "$state/scheduler.log" | head -1)
  [ -n "$sport" ] && curl -sf "http://127.0.0.1:$sport/metrics" 2>/dev/null | grep -q '^kgpu_scheduler_nodes{report="present"} 1' && break
  sleep 0.05
done
python3 - "$api" "http://127.0.0.1:$sport" "${NODE_NAME:-demo-node}" <<'PY' || echo "(the scheduler step did not complete; see $state/scheduler.log)"
import json, ssl, sys, urllib.request
api, ext, node = sys.argv[1:4]
tls = ssl.create_default_context()
tls.check_hostname, tls.verify_mode = False, ssl.CERT_NONE
def call(url, body=None, method=None):
    req = urllib.request.Request(url, data=None if body is None else json.dumps(body).encode(), method=method,
                                 headers={"Authorization": "Bearer demo", "Content-Type": "application/json"})
    with urllib.request.urlopen(req, context=tls if url.startswith("https") else None, timeout=10) as r:
        return json.load(r)
pod = call(api + "/api/v1/namespaces/team-a/pods", {"apiVersion": "v1", "kind": "Pod",
    "metadata": {"name": "train-bert", "namespace": "team-a"},
    "spec": {"schedulerName": "kgpu-scheduler", "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}],
             "containers": [{"name": "trainer", "image": "nvcr.io/nvidia/pytorch:25.11-py3",
                             "resources": {"limits": {"nvidia.com/gpu": "2"}}}]}})
nodes = [n["metadata"]["name"] for n in call(api + "/api/v1/nodes")["items"]]
for k in ("apiVersion", "kind"):
    pod.pop(k, None)  # kube-scheduler's pods come from typed informers, without them
out = call(ext + "/filter", {"Pod": pod, "Nodes": None, "NodeNames": nodes})
print(f"filter over {len(nodes)} nodes -> {out['NodeNames']}")
for n, why in sorted(out["FailedAndUnresolvableNodes"].items()):
    print(f"  {n}: {why}")
err = call(ext + "/bind", {"PodName": "train-bert", "PodNamespace": "team-a",
                           "PodUID": pod["metadata"]["uid"], "Node": out["NodeNames"][0]})["Error"]
got = call(api + "/api/v1/namespaces/team-a/pods/train-bert")
ann = got["metadata"].get("annotations", {})
print(f"bind -> {err or 'ok'}: spec.nodeName={got['spec'].get('nodeName')}, "
      f"kgpu.io/gpu-assignment={ann.get('kgpu.io/gpu-assignment')}")
PY
curl -s "http://127.0.0.1:$sport/metrics" | grep -E '^kgpu_scheduler_(gpu_allocated|gpu_capacity|gpu_fragmentation_ratio)\{resource="nvidia.com/gpu"\}' || true
if [ "$seconds" = 0 ]; then
  echo "Ctrl-C to stop."
  wait $agent
else
  echo "Stopping in ${seconds}s (make run RUN_FOR=0 serves until Ctrl-C)."
  sleep "$seconds"
fi
