#!/usr/bin/env bash
# How the simulator's cost grows with the work: the openb node list as is (1x) and replicated 10x
# with arrivals scaled with it (target 130% of capacity in both, so 10x the arrivals), one seed,
# the default trace; then a synthetic cluster of 100,000 GPUs (openb's node mix, replicated until
# the GPUs reach 100,000) simulated end to end. Prints seconds, placements per second, the 10x/1x
# time ratio, peak memory (max RSS) and each run's placement hash (identical hashes = identical
# decisions, the check that an optimisation moved no placement).
# Usage: bench/sim-scale.sh [BUILD_DIR] [OPENB_DIR] [POLICY...]   (default BestFit FGD FGDPack)
# SIM_SCALE_SKIP_100K=1 skips the 100,000-GPU runs. SIM_SCALE_REPEAT=n (default 5): the 1x and 10x
# runs alternate n times (so both see the same load on a shared machine), and each reports the
# median and the fastest of its runs, in CPU seconds of the simulating thread (cpuSeconds: what
# the work costs, without the waits for a core that a busy machine adds) and wall seconds. The
# 10x/1x ratios come from the medians (a 1x run takes tens of milliseconds, so one lucky run moves
# its minimum most) and from the minima, CPU and wall: the same measurement for both. Every
# repeat must give the same placement hash.
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

repeat=${SIM_SCALE_REPEAT:-5}
once() {  # label nodes policy repeat-index
  /usr/bin/time -f "%M" -o "$tmp/rss.$1.$4" "$build/kgpu" sim --nodes "$2" --pods "$pods" --policy "$3" --seeds 1 \
    --target 1.3 --output json > "$tmp/out.$1.$4.json"
}
report() {  # label nodes policy
  python3 - "$tmp" "$repeat" "$1" "$3" "$2" <<'PY'
import json, sys
tmp, repeat, label, policy, nodes_csv = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
runs = [json.load(open(f"{tmp}/out.{label}.{r}.json"))["runs"][0] for r in range(1, repeat + 1)]
rss = max(int(open(f"{tmp}/rss.{label}.{r}").read()) for r in range(1, repeat + 1))
hashes = {r["placementHash"] for r in runs}
if len(hashes) != 1:
    sys.exit(f"{label} {policy}: placement hashes differ between repeats: {sorted(hashes)}")
med = lambda xs: sorted(xs)[len(xs) // 2]
cpus_, walls_ = [x["cpuSeconds"] for x in runs], [x["seconds"] for x in runs]
cpu, wall, cpu_min, wall_min = med(cpus_), med(walls_), min(cpus_), min(walls_)
r = runs[0]
nodes = sum(1 for _ in open(nodes_csv)) - 1
print(f"{label:<5} {nodes:>6} nodes  {policy:<8} arrivals {r['arrivals']:>7}  median cpu {cpu:6.3f} s  wall {wall:6.3f} s  "
      f"{r['arrivals'] / cpu:>9,.0f} placements/cpu-s  {rss / 1024:5.0f} MiB  "
      f"alloc {r['allocatedPct']:.2f}%  hash {r['placementHash']}")
cpus = " ".join("%.3f" % x["cpuSeconds"] for x in runs)
walls = " ".join("%.3f" % x["seconds"] for x in runs)
print(f"        runs, cpu s: {cpus}   wall s: {walls}")
with open(f"{tmp}/{label}.secs", "w") as f:
    f.write(f"{cpu} {wall} {cpu_min} {wall_min}")
PY
}

for policy in "${policies[@]}"; do
  for r in $(seq 1 "$repeat"); do
    once 1x "$nodes" "$policy" "$r"
    once 10x "$tmp/nodes10.csv" "$policy" "$r"
  done
  report 1x "$nodes" "$policy"
  report 10x "$tmp/nodes10.csv" "$policy"
  python3 - "$policy" "$(cat "$tmp/1x.secs")" "$(cat "$tmp/10x.secs")" <<'PY'
import sys
one, ten = [float(x) for x in sys.argv[2].split()], [float(x) for x in sys.argv[3].split()]
print(f"        {sys.argv[1]}: 10x / 1x = {ten[0] / one[0]:.2f} (median CPU), {ten[1] / one[1]:.2f} (median wall), "
      f"{ten[2] / one[2]:.2f} (fastest CPU), {ten[3] / one[3]:.2f} (fastest wall)")
PY
  if [ -z "${SIM_SCALE_SKIP_100K:-}" ]; then
    once 100k "$tmp/nodes100k.csv" "$policy" 1
    repeat=1 report 100k "$tmp/nodes100k.csv" "$policy"
  fi
done
