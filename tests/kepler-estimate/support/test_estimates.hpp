// An external model's side of the estimates channel (PROTOCOL.md §8), for tests: answers written
// through keplershm::Writer exactly as a Python or C model would, hostile rows included.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "keplershm/keplershm.hpp"

namespace estimate_test {

inline constexpr uint32_t kNoIndex = 0xffffffffu;

/// A node row (zone_index into the estimates segment's zones, or kNoIndex for the whole node).
keplershm_estimate node_row(uint32_t zone_index, double joules, double seconds = 1.0);
/// A per-process row (not a node model's answer; counted only).
keplershm_estimate process_row(uint32_t pid, uint64_t start_time_ticks, double joules, double seconds = 1.0);

/// Options of an estimates segment naming model `model` version `version` with these zones.
keplershm::WriterOptions estimates_options(std::vector<keplershm_zone_info> zones, std::string model = "test-model",
                                           std::string version = "v1", uint32_t row_capacity = 64);

/// Writes answers. Not thread-safe.
class TestEstimates {
public:
    TestEstimates(const std::string& name, const keplershm::WriterOptions& options) : writer_(name, options) {}
    /// Publishes one estimates frame answering (generation, sequence) with `rows`.
    void answer(uint64_t generation, uint64_t sequence, const std::vector<keplershm_estimate>& rows);
    /// Answers `frame` with `joules` in zone 0 of the estimates segment.
    void answer(const keplershm::FrameView& frame, double joules);
    keplershm::Writer& writer() { return writer_; }

private:
    keplershm::Writer writer_;
};

}  // namespace estimate_test
