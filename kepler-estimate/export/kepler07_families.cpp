// Kepler 0.7's names and labels (its pkg/collector/metric and docs/design/metrics.md), for the primary
// model only. Every zone family exists per entity, zero when the zone is not measured, because Kepler
// 0.7's dashboards then draw 0 rather than "no data".
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <set>

#include "export/families.hpp"

namespace kepler_estimate::families {

namespace {

using prometheus::MetricType;

constexpr std::array kNodeZones{ZoneKind::package, ZoneKind::core, ZoneKind::uncore, ZoneKind::dram,
                                ZoneKind::platform, ZoneKind::other, ZoneKind::gpu};
constexpr std::array kWorkloadZones{ZoneKind::package, ZoneKind::core, ZoneKind::uncore, ZoneKind::dram,
                                    ZoneKind::platform, ZoneKind::other, ZoneKind::gpu};

Labels with(Labels labels, const char* name, std::string value) {
    labels.push_back({name, std::move(value)});
    return labels;
}

/// The power source of the primary model: the same for every zone of a frame.
std::string node_source(const Ledger& ledger) {
    return ledger.node_sources().empty() ? std::string("none") : clean_label(ledger.node_sources().front());
}

/// mode="idle" series of modelled power only when asked, as Kepler's EXPOSE_ESTIMATED_IDLE_POWER_METRICS.
std::vector<const char*> modes(const Ledger& ledger, const ExportOptions& options) {
    if (options.estimated_idle || is_meter(node_source(ledger))) return {"dynamic", "idle"};
    return {"dynamic"};
}

uint64_t pick(const EnergyPair& e, const char* mode) { return mode[0] == 'd' ? e.dynamic_uj : e.idle_uj; }

/// kepler_<level>_joules_total, kepler_<level>_watts and kepler_<level>_<zone>_joules_total for
/// every Kepler zone (zero where the node has no such zone).
void add_workload(FamilyBuilder& b, const Ledger& ledger, const ExportOptions& options, const std::string& level,
                  const Labels& labels, const EntityEnergy& energy) {
    const ByKind total = by_kind(ledger, energy.total);
    const ByKind interval = by_kind(ledger, energy.interval);
    const double dt = interval_or_one(ledger);
    for (const char* mode : modes(ledger, options)) {
        const Labels l = with(labels, "mode", mode);
        b.add(fmt::format("kepler_{}_joules_total", level), fmt::format("Energy of the {} over all its zones, in joules", level),
              MetricType::Counter, l, joules(pick(total.total, mode)));
        b.add(fmt::format("kepler_{}_watts", level), fmt::format("Power of the {} over the last interval, in watts", level),
              MetricType::Gauge, l, joules(pick(interval.total, mode)) / dt);
        for (const ZoneKind kind : kWorkloadZones) {
            const auto it = total.zones.find(kind);
            const uint64_t uj = it == total.zones.end() ? 0 : pick(it->second, mode);
            b.add(fmt::format("kepler_{}_{}_joules_total", level, zone_name(kind)),
                  fmt::format("Energy of the {} in zone {}, in joules (0: zone not measured)", level, zone_name(kind)),
                  MetricType::Counter, l, joules(uj));
        }
    }
}

void add_node_zone(FamilyBuilder& b, ZoneKind kind, const Labels& labels, double total_j, double watts) {
    b.add(fmt::format("kepler_node_{}_joules_total", zone_name(kind)),
          fmt::format("Node energy in zone {} (primary model), in joules (0: zone not measured)", zone_name(kind)),
          MetricType::Counter, labels, total_j);
    b.add(fmt::format("kepler_node_{}_watts", zone_name(kind)),
          fmt::format("Node power in zone {} over the last interval (primary model), in watts", zone_name(kind)),
          MetricType::Gauge, labels, watts);
}

/// Node zones per socket; zones the node lacks get zero series on the sockets it has.
void add_node(FamilyBuilder& b, const EstimatorSnapshot& est, const ExportOptions& options) {
    const Ledger& ledger = est.ledger;
    const EntityEnergy& node = ledger.node();
    const double dt = interval_or_one(ledger);
    const std::string instance = clean_label(est.node_name);
    std::set<ZoneKind> present;
    std::set<std::string> sockets;
    for (size_t z = 0; z < node.total.size() && z < ledger.zones().size(); ++z) {
        const ZoneKey& zone = ledger.zones()[z];
        present.insert(zone.kind);
        sockets.insert(socket_label(zone.socket));
        const Labels labels = {{"package", socket_label(zone.socket)}, {"instance", instance},
                               {"source", clean_label(ledger.node_sources()[z])}};
        for (const char* mode : modes(ledger, options)) {
            add_node_zone(b, zone.kind, with(labels, "mode", mode), joules(pick(node.total[z], mode)),
                          joules(pick(node.interval[z], mode)) / dt);
        }
    }
    if (sockets.empty()) return;  // no frame yet: nothing is known about the node
    for (const ZoneKind kind : kNodeZones) {
        if (present.contains(kind)) continue;
        for (const std::string& socket : sockets) {
            const Labels labels = {{"package", socket}, {"instance", instance}, {"source", node_source(ledger)}};
            for (const char* mode : modes(ledger, options)) add_node_zone(b, kind, with(labels, "mode", mode), 0, 0);
        }
    }
}

/// Kepler 0.7's usage counters of one entity, each only when some frame carried the metric.
void add_usage(FamilyBuilder& b, const Ledger& ledger, const std::string& level, const Labels& labels, const UsageTotals& u) {
    const uint64_t mask = ledger.usage_mask();
    const Labels l = with(labels, "source", ledger.collector_source());
    auto counter = [&](uint64_t bit, const char* name, const char* help, double value) {
        if (mask & bit) b.add(fmt::format("kepler_{}_{}", level, name), help, MetricType::Counter, l, value);
    };
    counter(KEPLERSHM_METRIC_CPU_TIME, "bpf_cpu_time_ms_total", "On-CPU time, in milliseconds",
            static_cast<double>(u.cpu_time_ns) / 1e6);
    counter(KEPLERSHM_METRIC_PAGE_CACHE, "bpf_page_cache_hit_total", "Page cache hits", static_cast<double>(u.page_cache_hits));
    counter(KEPLERSHM_METRIC_SOFTIRQ, "bpf_net_tx_irq_total", "NET_TX softirqs", static_cast<double>(u.net_tx_irq));
    counter(KEPLERSHM_METRIC_SOFTIRQ, "bpf_net_rx_irq_total", "NET_RX softirqs", static_cast<double>(u.net_rx_irq));
    counter(KEPLERSHM_METRIC_SOFTIRQ, "bpf_block_irq_total", "BLOCK softirqs", static_cast<double>(u.block_irq));
    counter(KEPLERSHM_METRIC_CYCLES, "cpu_cycles_total", "CPU cycles (hardware counter)", static_cast<double>(u.cycles));
    counter(KEPLERSHM_METRIC_INSTRUCTIONS, "cpu_instructions_total", "CPU instructions (hardware counter)",
            static_cast<double>(u.instructions));
    counter(KEPLERSHM_METRIC_CACHE_MISSES, "cache_miss_total", "Last-level cache misses (hardware counter)",
            static_cast<double>(u.cache_misses));
}

Labels container_labels(const ContainerEntry& c) {
    return {{"container_id", clean_label(c.container_id)}, {"pod_name", clean_label(c.pod_name)},
            {"container_name", clean_label(c.container_name)}, {"container_namespace", clean_label(c.namespace_name)}};
}

void add_processes(FamilyBuilder& b, const Ledger& ledger, const ExportOptions& options) {
    std::vector<std::pair<ProcessKey, const ProcessEntry*>> procs;
    for (const auto& [key, p] : ledger.processes()) {
        if (p.exported) procs.emplace_back(key, &p);
    }
    std::sort(procs.begin(), procs.end(), [](const auto& x, const auto& y) {
        return std::tie(x.first.pid, x.first.start_time_ticks) < std::tie(y.first.pid, y.first.start_time_ticks);
    });
    for (const auto& [key, p] : procs) {
        const Labels labels = {{"pid", std::to_string(key.pid)}, {"start_time", std::to_string(key.start_time_ticks)},
                               {"container_id", clean_label(p->container_id)}, {"vm_id", clean_label(p->vm_id)},
                               {"command", clean_label(p->command)}};
        add_workload(b, ledger, options, "process", with(labels, "source", node_source(ledger)), p->energy);
        add_usage(b, ledger, "process", labels, p->usage);
    }
}

/// Kepler's node facts: its power sources by where they are read, and the CPU (Kepler names the
/// microarchitecture; the collector gives the model string, which is what we report).
void add_info(FamilyBuilder& b, const Ledger& ledger) {
    std::string components = "estimator", platform = "none";
    for (size_t z = 0; z < ledger.zones().size(); ++z) {
        const std::string& s = ledger.node_sources()[z];
        if (!is_meter(s)) continue;
        if (ledger.zones()[z].kind == ZoneKind::platform) platform = s == "rapl" ? "rapl-sysfs" : s;
        else components = s == "rapl" ? "rapl-sysfs" : s;
    }
    b.add("kepler_node_info", "Node facts: CPU and where component and platform power come from", MetricType::Gauge,
          {{"cpu_architecture", clean_label(ledger.cpu_model())}, {"components_power_source", components},
           {"platform_power_source", platform}, {"source", "os"}},
          1);
}

void add_build_info(FamilyBuilder& b) {
    const BuildFacts& f = build_facts();
    b.add("kepler_exporter_build_info", "Build of this exporter (kepler-estimate); value 1", MetricType::Gauge,
          {{"branch", f.branch}, {"revision", f.revision}, {"version", f.version}, {"os", f.os}, {"arch", f.arch}}, 1);
}

}  // namespace

void add_kepler07(FamilyBuilder& b, const EstimatorSnapshot& est, const ExportOptions& options) {
    const Ledger& ledger = est.ledger;
    add_node(b, est, options);
    for (const auto& [_, c] : ledger.containers()) {
        add_workload(b, ledger, options, "container", with(container_labels(c), "source", node_source(ledger)), c.energy);
        add_usage(b, ledger, "container", container_labels(c), c.usage);
    }
    for (const auto& [_, p] : ledger.pods()) {
        add_workload(b, ledger, options, "pod",
                     {{"pod_name", clean_label(p.pod_name)}, {"container_namespace", clean_label(p.namespace_name)}}, p.energy);
    }
    for (const auto& [name, n] : ledger.namespaces()) {
        add_workload(b, ledger, options, "namespace", {{"container_namespace", clean_label(name)}}, n);
    }
    for (const auto& [_, v] : ledger.vms()) {
        const Labels labels = {{"vm_id", clean_label(v.vm_id)}, {"vm_name", clean_label(v.vm_name)}};
        add_workload(b, ledger, options, "vm", labels, v.energy);
        add_usage(b, ledger, "vm", labels, v.usage);
    }
    if (options.process_metrics) add_processes(b, ledger, options);
    if (ledger.frames() > 0) add_info(b, ledger);
    add_build_info(b);
}

}  // namespace kepler_estimate::families
