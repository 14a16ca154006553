// Kepler 0.7's names and labels (its pkg/collector/metric and docs/design/metrics.md), for the primary
// model only. Every zone family exists per entity, zero when the zone is not measured, because Kepler
// 0.7's dashboards then draw 0 rather than "no data".
#include <fmt/format.h>

#include <array>
#include <set>

#include "export/families.hpp"
#include "support/version/build_info.hpp"  // generated

namespace kepler::estimate::families {

namespace {

constexpr std::array kNodeZones{ZoneKind::package, ZoneKind::core, ZoneKind::uncore, ZoneKind::dram,
                                ZoneKind::platform, ZoneKind::other, ZoneKind::gpu};
constexpr std::array kWorkloadZones{ZoneKind::package, ZoneKind::core, ZoneKind::uncore, ZoneKind::dram,
                                    ZoneKind::platform, ZoneKind::other, ZoneKind::gpu};

/// The power source of the primary model: the same for every zone of a frame.
std::string node_source(const Ledger& ledger) {
    return ledger.node_sources().empty() ? std::string("none") : clean_label(ledger.node_sources().front());
}

/// mode="idle" series of modelled power only when asked, as Kepler's EXPOSE_ESTIMATED_IDLE_POWER_METRICS.
std::vector<const char*> kepler07_modes(const Ledger& ledger, const ExportOptions& options) {
    if (options.estimated_idle || is_meter(node_source(ledger))) return {"dynamic", "idle"};
    return {"dynamic"};
}

uint64_t pick(const EnergyPair& e, const char* mode) { return mode[0] == 'd' ? e.dynamic_uj : e.idle_uj; }

/// A mode and the labels a level's energy series carry after the entity's own: `source` where the level
/// has it, then `mode`. Rendered once per scrape, not copied per series.
struct ModeLabels {
    const char* mode;
    LabelSet labels;
};

std::vector<ModeLabels> mode_labels(const std::vector<const char*>& modes, const std::string* source) {
    std::vector<ModeLabels> out;
    for (const char* mode : modes) {
        LabelSet labels;
        if (source != nullptr) labels.add("source", *source);
        out.push_back({mode, labels.add("mode", mode)});
    }
    return out;
}

/// Kepler 0.7's usage counters: each is served only when some frame carried its metric.
struct UsageCounter {
    uint64_t metric_bit;
    const char* suffix;
    const char* help;
    uint64_t UsageTotals::*field;
    double scale;
};
constexpr std::array kUsageCounters{
    UsageCounter{KEPLERSHM_METRIC_CPU_TIME, "bpf_cpu_time_ms_total", "On-CPU time, in milliseconds", &UsageTotals::cpu_time_ns, 1e-6},
    UsageCounter{KEPLERSHM_METRIC_PAGE_CACHE, "bpf_page_cache_hit_total", "Page cache hits", &UsageTotals::page_cache_hits, 1},
    UsageCounter{KEPLERSHM_METRIC_SOFTIRQ, "bpf_net_tx_irq_total", "NET_TX softirqs", &UsageTotals::net_tx_irq, 1},
    UsageCounter{KEPLERSHM_METRIC_SOFTIRQ, "bpf_net_rx_irq_total", "NET_RX softirqs", &UsageTotals::net_rx_irq, 1},
    UsageCounter{KEPLERSHM_METRIC_SOFTIRQ, "bpf_block_irq_total", "BLOCK softirqs", &UsageTotals::block_irq, 1},
    UsageCounter{KEPLERSHM_METRIC_CYCLES, "cpu_cycles_total", "CPU cycles (hardware counter)", &UsageTotals::cycles, 1},
    UsageCounter{KEPLERSHM_METRIC_INSTRUCTIONS, "cpu_instructions_total", "CPU instructions (hardware counter)",
                 &UsageTotals::instructions, 1},
    UsageCounter{KEPLERSHM_METRIC_CACHE_MISSES, "cache_miss_total", "Last-level cache misses (hardware counter)",
                 &UsageTotals::cache_misses, 1},
};

/// The families of one workload level (container, pod, namespace, vm, process), resolved once per
/// scrape: each series is then one append, with no name to format or look up.
struct LevelFamilies {
    Exposition::Family* joules = nullptr;
    Exposition::Family* watts = nullptr;
    std::array<Exposition::Family*, kWorkloadZones.size()> zone_joules{};
    std::array<Exposition::Family*, kUsageCounters.size()> usage{};
};

LevelFamilies level_families(Exposition& out, std::string_view level) {
    LevelFamilies f;
    f.joules = &out.family(fmt::format("kepler_{}_joules_total", level),
                           fmt::format("Energy of the {} over all its zones, in joules", level), MetricType::counter);
    f.watts = &out.family(fmt::format("kepler_{}_watts", level),
                          fmt::format("Power of the {} over the last interval, in watts", level), MetricType::gauge);
    for (size_t i = 0; i < kWorkloadZones.size(); ++i) {
        const std::string_view zone = zone_name(kWorkloadZones[i]);
        f.zone_joules[i] = &out.family(fmt::format("kepler_{}_{}_joules_total", level, zone),
                                       fmt::format("Energy of the {} in zone {}, in joules (0: zone not measured)", level, zone),
                                       MetricType::counter);
    }
    for (size_t i = 0; i < kUsageCounters.size(); ++i) {
        f.usage[i] = &out.family(fmt::format("kepler_{}_{}", level, kUsageCounters[i].suffix), kUsageCounters[i].help,
                                 MetricType::counter);
    }
    return f;
}

/// kepler_<level>_joules_total, kepler_<level>_watts and kepler_<level>_<zone>_joules_total for
/// every Kepler zone (zero where the node has no such zone).
void add_workload(Exposition& out, const LevelFamilies& f, const Ledger& ledger, const std::vector<ModeLabels>& modes,
                  const LabelSet& labels, const EntityEnergy& energy) {
    const ByKind total = by_kind(ledger, energy.total);
    const ByKind interval = by_kind(ledger, energy.interval);
    const double dt = interval_or_one(ledger);
    for (const auto& [mode, more] : modes) {
        out.add(*f.joules, labels, more, joules(pick(total.total, mode)));
        out.add(*f.watts, labels, more, joules(pick(interval.total, mode)) / dt);
        for (size_t i = 0; i < kWorkloadZones.size(); ++i) {
            const std::optional<EnergyPair>& zone = total.zone(kWorkloadZones[i]);
            out.add(*f.zone_joules[i], labels, more, zone ? joules(pick(*zone, mode)) : 0.0);
        }
    }
}

/// Kepler 0.7's usage counters of one entity, each only when some frame carried the metric; `source`
/// is the collector's (`source="..."`, rendered once per scrape).
void add_usage(Exposition& out, const LevelFamilies& f, const Ledger& ledger, const LabelSet& labels,
               const LabelSet& source, const UsageTotals& u) {
    const uint64_t mask = ledger.usage_mask();
    for (size_t i = 0; i < kUsageCounters.size(); ++i) {
        const UsageCounter& c = kUsageCounters[i];
        if (mask & c.metric_bit) out.add(*f.usage[i], labels, source, static_cast<double>(u.*c.field) * c.scale);
    }
}

void add_node_zone(Exposition& out, ZoneKind kind, const LabelSet& labels, double total_j, double watts) {
    out.add(fmt::format("kepler_node_{}_joules_total", zone_name(kind)),
            fmt::format("Node energy in zone {} (primary model), in joules (0: zone not measured)", zone_name(kind)),
            MetricType::counter, labels, total_j);
    out.add(fmt::format("kepler_node_{}_watts", zone_name(kind)),
            fmt::format("Node power in zone {} over the last interval (primary model), in watts", zone_name(kind)),
            MetricType::gauge, labels, watts);
}

/// Node zones per socket; zones the node lacks get zero series on the sockets it has.
void add_node(Exposition& out, const EstimatorSnapshot& est, const std::vector<const char*>& modes) {
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
        const LabelSet labels = {{"package", socket_label(zone.socket)}, {"instance", instance},
                                 {"source", clean_label(ledger.node_sources()[z])}};
        for (const char* mode : modes) {
            add_node_zone(out, zone.kind, labels.with("mode", mode), joules(pick(node.total[z], mode)),
                          joules(pick(node.interval[z], mode)) / dt);
        }
    }
    if (sockets.empty()) return;  // no frame yet: nothing is known about the node
    for (const ZoneKind kind : kNodeZones) {
        if (present.contains(kind)) continue;
        for (const std::string& socket : sockets) {
            const LabelSet labels = {{"package", socket}, {"instance", instance}, {"source", node_source(ledger)}};
            for (const char* mode : modes) add_node_zone(out, kind, labels.with("mode", mode), 0, 0);
        }
    }
}

LabelSet container_labels(const ContainerEntry& c) {
    return {{"container_id", clean_label(c.container_id)}, {"pod_name", clean_label(c.pod_name)},
            {"container_name", clean_label(c.container_name)}, {"container_namespace", clean_label(c.namespace_name)}};
}

void add_processes(Exposition& out, const Ledger& ledger, const std::vector<ModeLabels>& modes, const LabelSet& usage_source) {
    const LevelFamilies f = level_families(out, "process");
    for (const auto& [key, p] : exported_processes(ledger)) {
        const LabelSet labels = {{"pid", std::to_string(key.pid)}, {"start_time", std::to_string(key.start_time_ticks)},
                                 {"container_id", clean_label(p->container_id)}, {"vm_id", clean_label(p->vm_id)},
                                 {"command", clean_label(p->command)}};
        add_workload(out, f, ledger, modes, labels, p->energy);
        add_usage(out, f, ledger, labels, usage_source, p->usage);
    }
}

/// Kepler's node facts: its power sources by where they are read, and the CPU (Kepler names the
/// microarchitecture; the collector gives the model string, which is what we report).
void add_info(Exposition& out, const Ledger& ledger) {
    std::string components = "estimator", platform = "none";
    for (size_t z = 0; z < ledger.zones().size(); ++z) {
        const std::string& s = ledger.node_sources()[z];
        if (!is_meter(s) || ledger.zones()[z].kind == ZoneKind::other) continue;  // other is derived, not a meter
        if (ledger.zones()[z].kind == ZoneKind::platform) platform = s == "rapl" ? "rapl-sysfs" : s;
        else components = s == "rapl" ? "rapl-sysfs" : s;
    }
    out.add("kepler_node_info", "Node facts: CPU and where component and platform power come from", MetricType::gauge,
            {{"cpu_architecture", clean_label(ledger.cpu_model())}, {"components_power_source", components},
             {"platform_power_source", platform}, {"source", "os"}},
            1);
}

void add_build_info(Exposition& out) {
    const kepler::support::BuildInfo& f = kepler::support::kBuild;  // fixed at configure time
    out.add("kepler_exporter_build_info", "Build of this exporter (kepler-estimate); value 1", MetricType::gauge,
            {{"branch", f.branch}, {"revision", f.revision}, {"version", f.version}, {"os", f.os}, {"arch", f.arch}}, 1);
}

}  // namespace

