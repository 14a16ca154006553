#include "model/features.hpp"

#include <stdexcept>

namespace kepler::estimate {

namespace {

struct FeatureInfo {
    std::string_view name;
    std::string_view unit;
    uint64_t metric;
};

constexpr std::array<FeatureInfo, kFeatureCount> kFeatures = {{
    {"cpu_time_ms_per_s", "ms/s", KEPLERSHM_METRIC_CPU_TIME},
    {"node_cpu_busy_ms_per_s", "ms/s", KEPLERSHM_METRIC_NODE_CPU},
    {"cpu_count", "count", 0},
    {"cycles_per_s", "1/s", KEPLERSHM_METRIC_CYCLES},
    {"instructions_per_s", "1/s", KEPLERSHM_METRIC_INSTRUCTIONS},
    {"cache_misses_per_s", "1/s", KEPLERSHM_METRIC_CACHE_MISSES},
    {"page_cache_hits_per_s", "pages/s", KEPLERSHM_METRIC_PAGE_CACHE},
    {"softirq_net_tx_per_s", "1/s", KEPLERSHM_METRIC_SOFTIRQ},
    {"softirq_net_rx_per_s", "1/s", KEPLERSHM_METRIC_SOFTIRQ},
    {"softirq_block_per_s", "1/s", KEPLERSHM_METRIC_SOFTIRQ},
}};

constexpr size_t kNetTx = 2, kNetRx = 3, kBlock = 4;  // softirq vectors Kepler exports

}  // namespace

std::string_view feature_name(Feature f) noexcept { return kFeatures[static_cast<size_t>(f)].name; }
std::string_view feature_unit(Feature f) noexcept { return kFeatures[static_cast<size_t>(f)].unit; }
uint64_t feature_metric(Feature f) noexcept { return kFeatures[static_cast<size_t>(f)].metric; }

std::optional<Feature> feature_from_name(std::string_view name) noexcept {
    for (size_t i = 0; i < kFeatures.size(); ++i) {
        if (kFeatures[i].name == name) return static_cast<Feature>(i);
    }
    return std::nullopt;
}

std::string metric_bit_name(uint64_t bit) {
    switch (bit) {
        case KEPLERSHM_METRIC_CPU_TIME: return "CPU_TIME";
        case KEPLERSHM_METRIC_CYCLES: return "CYCLES";
        case KEPLERSHM_METRIC_INSTRUCTIONS: return "INSTRUCTIONS";
        case KEPLERSHM_METRIC_CACHE_MISSES: return "CACHE_MISSES";
        case KEPLERSHM_METRIC_PAGE_CACHE: return "PAGE_CACHE";
        case KEPLERSHM_METRIC_SOFTIRQ: return "SOFTIRQ";
        case KEPLERSHM_METRIC_NODE_CPU: return "NODE_CPU";
        case KEPLERSHM_METRIC_ENERGY: return "ENERGY";
        default: return "metric bit " + std::to_string(bit);
    }
}

NodeFeatures compute_features(const keplershm::FrameView& frame) {
    if (frame.interval_end_ns() <= frame.interval_start_ns()) {
        throw std::invalid_argument("frame " + std::to_string(frame.sequence()) + " has an empty or reversed interval");
    }
    NodeFeatures out;
    const double dt = static_cast<double>(frame.interval_end_ns() - frame.interval_start_ns()) / 1e9;
    out.interval_s = dt;
    const uint64_t mask = frame.header().metric_mask;

    // Sums in double, in record order, as MODELS.md prescribes (integers could overflow on big nodes).
    double cpu_ns = 0, cycles = 0, instructions = 0, misses = 0, page_hits = 0, tx = 0, rx = 0, block = 0;
    for (const keplershm_process& p : frame.processes()) {
        cpu_ns += static_cast<double>(p.cpu_time_ns);
        if (p.flags & KEPLERSHM_PROC_CYCLES_VALID) cycles += static_cast<double>(p.cycles);
        if (p.flags & KEPLERSHM_PROC_INSTRUCTIONS_VALID) instructions += static_cast<double>(p.instructions);
        if (p.flags & KEPLERSHM_PROC_CACHE_MISSES_VALID) misses += static_cast<double>(p.cache_misses);
        if (p.flags & KEPLERSHM_PROC_PAGE_CACHE_VALID) page_hits += static_cast<double>(p.page_cache_hits);
        if (p.flags & KEPLERSHM_PROC_SOFTIRQ_VALID) {
            tx += static_cast<double>(p.softirq[kNetTx]);
            rx += static_cast<double>(p.softirq[kNetRx]);
            block += static_cast<double>(p.softirq[kBlock]);
        }
    }
    if (const keplershm_unaccounted* u = frame.unaccounted()) cpu_ns += static_cast<double>(u->cpu_time_ns);

    double busy_ns = 0;
    for (const keplershm_cpu_sample& c : frame.cpus()) {
        busy_ns += static_cast<double>(c.user_ns) + static_cast<double>(c.nice_ns) + static_cast<double>(c.system_ns) +
                   static_cast<double>(c.irq_ns) + static_cast<double>(c.softirq_ns) + static_cast<double>(c.steal_ns);
    }

    auto set = [&](Feature f, double value) {
        const uint64_t bit = feature_metric(f);
        if (bit == 0 || (mask & bit) != 0) out.values[static_cast<size_t>(f)] = value;
    };
    set(Feature::cpu_time_ms_per_s, cpu_ns / 1e6 / dt);
    set(Feature::node_cpu_busy_ms_per_s, busy_ns / 1e6 / dt);
    set(Feature::cpu_count, static_cast<double>(frame.segment().cpu_count));
    set(Feature::cycles_per_s, cycles / dt);
    set(Feature::instructions_per_s, instructions / dt);
    set(Feature::cache_misses_per_s, misses / dt);
    set(Feature::page_cache_hits_per_s, page_hits / dt);
    set(Feature::softirq_net_tx_per_s, tx / dt);
    set(Feature::softirq_net_rx_per_s, rx / dt);
    set(Feature::softirq_block_per_s, block / dt);
    return out;
}

}  // namespace kepler::estimate
