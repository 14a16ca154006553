// Kepler >= 0.10's names and labels (its docs/user/metrics.md): one family per level and device
// (cpu, gpu) with a `zone` label, `state` running/terminated, and `node_name` on every series.
// Workload energy is what the attribution gave (with --idle-policy none, active energy only, as Kepler).
#include <fmt/format.h>

#include "export/families.hpp"
#include "support/version/build_info.hpp"  // generated

namespace kepler::estimate::families {

namespace {

/// Kepler >= 0.10 reports GPUs in their own families; every other zone is a CPU-side zone.
const char* device(ZoneKind kind) { return kind == ZoneKind::gpu ? "gpu" : "cpu"; }

struct Context {
    const Ledger& ledger;
    std::string node_name;
};

/// The families of one level (container, pod, vm, process) per device, resolved once per scrape.
struct LevelFamilies {
    Exposition::Family* cpu_joules;
    Exposition::Family* cpu_watts;
    Exposition::Family* gpu_joules;
    Exposition::Family* gpu_watts;
    Exposition::Family* cpu_seconds;  // containers and processes only
};

LevelFamilies level_families(Exposition& out, std::string_view level) {
    auto joules_family = [&](const char* device) {
        return &out.family(fmt::format("kepler_{}_{}_joules_total", level, device),
                           fmt::format("Energy of the {} per zone, in joules", level), MetricType::counter);
    };
    auto watts_family = [&](const char* device) {
        return &out.family(fmt::format("kepler_{}_{}_watts", level, device), fmt::format("Power of the {} per zone, in watts", level),
                           MetricType::gauge);
    };
    return {joules_family("cpu"), watts_family("cpu"), joules_family("gpu"), watts_family("gpu"),
            &out.family(fmt::format("kepler_{}_cpu_seconds_total", level), fmt::format("CPU time of the {}, in seconds", level),
                        MetricType::counter)};
}

/// kepler_<level>_<device>_joules_total and _watts per zone kind (sockets summed), dynamic + idle.
void add_entity(Exposition& out, const LevelFamilies& f, const Context& ctx, const LabelSet& labels, const EntityEnergy& e) {
    const ByKind total = by_kind(ctx.ledger, e.total);
    const ByKind interval = by_kind(ctx.ledger, e.interval);
    const double dt = interval_or_one(ctx.ledger);
    const LabelSet base = labels.with("state", state(ctx.ledger, e)).with("node_name", ctx.node_name);
    for (size_t k = 0; k < kZoneKindCount; ++k) {
        if (!total.zones[k]) continue;
        const auto kind = static_cast<ZoneKind>(k);
        const EnergyPair& pair = *total.zones[k];
        const EnergyPair now = interval.zones[k].value_or(EnergyPair{});
        const LabelSet l = base.with("zone", zone_name(kind));
        const bool gpu = kind == ZoneKind::gpu;
        out.add(gpu ? *f.gpu_joules : *f.cpu_joules, l, joules(pair.dynamic_uj + pair.idle_uj));
        out.add(gpu ? *f.gpu_watts : *f.cpu_watts, l, joules(now.dynamic_uj + now.idle_uj) / dt);
    }
}

/// Kepler 0.11's labels of a GPU: its index, UUID, product name and vendor (empty where the collector's
/// frames do not describe the device, e.g. before protocol 1.4).
LabelSet gpu_labels(const Ledger& ledger, uint32_t index) {
    const auto it = ledger.gpus().find(index);
    const GpuDevice none{"", "", "unknown", 0, false};
    const GpuDevice& g = it != ledger.gpus().end() ? it->second : none;
    return {{"gpu", std::to_string(index)}, {"gpu_uuid", clean_label(g.uuid)}, {"gpu_name", clean_label(g.name)}, {"vendor", g.vendor}};
}

/// Node labels of a zone slot: GPUs by Kepler 0.11's GPU labels; other zones by `zone` and a `path` that
/// names the zone and socket (the estimator never sees sysfs paths).
LabelSet node_zone_labels(const Context& ctx, const ZoneKey& zone) {
    if (zone.kind == ZoneKind::gpu) return gpu_labels(ctx.ledger, zone.socket).with("node_name", ctx.node_name);
    return {{"zone", zone_name(zone.kind)}, {"path", fmt::format("{}-{}", zone_name(zone.kind), socket_label(zone.socket))},
            {"node_name", ctx.node_name}};
}

/// kepler_node_gpu_info: one series per GPU the collector describes.
void add_gpu_info(Exposition& out, const Context& ctx) {
    for (const auto& [index, g] : ctx.ledger.gpus()) {
        out.add("kepler_node_gpu_info", "GPUs of the node", MetricType::gauge,
                gpu_labels(ctx.ledger, index).with("mig", g.mig ? "true" : "false").with("node_name", ctx.node_name), 1);
    }
}

/// Node families per zone slot.
void add_node(Exposition& out, const Context& ctx) {
    const Ledger& ledger = ctx.ledger;
    const EntityEnergy& node = ledger.node();
    const double dt = interval_or_one(ledger);
    add_gpu_info(out, ctx);
    for (size_t z = 0; z < node.total.size() && z < ledger.zones().size(); ++z) {
        const ZoneKey& zone = ledger.zones()[z];
        const LabelSet l = node_zone_labels(ctx, zone);
        const std::string prefix = fmt::format("kepler_node_{}", device(zone.kind));
        const EnergyPair& t = node.total[z];
        const EnergyPair& i = node.interval[z];
        out.add(prefix + "_joules_total", "Node energy per zone, in joules", MetricType::counter, l, joules(t.dynamic_uj + t.idle_uj));
        out.add(prefix + "_watts", "Node power per zone, in watts", MetricType::gauge, l, joules(i.dynamic_uj + i.idle_uj) / dt);
        out.add(prefix + "_active_joules_total", "Node energy of the active (busy) state, in joules", MetricType::counter, l,
                joules(t.dynamic_uj));
        out.add(prefix + "_idle_joules_total", "Node energy of the idle state, in joules", MetricType::counter, l, joules(t.idle_uj));
        out.add(prefix + "_active_watts", "Node power of the active state, in watts", MetricType::gauge, l, joules(i.dynamic_uj) / dt);
        out.add(prefix + "_idle_watts", "Node power of the idle state, in watts", MetricType::gauge, l, joules(i.idle_uj) / dt);
    }
    out.add("kepler_node_cpu_usage_ratio", "Busy share of the node's CPU time over the last interval", MetricType::gauge,
            {{"node_name", ctx.node_name}}, ledger.cpu_usage_ratio());
    // One series: the collector reports the model string, not per-processor cpuinfo rows.
    out.add("kepler_node_cpu_info", "CPU of the node", MetricType::gauge,
            {{"model_name", clean_label(ledger.cpu_model())}, {"node_name", ctx.node_name}}, 1);
}

/// Host, kernel and unaccounted energy are no container in Kepler >= 0.10 (they stay with processes/node).
bool is_container(const ContainerEntry& c) { return !c.runtime.empty(); }

LabelSet container_labels(const ContainerEntry& c) {
    return {{"container_id", clean_label(c.container_id)}, {"container_name", clean_label(c.container_name)},
            {"runtime", c.runtime.empty() ? "unknown" : c.runtime}, {"pod_id", clean_label(c.pod_key)}};
}

void add_containers(Exposition& out, const Context& ctx) {
    const bool cpu_time = (ctx.ledger.usage_mask() & KEPLERSHM_METRIC_CPU_TIME) != 0;
    const LevelFamilies f = level_families(out, "container");
    for (const auto& [_, c] : ctx.ledger.containers()) {
        if (!is_container(c)) continue;
        const LabelSet labels = container_labels(c);
        add_entity(out, f, ctx, labels, c.energy);
        if (cpu_time) out.add(*f.cpu_seconds, labels.with("node_name", ctx.node_name), static_cast<double>(c.usage.cpu_time_ns) / 1e9);
    }
}

const char* process_type(const ProcessEntry& p, const Ledger& ledger) {
    if (!p.vm_id.empty()) return "vm";
    const auto it = ledger.containers().find(p.container_id);
    return it != ledger.containers().end() && is_container(it->second) ? "container" : "regular";
}

void add_processes(Exposition& out, const Context& ctx) {
    const bool cpu_time = (ctx.ledger.usage_mask() & KEPLERSHM_METRIC_CPU_TIME) != 0;
    const LevelFamilies f = level_families(out, "process");
    for (const auto& [key, p] : exported_processes(ctx.ledger)) {
        const char* type = process_type(*p, ctx.ledger);
        const bool contained = std::string_view(type) == "container";
        // The collector does not read executable paths: exe is empty (Prometheus treats it as absent).
        // start_time (Kepler 0.7's label: clock ticks after boot) keeps a reused pid's series apart from
        // the ended process's, which stays exported as "terminated" for the retention.
        const LabelSet labels = {{"pid", std::to_string(key.pid)}, {"start_time", std::to_string(key.start_time_ticks)},
                                 {"comm", clean_label(p->command)}, {"exe", ""},
                                 {"type", type}, {"container_id", contained ? clean_label(p->container_id) : ""},
                                 {"vm_id", clean_label(p->vm_id)}};
        add_entity(out, f, ctx, labels, p->energy);
        if (cpu_time) out.add(*f.cpu_seconds, labels.with("node_name", ctx.node_name), static_cast<double>(p->usage.cpu_time_ns) / 1e9);
    }
}

void add_build_info(Exposition& out) {
    const kepler::support::BuildInfo& f = kepler::support::kBuild;  // fixed at configure time
    out.add("kepler_build_info", "Build of this exporter (kepler-estimate); goversion names the C++ compiler", MetricType::gauge,
            {{"arch", f.arch}, {"branch", f.branch}, {"revision", f.revision}, {"version", f.version}, {"goversion", __VERSION__}}, 1);
}

}  // namespace

void add_kepler010(Exposition& out, const EstimatorSnapshot& est, const ExportOptions& options) {
    const Context ctx{est.ledger, clean_label(est.node_name)};
    add_build_info(out);
    if (ctx.ledger.frames() == 0) return;
    add_node(out, ctx);
    add_containers(out, ctx);
    const LevelFamilies pods = level_families(out, "pod");
    for (const auto& [pod_id, p] : ctx.ledger.pods()) {
        add_entity(out, pods, ctx,
                   {{"pod_id", clean_label(pod_id)}, {"pod_name", clean_label(p.pod_name)}, {"pod_namespace", clean_label(p.namespace_name)}},
                   p.energy);
    }
    const LevelFamilies vms = level_families(out, "vm");
    for (const auto& [_, v] : ctx.ledger.vms()) {
        add_entity(out, vms, ctx, {{"vm_id", clean_label(v.vm_id)}, {"vm_name", clean_label(v.vm_name)}, {"hypervisor", v.hypervisor}},
                   v.energy);
    }
    if (options.process_metrics) add_processes(out, ctx);
}

}  // namespace kepler::estimate::families
