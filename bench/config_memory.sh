#!/usr/bin/env bash
# Peak RSS and time of `kgpu agent` given hostile sharing configs at start (the same parser and
# planner run on every hot reload). Usage: bench/config_memory.sh [BUILD_DIR]
# Prints a Markdown table; the numbers go to bench/RESULTS.md.
set -euo pipefail
build=${1:-build}
kgpu=$build/kgpu
fake=$build/tools/fake-nvml/libnvidia-ml.so.1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/dp"

# A full ConfigMap (1 MiB) of unknown keys, within the node limit: accepted, with warnings.
python3 - "$tmp" <<'EOF'
import sys
d = sys.argv[1]
head = "version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n      replicas: 4\n"
lines = [head, "flags:\n"]
size = len(head) + 7
i = 0
while True:
    line = f"  unknownFlag{i}: {'v' * 40}\n"
    if size + len(line) > (1 << 20) or i >= 9000:
        break
    lines.append(line)
    size += len(line)
    i += 1
pad = (1 << 20) - size - 1
lines.append("#" + "x" * (pad - 2) + "\n")
open(f"{d}/full-configmap.yaml", "w").write("".join(lines))
# 1 MiB of flow-list items: refused by the node limit.
items = ", ".join(["x"] * 340000)
open(f"{d}/many-nodes.yaml", "w").write(f"flags:\n  unknown: [{items}]\n"[: 1 << 20])
bomb = "a0: &a0 [x, x, x, x, x, x, x, x, x]\n"
for k in range(1, 12):
    bomb += f"a{k}: &a{k} [" + ", ".join([f"*a{k-1}"] * 9) + "]\n"
open(f"{d}/alias-bomb.yaml", "w").write(bomb)
open(f"{d}/replicas.yaml", "w").write(
    "sharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n      replicas: 2000000000\n")
with open(f"{d}/50mb.yaml", "w") as f:
    f.write(head)
    for j in range(450000):
        f.write(f"unknownKey{j}: " + "x" * 100 + "\n")
EOF

echo "| config | size | outcome | peak RSS | wall |"
echo "|---|---|---|---|---|"
for c in full-configmap many-nodes alias-bomb replicas 50mb; do
  f="$tmp/$c.yaml"
  size=$(stat -c %s "$f")
  set +e
  /usr/bin/time -o "$tmp/time" -f "%M %e" timeout -s INT 3 "$kgpu" agent --nvml-library "$fake" -a 127.0.0.1:0 \
      --pod-resources-socket "" --device-plugin-dir "$tmp/dp" --cdi-root "" --labels=false \
      --config-file "$f" >"$tmp/log" 2>&1
  set -e
  read -r rss wall < <(tail -1 "$tmp/time")
  if grep -q "listening on" "$tmp/log"; then outcome="accepted ($(grep -c 'config:' "$tmp/log") warning lines)";
  else outcome="refused: $(sed -n 's/.*level=error msg="\(\([^"\\]\|\\.\)*\)".*/\1/p' "$tmp/log" | head -1 | cut -c1-98)"; fi
  echo "| $c | $((size / 1024)) KiB | $outcome | $((rss / 1024)) MiB | ${wall} s |"
done
