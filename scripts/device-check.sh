#!/usr/bin/env bash
# Real-NVML check on a machine with an NVIDIA GPU: runs kgpu against the driver's
# libnvidia-ml.so.1 and compares with nvidia-smi (and NVIDIA's Python binding when present).
# Reads only; never changes GPU settings. Usage: scripts/device-check.sh KGPU_BINARY OUT_DIR
set -uo pipefail
kgpu=${1:?kgpu binary}
out=${2:?output directory}
mkdir -p "$out"
here=$(cd "$(dirname "$0")" && pwd)

nvidia-smi -L > "$out/nvidia-smi-L.txt" 2>&1
nvidia-smi -q > "$out/nvidia-smi-q.txt" 2>&1
nvidia-smi topo -m > "$out/nvidia-smi-topo.txt" 2>&1
nvidia-smi --query-gpu=index,uuid,name,pci.bus_id,pci.device_id,pci.sub_device_id,memory.total,serial,driver_version,mig.mode.current,mig.mode.pending,clocks.max.sm,clocks.max.mem,power.limit \
  --format=csv,noheader,nounits > "$out/smi-static.csv" 2>&1
nvidia-smi --query-gpu=compute_cap --format=csv,noheader,nounits > "$out/smi-cc.csv" 2>&1

# A short CUDA load so that processes, utilization and GPM ratios have something to show.
load_pid=""
if python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null; then
  python3 - <<'PY' > "$out/load.log" 2>&1 &
import time, torch
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
print("load pid started", flush=True)
end = time.time() + 12
while time.time() < end:
    for _ in range(20):
        c = a @ b
    torch.cuda.synchronize()
print("load done", flush=True)
PY
  load_pid=$!
  sleep 4
fi

"$kgpu" inventory > "$out/kgpu-inventory.txt" 2>&1; echo "rc=$?" >> "$out/kgpu-inventory.txt"
"$kgpu" inventory --json > "$out/kgpu-inventory.json" 2> "$out/kgpu-inventory.err"
"$kgpu" telemetry --json --samples 3 --interval-ms 500 > "$out/kgpu-telemetry.json" 2> "$out/kgpu-telemetry.err"
nvidia-smi --query-gpu=index,temperature.gpu,temperature.memory,power.draw,clocks.sm,clocks.mem,utilization.gpu,utilization.memory,memory.used,memory.free,memory.total \
  --format=csv,noheader,nounits > "$out/smi-dynamic.csv" 2>&1
nvidia-smi --query-compute-apps=pid,used_memory,gpu_uuid --format=csv,noheader,nounits > "$out/smi-apps.csv" 2>&1
"$kgpu" processes --json > "$out/kgpu-processes.json" 2> "$out/kgpu-processes.err"
timeout 10 "$kgpu" events --duration 2 > "$out/kgpu-events.txt" 2>&1; echo "rc=$?" >> "$out/kgpu-events.txt"
[ -n "$load_pid" ] && wait "$load_pid"

python3 "$here/device_compare.py" "$out" > "$out/device-report.md" 2>&1
cat "$out/device-report.md"
