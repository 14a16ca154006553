// Frames of a live segment as plain copies, read through the library like any reader, so the fault tests
// can check what the collector published frame by frame.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "keplershm/keplershm.hpp"

namespace e2e {

struct ProcessSample {
    uint32_t pid = 0;
    uint64_t start_time_ticks = 0;
    uint64_t cpu_time_ns = 0;
    uint32_t flags = 0;
    std::string comm;
};

struct FrameSummary {
    uint64_t sequence = 0;
    uint64_t generation = 0;
    uint64_t missed = 0;
    uint32_t flags = 0;
    uint32_t processes_seen = 0;
    uint64_t interval_start_ns = 0;
    uint64_t interval_end_ns = 0;
    std::vector<ProcessSample> processes;
    keplershm_unaccounted unaccounted{};
    uint64_t node_busy_ns = 0;  // user+nice+system+irq+softirq+steal over the CPUs section
    std::vector<keplershm_zone_sample> zones;
    // From the segment header describing this frame.
    uint64_t segment_size = 0;
    uint64_t max_segment_bytes = 0;
    uint32_t process_capacity = 0;

    [[nodiscard]] uint64_t published_cpu_ns() const;
};

FrameSummary summarize(const keplershm::FrameView& view);

/// Opens `name` as soon as it exists (up to `timeout`); nullopt otherwise.
std::optional<keplershm::Reader> open_when_present(const std::string& name, std::chrono::milliseconds timeout);

/// Appends every frame the reader delivers until `until()` is true or `timeout` passed; stops early when
/// the writer retired and no successor came within `idle` (the default: one reader wait).
template <class Until>
void read_frames(keplershm::Reader& reader, std::vector<FrameSummary>& out, Until until, std::chrono::milliseconds timeout);

}  // namespace e2e

namespace e2e {
template <class Until>
void read_frames(keplershm::Reader& reader, std::vector<FrameSummary>& out, Until until, std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    keplershm::FrameView view;
    while (!until() && std::chrono::steady_clock::now() < deadline) {
        if (reader.next(std::chrono::milliseconds(100), view) == keplershm::Status::ok) out.push_back(summarize(view));
    }
}
}  // namespace e2e
