// The two ways to run the pipeline: live (a segment, /metrics served, models watched) and replay
// (a recording, as fast as possible, CSV and/or Prometheus text at the end).
#pragma once

#include <atomic>

#include "app/options.hpp"

namespace kepler::estimate {

/// Runs until the input ends, `stop` becomes true, or --duration passes. Returns the exit code.
/// Thread-safe only in that `stop` may be set from a signal handler or another thread.
int run(const Options& options, const std::atomic<bool>& stop);

/// The heap as the estimator runs with it: one malloc arena, freed memory kept between scrapes. main()
/// calls it before any thread starts; the benchmarks call it so that they measure the same heap.
void configure_heap();

}  // namespace kepler::estimate