void add_kepler07(Exposition& out, const EstimatorSnapshot& est, const ExportOptions& options) {
    const Ledger& ledger = est.ledger;
    const std::vector<const char*> modes = kepler07_modes(ledger, options);
    const std::string source = node_source(ledger);
    // Containers and processes name the power source of their energy; pods, namespaces and VMs do not.
    const std::vector<ModeLabels> with_source = mode_labels(modes, &source), mode_only = mode_labels(modes, nullptr);
    const LabelSet usage_source{{"source", ledger.collector_source()}};
    add_node(out, est, modes);
    const LevelFamilies containers = level_families(out, "container");
    for (const auto& [_, c] : ledger.containers()) {
        const LabelSet labels = container_labels(c);
        add_workload(out, containers, ledger, with_source, labels, c.energy);
        add_usage(out, containers, ledger, labels, usage_source, c.usage);
    }
    const LevelFamilies pods = level_families(out, "pod");
    // pod_id keeps apart pods that share names: any two while the names are unknown (--kube off, or
    // before the names arrive), and a pod recreated under its old name while the old one is exported.
    for (const auto& [pod_id, p] : ledger.pods()) {
        add_workload(out, pods, ledger, mode_only,
                     {{"pod_id", clean_label(pod_id)}, {"pod_name", clean_label(p.pod_name)},
                      {"container_namespace", clean_label(p.namespace_name)}},
                     p.energy);
    }
    const LevelFamilies namespaces = level_families(out, "namespace");
    for (const auto& [name, n] : ledger.namespaces()) {
        add_workload(out, namespaces, ledger, mode_only, {{"container_namespace", clean_label(name)}}, n);
    }
    const LevelFamilies vms = level_families(out, "vm");
    for (const auto& [_, v] : ledger.vms()) {
        const LabelSet labels = {{"vm_id", clean_label(v.vm_id)}, {"vm_name", clean_label(v.vm_name)}};
        add_workload(out, vms, ledger, mode_only, labels, v.energy);
        add_usage(out, vms, ledger, labels, usage_source, v.usage);
    }
    if (options.process_metrics) add_processes(out, ledger, with_source, usage_source);
    if (ledger.frames() > 0) add_info(out, ledger);
    add_build_info(out);
}

}  // namespace kepler::estimate::families
