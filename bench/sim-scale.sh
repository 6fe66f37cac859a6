#!/usr/bin/env bash
# How the simulator's cost grows with the work: the openb node list as is (1x) and replicated 10x
# with arrivals scaled with it (target 130% of capacity in both, so 10x the arrivals), one seed,
# the default trace; then a synthetic cluster of 100,000 GPUs (openb's node mix, replicated until
# the GPUs reach 100,000) simulated end to end. Prints seconds, placements per second, the 10x/1x
# time ratio, peak memory (max RSS) and each run's placement hash (identical hashes = identical
# decisions, the check that an optimisation moved no placement).
# Usage: bench/sim-scale.sh [BUILD_DIR] [OPENB_DIR] [POLICY...]   (default BestFit FGD FGDPack)
# SIM_SCALE_SKIP_100K=1 skips the 100,000-GPU runs.
set -euo pipefail
build=${1:-build}
data=${2:-${KGPU_OPENB_DIR:-../shared/data/openb}}
shift $(( $# > 2 ? 2 : $# ))
policies=("$@")
[ ${#policies[@]} -eq 0 ] && policies=(BestFit FGD FGDPack)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
nodes="$data/openb_node_list_gpu_node.csv"
pods="$data/openb_pod_list_default.csv"
{ head -1 "$nodes"; for k in $(seq 0 9); do tail -n +2 "$nodes" | sed "s/^openb-node-/openb-node-x$k-/"; done; } > "$tmp/nodes10.csv"
# Whole copies of the node list, then the next copy's nodes until 100,000 GPUs.
{ head -1 "$nodes"; for k in $(seq 0 19); do tail -n +2 "$nodes" | sed "s/^openb-node-/openb-node-y$k-/"; done; } |
  awk -F, 'NR == 1 { print; next } g < 100000 { print; g += $4 }' > "$tmp/nodes100k.csv"

run() {  # label nodes policy
  /usr/bin/time -f "%M" -o "$tmp/rss" "$build/kgpu" sim --nodes "$2" --pods "$pods" --policy "$3" --seeds 1 \
    --target 1.3 --output json > "$tmp/out.json"
  python3 - "$tmp/out.json" "$1" "$3" "$(cat "$tmp/rss")" "$2" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
r = j["runs"][0]
nodes = sum(1 for _ in open(sys.argv[5])) - 1
print(f"{sys.argv[2]:<6} {nodes:>6} nodes  {sys.argv[3]:<8} arrivals {r['arrivals']:>7}  {r['seconds']:8.2f} s  "
      f"{r['arrivals'] / r['seconds']:>9,.0f} placements/s  {int(sys.argv[4]) / 1024:7.0f} MiB  "
      f"alloc {r['allocatedPct']:.2f}%  hash {r['placementHash']}")
with open(sys.argv[1] + ".secs", "w") as f:
    f.write(str(r["seconds"]))
PY
}

for policy in "${policies[@]}"; do
  run 1x "$nodes" "$policy"
  one=$(cat "$tmp/out.json.secs")
  run 10x "$tmp/nodes10.csv" "$policy"
  ten=$(cat "$tmp/out.json.secs")
  python3 -c "import sys; print(f'       {sys.argv[1]}: 10x / 1x time = {float(sys.argv[3]) / float(sys.argv[2]):.1f}')" \
    "$policy" "$one" "$ten"
  if [ -z "${SIM_SCALE_SKIP_100K:-}" ]; then run 100k "$tmp/nodes100k.csv" "$policy"; fi
done
