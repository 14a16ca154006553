// Kepler >= 0.10's names and labels (its docs/user/metrics.md): one family per level and device
// (cpu, gpu) with a `zone` label, `state` running/terminated, and `node_name` on every series.
// Workload energy is what the attribution gave (with --idle-policy none, active energy only, as Kepler).
#include <fmt/format.h>

#include <algorithm>

#include "export/families.hpp"

namespace kepler_estimate::families {

namespace {

using prometheus::MetricType;

Labels with(Labels labels, const char* name, std::string value) {
    labels.push_back({name, std::move(value)});
    return labels;
}

/// Kepler >= 0.10 reports GPUs in their own families; every other zone is a CPU-side zone.
const char* device(ZoneKind kind) { return kind == ZoneKind::gpu ? "gpu" : "cpu"; }
/// RAPL zone names as Kepler's; a whole-platform meter (psys, hwmon, ACPI) is "platform".
std::string zone_label(ZoneKind kind) { return std::string(zone_name(kind)); }

struct Context {
    const Ledger& ledger;
    std::string node_name;
};

/// kepler_<level>_<device>_joules_total and _watts per zone kind (sockets summed), dynamic + idle.
void add_entity(FamilyBuilder& b, const Context& ctx, const std::string& level, const Labels& labels, const EntityEnergy& e) {
    const ByKind total = by_kind(ctx.ledger, e.total);
    const ByKind interval = by_kind(ctx.ledger, e.interval);
    const double dt = interval_or_one(ctx.ledger);
    const Labels base = with(with(labels, "state", state(ctx.ledger, e)), "node_name", ctx.node_name);
    for (const auto& [kind, pair] : total.zones) {
        const Labels l = with(base, "zone", zone_label(kind));
        const EnergyPair& now = interval.zones.at(kind);
        b.add(fmt::format("kepler_{}_{}_joules_total", level, device(kind)),
              fmt::format("Energy of the {} per zone, in joules", level), MetricType::Counter, l,
              joules(pair.dynamic_uj + pair.idle_uj));
        b.add(fmt::format("kepler_{}_{}_watts", level, device(kind)), fmt::format("Power of the {} per zone, in watts", level),
              MetricType::Gauge, l, joules(now.dynamic_uj + now.idle_uj) / dt);
    }
}

/// Node families per zone slot; `path` names the zone and socket (the estimator never sees sysfs paths).
void add_node(FamilyBuilder& b, const Context& ctx) {
    const Ledger& ledger = ctx.ledger;
    const EntityEnergy& node = ledger.node();
    const double dt = interval_or_one(ledger);
    for (size_t z = 0; z < node.total.size() && z < ledger.zones().size(); ++z) {
        const ZoneKey& zone = ledger.zones()[z];
        const Labels l = {{"zone", zone_label(zone.kind)}, {"path", fmt::format("{}-{}", zone_name(zone.kind), socket_label(zone.socket))},
                          {"node_name", ctx.node_name}};
        const std::string prefix = fmt::format("kepler_node_{}", device(zone.kind));
        const EnergyPair& t = node.total[z];
        const EnergyPair& i = node.interval[z];
        b.add(prefix + "_joules_total", "Node energy per zone, in joules", MetricType::Counter, l, joules(t.dynamic_uj + t.idle_uj));
        b.add(prefix + "_watts", "Node power per zone, in watts", MetricType::Gauge, l, joules(i.dynamic_uj + i.idle_uj) / dt);
        b.add(prefix + "_active_joules_total", "Node energy of the active (busy) state, in joules", MetricType::Counter, l,
              joules(t.dynamic_uj));
        b.add(prefix + "_idle_joules_total", "Node energy of the idle state, in joules", MetricType::Counter, l, joules(t.idle_uj));
        b.add(prefix + "_active_watts", "Node power of the active state, in watts", MetricType::Gauge, l, joules(i.dynamic_uj) / dt);
        b.add(prefix + "_idle_watts", "Node power of the idle state, in watts", MetricType::Gauge, l, joules(i.idle_uj) / dt);
    }
    b.add("kepler_node_cpu_usage_ratio", "Busy share of the node's CPU time over the last interval", MetricType::Gauge,
          {{"node_name", ctx.node_name}}, ledger.cpu_usage_ratio());
    // One series: the collector reports the model string, not per-processor cpuinfo rows.
    b.add("kepler_node_cpu_info", "CPU of the node", MetricType::Gauge,
          {{"model_name", clean_label(ledger.cpu_model())}, {"node_name", ctx.node_name}}, 1);
}

/// Host, kernel and unaccounted energy are no container in Kepler >= 0.10 (they stay with processes/node).
bool is_container(const ContainerEntry& c) { return !c.runtime.empty(); }

Labels container_labels(const ContainerEntry& c) {
    return {{"container_id", clean_label(c.container_id)}, {"container_name", clean_label(c.container_name)},
            {"runtime", c.runtime.empty() ? "unknown" : c.runtime}, {"pod_id", clean_label(c.pod_key)}};
}

void add_containers(FamilyBuilder& b, const Context& ctx) {
    const bool cpu_time = (ctx.ledger.usage_mask() & KEPLERSHM_METRIC_CPU_TIME) != 0;
    for (const auto& [_, c] : ctx.ledger.containers()) {
        if (!is_container(c)) continue;
        add_entity(b, ctx, "container", container_labels(c), c.energy);
        if (!cpu_time) continue;
        b.add("kepler_container_cpu_seconds_total", "CPU time of the container, in seconds", MetricType::Counter,
              with(container_labels(c), "node_name", ctx.node_name), static_cast<double>(c.usage.cpu_time_ns) / 1e9);
    }
}

const char* process_type(const ProcessEntry& p, const Ledger& ledger) {
    if (!p.vm_id.empty()) return "vm";
    const auto it = ledger.containers().find(p.container_id);
    return it != ledger.containers().end() && is_container(it->second) ? "container" : "regular";
}

void add_processes(FamilyBuilder& b, const Context& ctx) {
    std::vector<std::pair<ProcessKey, const ProcessEntry*>> procs;
    for (const auto& [key, p] : ctx.ledger.processes()) {
        if (p.exported) procs.emplace_back(key, &p);
    }
    std::sort(procs.begin(), procs.end(), [](const auto& x, const auto& y) {
        return std::tie(x.first.pid, x.first.start_time_ticks) < std::tie(y.first.pid, y.first.start_time_ticks);
    });
    const bool cpu_time = (ctx.ledger.usage_mask() & KEPLERSHM_METRIC_CPU_TIME) != 0;
    for (const auto& [key, p] : procs) {
        const char* type = process_type(*p, ctx.ledger);
        const bool contained = std::string_view(type) == "container";
        // The collector does not read executable paths: exe is empty (Prometheus treats it as absent).
        const Labels labels = {{"pid", std::to_string(key.pid)}, {"comm", clean_label(p->command)}, {"exe", ""},
                               {"type", type}, {"container_id", contained ? clean_label(p->container_id) : ""},
                               {"vm_id", clean_label(p->vm_id)}};
        add_entity(b, ctx, "process", labels, p->energy);
        if (!cpu_time) continue;
        b.add("kepler_process_cpu_seconds_total", "CPU time of the process, in seconds", MetricType::Counter,
              with(labels, "node_name", ctx.node_name), static_cast<double>(p->usage.cpu_time_ns) / 1e9);
    }
}

void add_build_info(FamilyBuilder& b) {
    const BuildFacts& f = build_facts();
    b.add("kepler_build_info", "Build of this exporter (kepler-estimate); goversion names the C++ compiler", MetricType::Gauge,
          {{"arch", f.arch}, {"branch", f.branch}, {"revision", f.revision}, {"version", f.version}, {"goversion", __VERSION__}}, 1);
}

}  // namespace

void add_kepler010(FamilyBuilder& b, const EstimatorSnapshot& est, const ExportOptions& options) {
    const Context ctx{est.ledger, clean_label(est.node_name)};
    add_build_info(b);
    if (ctx.ledger.frames() == 0) return;
    add_node(b, ctx);
    add_containers(b, ctx);
    for (const auto& [pod_id, p] : ctx.ledger.pods()) {
        add_entity(b, ctx, "pod",
                   {{"pod_id", clean_label(pod_id)}, {"pod_name", clean_label(p.pod_name)}, {"pod_namespace", clean_label(p.namespace_name)}},
                   p.energy);
    }
    for (const auto& [_, v] : ctx.ledger.vms()) {
        add_entity(b, ctx, "vm", {{"vm_id", clean_label(v.vm_id)}, {"vm_name", clean_label(v.vm_name)}, {"hypervisor", v.hypervisor}},
                   v.energy);
    }
    if (options.process_metrics) add_processes(b, ctx);
}

}  // namespace kepler_estimate::families
