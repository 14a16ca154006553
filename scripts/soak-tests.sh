#!/usr/bin/env bash
# Hunts tests that fail by chance: runs the built suite repeatedly on a machine made noisy on purpose
# (one busy loop per CPU, tests two at a time, as CI's own parallel tests do to each other), then the
# timing-sensitive groups many more times, and prints how often each test failed.
#
#   scripts/soak-tests.sh [RUNS] [REPEATS]     defaults: 5 whole-suite runs, 20 runs of the groups
#
# Needs a build in ./build (scripts/test.sh makes one; BUILD_DIR=dir names another). Run it as root
# (so the eBPF, podman and namespace tests run instead of skipping) after changing anything that
# touches timing: the collector loop, the eBPF source, the estimator's threads, the end-to-end and fault tests. Exit status 1 if any
# test failed; the logs of failed runs stay in build/soak/.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-5}
repeats=${2:-20}
timing_sensitive='^(collect\.(BpfSource|Chain|ProcfsSource|EndToEnd)|fault\.|estimate\.(accuracy|prometheus_e2e|replay)|python\.(live|closed_loop|estimates_import))'
build=${BUILD_DIR:-build}
out=$build/soak
[[ -d $build ]] || { echo "soak-tests.sh: no $build/ here; run scripts/test.sh (or cmake) first" >&2; exit 2; }
rm -rf "$out" && mkdir -p "$out"

loops=()
stop_load() { ((${#loops[@]})) && kill "${loops[@]}" 2>/dev/null; wait 2>/dev/null || true; }
trap stop_load EXIT
for _ in $(seq "$(nproc)"); do
  sh -c 'while :; do :; done' &
  loops+=($!)
done

# One ctest run; its failed tests go to $out/failures (one name a line), its log kept if any failed.
run_once() {
  local label=$1
  shift
  if (cd "$build" && ctest -j2 --timeout 600 --output-on-failure "$@") >"$out/$label.log" 2>&1; then
    rm -f "$out/$label.log"
    echo "$label: passed"
  else
    sed -n '/The following tests FAILED:/,$p' "$out/$label.log" |
      sed -nE 's/^[[:space:]]*[0-9]+ - ([^ ]+).*/\1/p' | tee -a "$out/failures" | sed "s/^/$label: FAILED /"
  fi
}

touch "$out/failures"
for i in $(seq "$runs"); do run_once "suite-$i"; done
for i in $(seq "$repeats"); do run_once "timing-$i" -R "$timing_sensitive"; done

echo "== soak: $runs whole-suite runs and $repeats runs of the timing-sensitive tests, $(nproc) busy loops"
if [[ -s "$out/failures" ]]; then
  sort "$out/failures" | uniq -c | sort -rn | sed 's/^/  failures: /'
  echo "soak-tests.sh: some tests failed; logs in $out/"
  exit 1
fi
echo "soak-tests.sh: no test failed"
