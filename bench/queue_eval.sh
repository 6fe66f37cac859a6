#!/usr/bin/env bash
# Admission compared in time on the openb trace (`kgpu sim --queue-eval`, docs/queues.md
# "Evaluation"): pod by pod (FGDPack), gangs + quota queues (FGDPack; reclaim Any and Never) and
# FIFO MostAllocated, at loads where pods wait. The default trace alone never queues on its cluster
# (its pods hold about 1 % of the GPUs at the peak), so arrivals come 1000x as fast and every pod
# arrives 4 or 5 times. Writes one table and one JSON per run under OUT_DIR.
# Usage: bench/queue_eval.sh [BUILD_DIR] [OPENB_DIR] [OUT_DIR]
set -euo pipefail
build=${1:-build}
data=${2:-${KGPU_OPENB_DIR:-../shared/data/openb}}
out=${3:-bench/results}
mkdir -p "$out"
nodes="$data/openb_node_list_gpu_node.csv"
pods="$data/openb_pod_list_default.csv"
for run in "qos 4" "qos 5" "hash:4 4"; do
  set -- $run
  name="queue_eval_${1/:/}_x$2"
  args=(sim --nodes "$nodes" --pods "$pods" --queue-eval --arrival-speedup 1000 --pod-copies "$2" --tenants "$1")
  start=$(date +%s.%N)
  "$build/kgpu" "${args[@]}" > "$out/$name.txt"
  end=$(date +%s.%N)
  "$build/kgpu" "${args[@]}" --output json > "$out/$name.json"
  echo "== tenants $1, pod copies $2, arrivals 1000x: $(echo "$end - $start" | bc) s"
  cat "$out/$name.txt"
done
