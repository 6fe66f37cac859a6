#!/usr/bin/env bash
# Peak memory and time of `kgpu doctor --snapshot` on a generated snapshot of many tiny objects,
# and of `kgpu lint` / `kgpu doctor` on a YAML alias bomb. Prints one line per measurement:
#   <what> <file MiB> <peak RSS MiB> <ratio peak/file> <seconds> <exit status>
#
# Usage: bench/snapshot_memory.sh [BUILD_DIR] [OBJECTS...]
#   BUILD_DIR  holds the kgpu binary (default build-parsers)
#   OBJECTS    object counts for the generated snapshots (default 500000 2400000)
# Each snapshot is one `kind: List` (as `kubectl get -o json` writes it) of OBJECTS tiny objects
# ({"apiVersion":"v1","kind":"K","metadata":{"name":"o-N","namespace":"x"}}, one per line, ~80
# bytes each) plus one GPU node and one pod, so that doctor runs its rules; once with K=ConfigMap
# (a kind doctor does not read: dropped while loading) and once with K=Pod (every object decoded
# into a typed view: the worst case per byte); then snapshots of REALISTIC_PODS (environment,
# default 100000; "" to skip) pods of ~4.3 KB as `kubectl get pods -o json` writes them
# (gen_snapshot.py RealisticPod: labels, annotations, two containers with resources, env, mounts,
# a probe, volumes, tolerations, conditions, container statuses). Needs python3 and
# GNU time (/usr/bin/time). Files go to a temporary directory, removed at exit.
set -euo pipefail
build=${1:-build-parsers}
shift || true
counts=("$@")
[ ${#counts[@]} -gt 0 ] || counts=(500000 2400000)
kgpu="$build/kgpu"
[ -x "$kgpu" ] || { echo "no $kgpu: build the kgpu target first" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

measure() {  # what file command...
  local what=$1 file=$2
  shift 2
  local status=0
  /usr/bin/time -v -o "$tmp/time" "$@" >/dev/null 2>"$tmp/err" || status=$?
  local rss_kb secs size
  rss_kb=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$tmp/time")
  secs=$(awk -F': ' '/Elapsed \(wall clock\)/ {print $2}' "$tmp/time" | awk -F: '{ if (NF == 3) print $1*3600 + $2*60 + $3; else print $1*60 + $2 }')
  size=$(stat -c %s "$file")
  awk -v w="$what" -v s="$size" -v r="$rss_kb" -v t="$secs" -v st="$status" \
    'BEGIN { printf "%-28s %9.1f MiB %9.1f MiB %7.2fx %7.2f s  exit %d\n", w, s/1048576, r/1024, (r*1024)/s, t, st }'
}

python3 "$here/gen_snapshot.py" "$tmp/empty.json" 0
measure "doctor baseline (2 objects)" "$tmp/empty.json" "$kgpu" doctor --no-checklist --snapshot "$tmp/empty.json"
for kind in ConfigMap Pod; do
  for n in "${counts[@]}"; do
    python3 "$here/gen_snapshot.py" "$tmp/snap-$n.json" "$n" "$kind"
    measure "doctor $n ${kind}s" "$tmp/snap-$n.json" "$kgpu" doctor --no-checklist --snapshot "$tmp/snap-$n.json"
    rm -f "$tmp/snap-$n.json"
  done
done

for n in ${REALISTIC_PODS-100000}; do
  python3 "$here/gen_snapshot.py" "$tmp/real-$n.json" "$n" RealisticPod
  measure "doctor $n realistic Pods" "$tmp/real-$n.json" "$kgpu" doctor --no-checklist --snapshot "$tmp/real-$n.json"
  rm -f "$tmp/real-$n.json"
done

python3 - "$tmp/bomb.yaml" <<'PY'
import sys
lines = ["apiVersion: v1", "kind: ConfigMap", "metadata:", "  name: lol", "data:", "  l0: &l0 [x, x, x, x, x, x, x, x, x]"]
for i in range(1, 12):
    lines.append(f"  l{i}: &l{i} [" + ", ".join([f"*l{i-1}"] * 9) + "]")
open(sys.argv[1], "w").write("\n".join(lines) + "\n")
PY
measure "lint alias bomb (12 levels)" "$tmp/bomb.yaml" "$kgpu" lint "$tmp/bomb.yaml"
measure "doctor alias bomb" "$tmp/bomb.yaml" "$kgpu" doctor --snapshot "$tmp/bomb.yaml"
