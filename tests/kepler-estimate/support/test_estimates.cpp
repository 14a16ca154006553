#include "support/test_estimates.hpp"

#include <stdexcept>

namespace estimate_test {

keplershm_estimate node_row(uint32_t zone_index, double joules, double seconds) {
    keplershm_estimate e{};
    e.zone_index = zone_index;
    e.workload_index = kNoIndex;
    e.energy_joules = joules;
    e.power_watts = joules / seconds;
    return e;
}

keplershm_estimate process_row(uint32_t pid, uint64_t start_time_ticks, double joules, double seconds) {
    keplershm_estimate e = node_row(kNoIndex, joules, seconds);
    e.pid = pid;
    e.start_time_ticks = start_time_ticks;
    return e;
}

keplershm::WriterOptions estimates_options(std::vector<keplershm_zone_info> zones, std::string model, std::string version,
                                           uint32_t row_capacity) {
    keplershm::WriterOptions o;
    o.segment_kind = KEPLERSHM_SEGMENT_ESTIMATES;
    o.node_name = std::move(model);
    o.cpu_model = std::move(version);
    o.zones = std::move(zones);
    o.process_capacity = row_capacity;  // the estimates section's capacity
    o.workload_capacity = 1;
    o.cpu_capacity = 1;
    o.string_capacity = 64;
    o.slot_count = 8;
    o.heartbeat_period = std::chrono::milliseconds(100);
    return o;
}

void TestEstimates::answer(uint64_t generation, uint64_t sequence, const std::vector<keplershm_estimate>& rows) {
    keplershm::Draft d = writer_.begin();
    d.frame().producer_generation = generation;
    d.frame().producer_sequence = sequence;
    for (const keplershm_estimate& row : rows) {
        if (!d.add_estimate(row)) throw std::runtime_error("test estimates: more rows than the segment holds");
    }
    writer_.commit(d);
}

void TestEstimates::answer(const keplershm::FrameView& frame, double joules) {
    const double seconds = static_cast<double>(frame.interval_end_ns() - frame.interval_start_ns()) / 1e9;
    answer(frame.generation(), frame.sequence(), {node_row(0, joules, seconds)});
}

}  // namespace estimate_test
