#!/usr/bin/env bash
# Reproduces the FGD paper's experiment (Weng et al., USENIX ATC'23) on the Alibaba openb trace
# (cluster-trace-gpu-v2023) with `kgpu sim`: every policy, 10 seeds, arrivals to 130% of GPU
# capacity, on the default trace and four variants. Writes tables, CSVs and SVG plots to
# bench/results/. Usage: bench/fgd-reproduction.sh [BUILD_DIR] [OPENB_DIR] [TRACE...]
set -euo pipefail
build=${1:-build}
data=${2:-${KGPU_OPENB_DIR:-../shared/data/openb}}
shift $(( $# > 2 ? 2 : $# )) || true
traces=("$@")
[ ${#traces[@]} -gt 0 ] || traces=(default gpushare100 multigpu50 gpuspec33 cpu200)
if [ ! -f "$data/openb_node_list_gpu_node.csv" ]; then
  echo "openb trace not found in $data: get cluster-trace-gpu-v2023/csv from github.com/alibaba/clusterdata" >&2
  exit 1
fi
out=bench/results
mkdir -p "$out"
for t in "${traces[@]}"; do
  "$build/kgpu" sim --nodes "$data/openb_node_list_gpu_node.csv" --pods "$data/openb_pod_list_$t.csv" \
    --seeds 10 --csv "$out/$t.csv" --svg "$out/$t.svg" > "$out/$t.txt"
  echo "== $t"; cat "$out/$t.txt"
done
