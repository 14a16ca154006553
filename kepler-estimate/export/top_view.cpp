#include "export/top_view.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

namespace kepler::estimate {

std::string render_top(const Estimator& est, size_t rows) {
    const Ledger& ledger = est.ledger();
    const double dt = ledger.interval_s() > 0 ? ledger.interval_s() : 1.0;
    auto watts = [&](const EntityEnergy& e) { return static_cast<double>(ledger.total_uj(e.interval)) / 1e6 / dt; };
    // The GPUs' part of a workload's watts (a column of its own where the node has GPU zones).
    const bool gpus = std::any_of(ledger.zones().begin(), ledger.zones().end(), [](const ZoneKey& z) { return z.kind == ZoneKind::gpu; });
    auto gpu_column = [&](const EntityEnergy& e) -> std::string {
        if (!gpus) return "";
        uint64_t uj = 0;
        for (size_t z = 0; z < ledger.zones().size() && z < e.interval.size(); ++z) {
            if (ledger.zones()[z].kind == ZoneKind::gpu) uj += e.interval[z].dynamic_uj + e.interval[z].idle_uj;
        }
        return fmt::format("{:9.2f} W  ", static_cast<double>(uj) / 1e6 / dt);
    };
    const std::string gpu_title = gpus ? fmt::format("{:<11}  ", "gpu") : "";

    std::string out = fmt::format("kepler-estimate  node {}  frame {}  model {}  idle policy {}\n", est.node_name(),
                                  est.last_sequence(), est.primary_model(), to_string(est.idle_policy()));
    for (size_t z = 0; z < ledger.zones().size() && z < ledger.node().interval.size(); ++z) {
        const EnergyPair& e = ledger.node().interval[z];
        out += fmt::format("  {:<9} socket {:<3} {:9.2f} W  (dynamic {:8.2f} W, idle {:8.2f} W)\n", zone_name(ledger.zones()[z].kind),
                           socket_label(ledger.zones()[z].socket), static_cast<double>(e.dynamic_uj + e.idle_uj) / 1e6 / dt,
                           static_cast<double>(e.dynamic_uj) / 1e6 / dt, static_cast<double>(e.idle_uj) / 1e6 / dt);
    }
    for (const auto& [index, g] : ledger.gpus()) out += fmt::format("  gpu {:<5} {} {} {}\n", index, g.vendor, g.name, g.uuid);
    for (const auto& [zone, m] : ledger.platform_meters()) {
        out += m.fresh ? fmt::format("  platform  {:<13} {:9.2f} W  ({} {})\n", zone, m.watts, m.source, m.source_type)
                       : fmt::format("  platform  {:<13}     stale    ({} {})\n", zone, m.source, m.source_type);
    }

    std::vector<std::pair<double, std::string>> containers;
    for (const auto& [id, c] : ledger.containers()) {
        containers.emplace_back(watts(c.energy), fmt::format("{}{:<40.40} {:<20.20} {:<20.20}", gpu_column(c.energy), id,
                                                             c.container_name, c.namespace_name));
    }
    std::vector<std::pair<double, std::string>> processes;
    for (const auto& [key, p] : ledger.processes()) {
        if (p.energy.last_seen_ns != est.last_interval_end_ns()) continue;
        processes.emplace_back(watts(p.energy), fmt::format("{}{:>8} {:<16} {:<40.40}", gpu_column(p.energy), key.pid, p.command,
                                                            p.container_id));
    }
    auto top = [&](std::vector<std::pair<double, std::string>>& list, const std::string& title) {
        std::partial_sort(list.begin(), list.begin() + static_cast<long>(std::min(rows, list.size())), list.end(),
                          [](const auto& a, const auto& b) { return a.first > b.first || (a.first == b.first && a.second < b.second); });
        out += title;
        for (size_t i = 0; i < std::min(rows, list.size()); ++i) out += fmt::format("{:9.2f} W  {}\n", list[i].first, list[i].second);
    };
    top(containers, fmt::format("\n  watts     {}{:<40} {:<20} {:<20}\n", gpu_title, "CONTAINER", "NAME", "NAMESPACE"));
    top(processes, fmt::format("\n  watts     {}{:>8} {:<16} {:<40}\n", gpu_title, "PID", "COMMAND", "CONTAINER"));
    return out;
}

void print_top(const Estimator& est, std::FILE* out, size_t rows) {
    const std::string text = render_top(est, rows);
    fmt::print(out, "\x1b[H\x1b[2J{}", text);
    std::fflush(out);
}

}  // namespace kepler::estimate
