#!/usr/bin/env bash
# How the simulator's cost grows with cluster size: the openb node list as is and replicated 10x,
# with the same number of arrivals (target 130% of capacity on 1x, 13% on 10x), one seed.
# Usage: bench/sim-scale.sh [BUILD_DIR] [OPENB_DIR]
set -euo pipefail
build=${1:-build}
data=${2:-${KGPU_OPENB_DIR:-../shared/data/openb}}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
nodes="$data/openb_node_list_gpu_node.csv"
{ head -1 "$nodes"; for k in $(seq 0 9); do tail -n +2 "$nodes" | sed "s/^openb-node-/openb-node-x$k-/"; done; } > "$tmp/nodes10.csv"
for scale in 1 10; do
  n=$nodes target=1.3
  [ "$scale" = 10 ] && n="$tmp/nodes10.csv" target=0.13
  for policy in BestFit FGD; do
    "$build/kgpu" sim --nodes "$n" --pods "$data/openb_pod_list_default.csv" --policy "$policy" --seeds 1 \
      --target "$target" --output json > "$tmp/out.json"
    python3 - "$tmp/out.json" "$scale" "$policy" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
r, p = j["runs"][0], j["policies"][0]
print(f"{sys.argv[2]:>3}x nodes  {sys.argv[3]:<8} arrivals {r['arrivals']:>6}  {p['secondsMean']:.2f} s  "
      f"{r['arrivals'] / p['secondsMean']:,.0f} placements/s")
PY
  done
done
