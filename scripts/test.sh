#!/usr/bin/env bash
# README command (2): installs everything, builds, and runs every test (unit, multi-process, BPF,
# Python, end-to-end), then the sanitizer builds. Run as root on Debian 12; CI runs exactly this.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)

bash scripts/setup.sh
# BPF tests need tracefs (tracepoint attach); mount it where a minimal system has not.
if [[ $(id -u) -eq 0 && -d /sys/kernel/tracing && ! -e /sys/kernel/tracing/events ]]; then
  mount -t tracefs tracefs /sys/kernel/tracing || echo "test.sh: could not mount tracefs; BPF tests will skip"
fi

echo "== build (RelWithDebInfo) and every test"
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build build -j"$jobs"
(cd build && ctest --output-on-failure -j"$jobs" --timeout 600)

echo "== ASan + UBSan: the library's, the collector's and the estimator's unit, hostile-input and stress tests"
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DKEPLERSHM_SANITIZE=address,undefined \
      -DKEPLERSHM_COMPONENTS="bpf;kepler-collect;kepler-estimate" -DKEPLERSHM_BUILD_BENCHMARKS=OFF
cmake --build build-asan -j"$jobs"
(cd build-asan && KEPLERSHM_STRESS_SECONDS=5 ctest --output-on-failure -j"$jobs" --timeout 600 \
   -R '^(libkeplershm|collect|estimate)\.')

echo "== TSan: the seqlock under threads (ring, lapping, a writer thread against two reader threads)"
cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKEPLERSHM_SANITIZE=thread \
      -DKEPLERSHM_COMPONENTS="" -DKEPLERSHM_BUILD_BENCHMARKS=OFF
cmake --build build-tsan -j"$jobs" --target libkeplershm_tests libkeplershm_stress
(cd build-tsan && KEPLERSHM_STRESS_SECONDS=5 ctest --output-on-failure -R 'libkeplershm\.(Ring|StressThreads)')

echo "== libFuzzer (clang, ASan+UBSan): headers, frames, segments, recordings, ${KEPLERSHM_FUZZ_SECONDS:-20} s each"
CC=clang CXX=clang++ cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKEPLERSHM_FUZZ=ON \
      -DKEPLERSHM_SANITIZE=address,undefined,fuzzer-no-link -DKEPLERSHM_FUZZ_SECONDS="${KEPLERSHM_FUZZ_SECONDS:-20}" \
      -DKEPLERSHM_COMPONENTS="" -DKEPLERSHM_BUILD_BENCHMARKS=OFF
cmake --build build-fuzz -j"$jobs" --target fuzz_header fuzz_frame fuzz_segment fuzz_recording
(cd build-fuzz && ctest --output-on-failure -R '^fuzz\.')

echo "test.sh: all tests passed"
