#!/usr/bin/env bash
# Builds the fuzz targets with coverage and ASan+UBSan, then fuzzes each for a fixed time, one at a
# time (tools/fuzz/README.md).
#
# Usage: tools/fuzz/run.sh [TARGET...]          (default: every target)
# Environment:
#   FUZZ_TIME=60        seconds per target
#   FUZZ_SEED=1         random seed (a run is reproducible for a given seed and corpus)
#   FUZZ_BUILD=build-fuzz   build directory (RelWithDebInfo, KGPU_FUZZ=ON, KGPU_SANITIZE=ON)
#   FUZZ_JOBS=2         build parallelism
#   FUZZ_TIMEOUT=3      seconds one input may run before it is a finding
#   FUZZ_RSS_MB=2048    resident memory (MB, ASan's shadow included) before it is a finding
#   FUZZ_NO_BUILD=1     use the existing build
#
# Seeds: test/data/fuzz/<target>/ (the regression corpus) plus the repository's own examples
# (test/data, examples/, deploy/, and the openb trace in ../shared/data/openb or $KGPU_OPENB_DIR).
# The working corpus (inputs that reached new coverage) is kept in $FUZZ_BUILD/fuzz/corpus/<target>
# and reused by the next run. A finding (crash-*, timeout-*, oom-*: the input, named by its hash) is
# written to test/data/fuzz/<target>/, where the fuzz.<target> CTest test replays it from then on.
#
# Output: one line per target (execs, coverage pairs, corpus size, result), then a summary. Exit
# status 1 when any target produced a finding or a regression input still fails.
set -uo pipefail

root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"
build="${FUZZ_BUILD:-build-fuzz}"
time_s="${FUZZ_TIME:-60}"
seed="${FUZZ_SEED:-1}"
jobs="${FUZZ_JOBS:-2}"
timeout_s="${FUZZ_TIMEOUT:-3}"
rss_mb="${FUZZ_RSS_MB:-2048}"
openb="${KGPU_OPENB_DIR:-$root/../shared/data/openb}"

all_targets=(k8s_load quantity sharing_config counters openb_trace fake_nvml_node lint doctor device_plugin_wire
  pod_resources_wire report_prices prom_answer exposition)
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=("${all_targets[@]}")
for t in "${targets[@]}"; do
  [[ " ${all_targets[*]} " == *" $t "* ]] || { echo "run.sh: unknown target '$t' (known: ${all_targets[*]})" >&2; exit 2; }
done

if [ -z "${FUZZ_NO_BUILD:-}" ]; then
  if [ ! -f "$build/build.ninja" ]; then
    cmake -S . -B "$build" -G Ninja -DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache \
      -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKGPU_SANITIZE=ON -DKGPU_FUZZ=ON -DKGPU_BENCH=OFF >/dev/null || exit 1
  fi
  cmake --build "$build" -j "$jobs" --target fuzz_targets || exit 1
fi

# seeds TARGET DIR: copies the repository's example inputs for TARGET into DIR (flat names).
seeds() {
  local t="$1" dir="$2" f
  local -a files=()
  case "$t" in
    k8s_load) files=(test/data/k8s/*.* test/data/k8s/tree/*/* test/data/lint/*.yaml test/data/guide/*.yaml deploy/*.yaml
                     deploy/*.json test/data/doctor/multi-file/*.json) ;;
    lint) files=(test/data/lint/*.yaml test/data/guide/*.yaml deploy/*.yaml test/data/k8s/*.yaml) ;;
    doctor) files=(test/data/doctor/*/*.json test/data/k8s/*.json test/data/k8s/*.yaml) ;;
    sharing_config) files=(deploy/sharing-config.yaml test/data/guide/time-slicing-config.yaml) ;;
    fake_nvml_node) files=(examples/nodes/*.yaml) ;;
    report_prices) files=(examples/prices.yaml) ;;
    exposition) files=(test/data/fuzz/exposition/seed-*) ;;
    openb_trace)
      if [ -d "$openb" ]; then
        for f in "$openb"/*.csv; do head -n 40 "$f" >"$dir/$(basename "$f")"; done
      fi ;;
  esac
  for f in "${files[@]}"; do
    [ -f "$f" ] && cp "$f" "$dir/$(echo "$f" | tr '/' '_')"
  done
  return 0
}

declare -A dict=([k8s_load]=yaml.dict [lint]=yaml.dict [doctor]=json.dict [sharing_config]=yaml.dict
  [fake_nvml_node]=yaml.dict [report_prices]=yaml.dict [prom_answer]=json.dict [counters]=csv.dict [openb_trace]=csv.dict [quantity]=quantity.dict)
declare -A max_len=([doctor]=262144 [k8s_load]=65536 [lint]=65536 [quantity]=256 [device_plugin_wire]=4096
  [pod_resources_wire]=4096 [exposition]=65536)

work="$build/fuzz"
mkdir -p "$work"
failed=0
summary=()
total_execs=0
for t in "${targets[@]}"; do
  bin="$build/tools/fuzz/fuzz_$t"
  regress="test/data/fuzz/$t"
  mkdir -p "$regress" "$work/corpus/$t"
  rm -rf "$work/seeds/$t" && mkdir -p "$work/seeds/$t"
  seeds "$t" "$work/seeds/$t"
  # Regression inputs that still fail are reported and left out of the seeds.
  seed_args=("$regress")
  if ! "$bin" -timeout="$timeout_s" "$regress" >"$work/$t.replay.log" 2>&1; then
    bad=$(grep -o 'on input file .*' "$work/$t.replay.log" | head -1 | sed 's/on input file //')
    echo "run.sh: $t: regression input still fails: ${bad:-see $work/$t.replay.log}" >&2
    failed=1
    seed_args=()
    for f in "$regress"/*; do [[ "$(basename "$f")" == seed-* ]] && seed_args+=("$f"); done
  fi
  before=$(ls "$regress" | sort)
  dict_args=()
  [ -n "${dict[$t]:-}" ] && dict_args=(-dict="tools/fuzz/dict/${dict[$t]}")
  "$bin" -fuzz -max_total_time="$time_s" -seed="$seed" -timeout="$timeout_s" -rss_limit_mb="$rss_mb" \
    -max_len="${max_len[$t]:-16384}" -corpus="$work/corpus/$t" -artifact_dir="$regress" "${dict_args[@]}" \
    "${seed_args[@]}" "$work/seeds/$t" >"$work/$t.log" 2>&1
  rc=$?
  new=$(comm -13 <(echo "$before") <(ls "$regress" | sort) | sed "s|^|$regress/|" | tr '\n' ' ')
  done_line=$(grep '^kgpu-fuzz: done' "$work/$t.log" | tail -1)
  last=$(grep '^#' "$work/$t.log" | tail -1)
  execs=$(echo "$done_line" | sed -n 's/.*execs: \([0-9]*\).*/\1/p')
  [ -z "$execs" ] && execs=$(echo "$last" | sed -n 's/^#\([0-9]*\).*/\1/p')
  total_execs=$((total_execs + ${execs:-0}))
  if [ $rc -ne 0 ] || [ -n "$new" ]; then
    failed=1
    line="$t: FINDING after ${execs:-?} execs (exit $rc): ${new:-no input saved} (log: $work/$t.log)"
  else
    line="$t: ok: ${done_line#kgpu-fuzz: done }"
  fi
  echo "$line"
  summary+=("$line")
done
echo "---- ${#targets[@]} targets, ${time_s}s each, seed $seed, $total_execs execs"
printf '%s\n' "${summary[@]}"
exit $failed
