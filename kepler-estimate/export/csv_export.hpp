// Estimates as CSV: one row per interval x workload x zone (plus node rows), for offline analysis.
// Only collector clocks and frame numbers appear, so replaying a recording twice gives the same file.
#pragma once

#include <cstdio>
#include <string>

#include "pipeline/estimator.hpp"

namespace kepler::estimate {

/// Writes to a file it owns. Not thread-safe: call from the pipeline thread after each frame.
class CsvExport {
public:
    explicit CsvExport(const std::string& path);  // throws std::runtime_error
    ~CsvExport();
    CsvExport(const CsvExport&) = delete;
    CsvExport& operator=(const CsvExport&) = delete;

    /// Rows for the estimator's latest interval (entities present in it).
    void write_interval(const Estimator& estimator);
    void flush();

private:
    std::FILE* file_ = nullptr;
};

/// Microjoules as joules with exactly six decimals (no floating point on the way).
[[nodiscard]] std::string format_joules(uint64_t uj);

}  // namespace kepler::estimate
