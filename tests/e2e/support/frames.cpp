#include "support/frames.hpp"

#include <thread>

namespace e2e {

uint64_t FrameSummary::published_cpu_ns() const {
    uint64_t sum = 0;
    for (const ProcessSample& p : processes) sum += p.cpu_time_ns;
    return sum;
}

FrameSummary summarize(const keplershm::FrameView& view) {
    FrameSummary f;
    f.sequence = view.sequence();
    f.generation = view.generation();
    f.missed = view.missed();
    f.flags = view.flags();
    f.processes_seen = view.header().processes_seen;
    f.interval_start_ns = view.interval_start_ns();
    f.interval_end_ns = view.interval_end_ns();
    for (const keplershm_process& p : view.processes()) {
        f.processes.push_back({p.pid, p.start_time_ticks, p.cpu_time_ns, p.flags, std::string(keplershm::get_text(p.comm))});
    }
    if (const keplershm_unaccounted* u = view.unaccounted()) f.unaccounted = *u;
    for (const keplershm_cpu_sample& c : view.cpus()) {
        f.node_busy_ns += c.user_ns + c.nice_ns + c.system_ns + c.irq_ns + c.softirq_ns + c.steal_ns;
    }
    for (const keplershm_zone_sample& z : view.zones()) f.zones.push_back(z);
    f.segment_size = view.segment().segment_size;
    f.max_segment_bytes = view.segment().max_segment_bytes;
    f.process_capacity = view.segment().process_capacity;
    return f;
}

std::optional<keplershm::Reader> open_when_present(const std::string& name, std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
        try {
            return keplershm::Reader::open(name);
        } catch (const keplershm::Error&) {
            if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
    }
}

}  // namespace e2e
