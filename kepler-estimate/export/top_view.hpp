// `--top`: a terminal view of the processes and containers drawing the most power, each interval.
#pragma once

#include <cstdio>
#include <string>

#include "pipeline/estimator.hpp"

namespace kepler::estimate {

/// Renders the latest interval as text (the caller prints it). Call with the estimator's lock held
/// or from the pipeline thread.
[[nodiscard]] std::string render_top(const Estimator& estimator, size_t rows);

/// Clears the terminal and prints render_top(). Not thread-safe (writes to `out`).
void print_top(const Estimator& estimator, std::FILE* out, size_t rows = 10);

}  // namespace kepler::estimate
