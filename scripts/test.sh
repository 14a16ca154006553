#!/usr/bin/env bash
# README command (2): installs everything, builds, and runs every test (unit, multi-process, BPF,
# Python, end-to-end), then the sanitizer builds. Run as root on Debian 12; CI runs exactly this.
# Every stage runs even when an earlier one failed, and the script ends with each stage's result, so
# one failure still shows what the others would need. Exit status 1 if any stage failed.
set -uo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)
stages=()   # "name|result|seconds"

# run_stage NAME COMMAND...: runs COMMAND (a function below) and records how it ended.
run_stage() {
  local name=$1
  shift
  echo "== $name"
  local start=$SECONDS result=passed
  # Not in an `if`: there bash would ignore set -e inside the subshell and run on past a failed build.
  (set -e; "$@")
  (($? == 0)) || result=FAILED
  stages+=("$name|$result|$((SECONDS - start))")
  echo "== $name: $result"
}

main_suite() {
  # BPF tests need tracefs (tracepoint attach); mount it where a minimal system has not.
  if [[ $(id -u) -eq 0 && -d /sys/kernel/tracing && ! -e /sys/kernel/tracing/events ]]; then
    mount -t tracefs tracefs /sys/kernel/tracing || echo "test.sh: could not mount tracefs; BPF tests will skip"
  fi
  cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo
  cmake --build build -j"$jobs"
  (cd build && ctest --output-on-failure -j"$jobs" --timeout 600 -LE '^containers$')
}

containers() {
  # Its own stage: builds two images and runs a pod (minutes, CPU-heavy), against main_suite's build.
  cmake --build build -j"$jobs" --target kepler-collect kepler-estimate kepler-feed keplershm-probe keplershm-segment-size
  (cd build && ctest --output-on-failure -L '^containers$')
}

# The library's and the end-to-end tests of the main build again, inside time namespaces whose
# CLOCK_MONOTONIC starts near zero (a machine booted seconds ago) and ten days ahead: nothing may depend
# on the clock's value (issue 11). unshare's offsets count from the initial namespace's CLOCK_MONOTONIC
# (not /proc/uptime: that is CLOCK_BOOTTIME, which also counts suspended time, and an offset that would
# take CLOCK_MONOTONIC below zero is refused).
time_namespaces() {
  if [[ $(id -u) -ne 0 ]] || ! unshare --time --fork true 2>/dev/null; then
    echo "test.sh: skipped: time namespaces need root and unshare --time"
    return 0
  fi
  local own_offset initial_monotonic offset failed=0
  own_offset=$(awk '$1 == "monotonic" {print $2}' /proc/self/timens_offsets 2>/dev/null || true)
  initial_monotonic=$(( $(python3 -c 'import time; print(int(time.monotonic()))') - ${own_offset:-0} ))
  for offset in "-$(( initial_monotonic - 5 ))" "+864000"; do  # both run, whatever the first gave
    echo "-- time namespace, CLOCK_MONOTONIC offset ${offset} s"
    (cd build && unshare --time --fork --monotonic="$offset" \
       ctest --output-on-failure -j"$jobs" --timeout 600 -R '^(libkeplershm|fault)\.') || failed=1
  done
  return "$failed"
}

asan_ubsan() {
  cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DKEPLERSHM_SANITIZE=address,undefined \
        -DKEPLERSHM_COMPONENTS="bpf;kepler-collect;kepler-estimate" -DKEPLERSHM_BUILD_BENCHMARKS=OFF
  cmake --build build-asan -j"$jobs"
  (cd build-asan && KEPLERSHM_STRESS_SECONDS=5 ctest --output-on-failure -j"$jobs" --timeout 600 \
     -R '^(libkeplershm|collect|estimate)\.')
}

tsan() {
  cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKEPLERSHM_SANITIZE=thread \
        -DKEPLERSHM_COMPONENTS="kepler-estimate;kepler-feed" -DKEPLERSHM_BUILD_BENCHMARKS=OFF
  cmake --build build-tsan -j"$jobs" --target libkeplershm_tests libkeplershm_stress estimate_scrape_snapshot_test \
        estimate_metrics_server_test feed_board_test feed_refusal_test
  # The feed's gRPC tests are not here: Debian's gRPC and absl are not instrumented, so TSan reports races
  # inside them (tcp_send, slice buffers) in every gRPC process; the estimates board is tested without gRPC.
  (cd build-tsan && KEPLERSHM_STRESS_SECONDS=5 ctest --output-on-failure \
     -R '^(libkeplershm\.(Ring|StressThreads)|estimate\.(scrape_snapshot|metrics_server)\.|feed\.(board|refusal)\.)')
}

fuzz() {
  CC=clang CXX=clang++ cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKEPLERSHM_FUZZ=ON \
        -DKEPLERSHM_SANITIZE=address,undefined,fuzzer-no-link -DKEPLERSHM_FUZZ_SECONDS="${KEPLERSHM_FUZZ_SECONDS:-20}" \
        -DKEPLERSHM_COMPONENTS="" -DKEPLERSHM_BUILD_BENCHMARKS=OFF
  cmake --build build-fuzz -j"$jobs" --target fuzz_header fuzz_frame fuzz_segment fuzz_recording fuzz_cgroup_identity fuzz_conmon_cmdline \
        fuzz_pickle_scaler fuzz_kepler_zip fuzz_kepler_weights fuzz_model_metadata fuzz_node_type_index fuzz_estimates_answer \
        fuzz_kube_pod_list fuzz_feed_selection \
        fuzz_vm_cmdline fuzz_drm_fdinfo fuzz_dcgm_metrics
  # Each target is one single-threaded process for a fixed time: they run side by side, one per core.
  (cd build-fuzz && ctest --output-on-failure -j"$jobs" -R '^fuzz\.')
}

run_stage "packages (scripts/setup.sh)" bash scripts/setup.sh
run_stage "build (RelWithDebInfo) and every test" main_suite
run_stage "the library's and the end-to-end tests with CLOCK_MONOTONIC near zero and ten days ahead" time_namespaces
run_stage "containers: both images built with podman, the sidecar pod run (deploy.containers)" containers
run_stage "ASan + UBSan: the library's, the collector's and the estimator's tests" asan_ubsan
run_stage "TSan: the seqlock under threads (ring, lapping, a writer against two readers), scrapes against frames, concurrent /metrics scrapes, the feed's estimates board" tsan
run_stage "libFuzzer (clang, ASan+UBSan): headers, frames, segments, recordings, cgroup paths, conmon and hypervisor command lines, DRM fdinfo, dcgm-exporter text, pod lists, model files (model.json, Kepler weights and zips, scaler pickles, node type indexes), estimates answers, feed requests, ${KEPLERSHM_FUZZ_SECONDS:-20} s each" fuzz

echo
echo "== test.sh summary"
failed=0
for stage in "${stages[@]}"; do
  IFS='|' read -r name result seconds <<<"$stage"
  printf '  %-7s %5ss  %s\n' "$result" "$seconds" "$name"
  [[ $result == passed ]] || failed=1
done
if ((failed)); then
  echo "test.sh: some stages failed (see above)"
  exit 1
fi
echo "test.sh: all tests passed"
