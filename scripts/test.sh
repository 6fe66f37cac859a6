#!/usr/bin/env bash
# `make test`: set-up, the optimized build and its suite, then the ASan+UBSan build and its suite,
# each phase timed. Ends (also after a failure) with a table of the phases' wall times and, for each
# build, how many compiles the compiler cache answered in this run. Exit status: the first failing
# phase's, or 0. Environment: MAKE, JOBS, BUILD, ASAN_BUILD (the Makefile passes its own).
set -uo pipefail
cd "$(dirname "$0")/.."
make=${MAKE:-make}
jobs=${JOBS:-2}
build=${BUILD:-build}
asan=${ASAN_BUILD:-build-asan}

rows=()
status=0
start_all=$(date +%s)

# ccache's counters of hits and misses (0 0 without ccache).
cache_counts() {
  command -v ccache >/dev/null || { echo "0 0"; return; }
  ccache --print-stats 2>/dev/null | awk -F'\t' '
    $1 == "direct_cache_hit" || $1 == "preprocessed_cache_hit" { h += $2 }
    $1 == "cache_miss" { m += $2 }
    END { print h + 0, m + 0 }'
}

# phase NAME CACHED COMMAND...: runs COMMAND unless an earlier phase failed; CACHED=1 adds the
# compiler cache's answers in this phase to its row.
phase() {
  local name=$1 cached=$2
  shift 2
  if [ "$status" -ne 0 ]; then
    rows+=("$(printf '%-20s %8s' "$name" "skipped")")
    return
  fi
  local h0 m0 h1 m1 t0 t1 rc note=""
  read -r h0 m0 < <(cache_counts)
  t0=$(date +%s)
  "$@"
  rc=$?
  t1=$(date +%s)
  if [ "$cached" = 1 ]; then
    read -r h1 m1 < <(cache_counts)
    local h=$((h1 - h0)) m=$((m1 - m0))
    if [ $((h + m)) -gt 0 ]; then
      note=$(awk -v h="$h" -v m="$m" 'BEGIN { printf "   compiles from ccache: %d of %d (%.1f %%)", h, h + m, 100 * h / (h + m) }')
    else
      note="   nothing to compile"
    fi
  fi
  [ "$rc" -eq 0 ] || { status=$rc; note="$note   FAILED (exit $rc)"; }
  rows+=("$(printf '%-20s %6d s%s' "$name" $((t1 - t0)) "$note")")
}

summary() {
  echo
  echo "make test: wall time per phase (-j$jobs)"
  local r
  for r in "${rows[@]}"; do echo "  $r"; done
  printf '  %-20s %6d s\n' "total" $(($(date +%s) - start_all))
}

phase "set-up" 0 scripts/setup.sh
phase "control plane" 0 bash -c "scripts/kube-plane.sh >/dev/null"
phase "$build/ build" 1 "$make" --no-print-directory build-only BUILD="$build" JOBS="$jobs"
phase "$build/ suite" 0 bash -c "cd '$build' && ctest --output-on-failure -j '$jobs'"
phase "$asan/ build" 1 "$make" --no-print-directory build-asan-only ASAN_BUILD="$asan" JOBS="$jobs"
phase "$asan/ suite" 0 bash -c "cd '$asan' && ctest --output-on-failure -j '$jobs'"
summary
exit "$status"
