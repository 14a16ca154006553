#include "export/prometheus_export.hpp"

#include <fmt/format.h>
#include <prometheus/text_serializer.h>

#include <algorithm>
#include <map>

namespace kepler_estimate {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

namespace {

using Labels = std::vector<ClientMetric::Label>;

/// Families by name, so that series of several zones/sockets land in one family. Not thread-safe.
class FamilyBuilder {
public:
    void add(const std::string& name, const std::string& help, MetricType type, Labels labels, double value) {
        MetricFamily& f = families_[name];
        if (f.name.empty()) {
            f.name = name;
            f.help = help;
            f.type = type;
        }
        ClientMetric m;
        m.label = std::move(labels);
        if (type == MetricType::Counter) m.counter.value = value;
        else m.gauge.value = value;
        f.metric.push_back(std::move(m));
    }
    void add_family(MetricFamily family) { families_[family.name] = std::move(family); }
    std::vector<MetricFamily> take() {
        std::vector<MetricFamily> out;
        for (auto& [_, f] : families_) out.push_back(std::move(f));
        return out;
    }

private:
    std::map<std::string, MetricFamily> families_;  // sorted: identical input gives identical text
};

double joules(uint64_t uj) { return static_cast<double>(uj) / 1e6; }

/// Per zone kind (sockets summed) and per mode, the total over the slots that count in totals.
struct ByKind {
    std::map<ZoneKind, EnergyPair> zones;
    EnergyPair total;
};

ByKind by_kind(const Ledger& ledger, const std::vector<EnergyPair>& energy) {
    ByKind out;
    for (size_t z = 0; z < energy.size() && z < ledger.zones().size(); ++z) {
        EnergyPair& k = out.zones[ledger.zones()[z].kind];
        k.dynamic_uj += energy[z].dynamic_uj;
        k.idle_uj += energy[z].idle_uj;
        if (ledger.counts_in_total(z)) {
            out.total.dynamic_uj += energy[z].dynamic_uj;
            out.total.idle_uj += energy[z].idle_uj;
        }
    }
    return out;
}

Labels with_mode(Labels labels, const char* mode) {
    labels.push_back({"mode", mode});
    return labels;
}

/// kepler_<level>_joules_total, kepler_<level>_<zone>_joules_total and kepler_<level>_watts.
void add_workload(FamilyBuilder& b, const Ledger& ledger, const std::string& level, const Labels& labels,
                  const EntityEnergy& energy) {
    const ByKind total = by_kind(ledger, energy.total);
    const ByKind interval = by_kind(ledger, energy.interval);
    const double dt = ledger.interval_s() > 0 ? ledger.interval_s() : 1.0;
    for (const char* mode : {"dynamic", "idle"}) {
        const bool dynamic = mode[0] == 'd';
        auto pick = [&](const EnergyPair& e) { return dynamic ? e.dynamic_uj : e.idle_uj; };
        b.add(fmt::format("kepler_{}_joules_total", level), fmt::format("Energy of the {} over all its zones, in joules", level),
              MetricType::Counter, with_mode(labels, mode), joules(pick(total.total)));
        b.add(fmt::format("kepler_{}_watts", level), fmt::format("Power of the {} over the last interval, in watts", level),
              MetricType::Gauge, with_mode(labels, mode), joules(pick(interval.total)) / dt);
        for (const auto& [kind, e] : total.zones) {
            b.add(fmt::format("kepler_{}_{}_joules_total", level, zone_name(kind)),
                  fmt::format("Energy of the {} in zone {}, in joules", level, zone_name(kind)), MetricType::Counter,
                  with_mode(labels, mode), joules(pick(e)));
        }
    }
}

void add_node(FamilyBuilder& b, const Estimator& est) {
    const Ledger& ledger = est.ledger();
    const EntityEnergy& node = ledger.node();
    const double dt = ledger.interval_s() > 0 ? ledger.interval_s() : 1.0;
    for (size_t z = 0; z < node.total.size() && z < ledger.zones().size(); ++z) {
        const ZoneKey& zone = ledger.zones()[z];
        const Labels labels = {{"package", socket_label(zone.socket)},
                               {"instance", clean_label(est.node_name())},
                               {"source", clean_label(ledger.node_sources()[z])}};
        for (const char* mode : {"dynamic", "idle"}) {
            const bool dynamic = mode[0] == 'd';
            const uint64_t total = dynamic ? node.total[z].dynamic_uj : node.total[z].idle_uj;
            const uint64_t interval = dynamic ? node.interval[z].dynamic_uj : node.interval[z].idle_uj;
            b.add(fmt::format("kepler_node_{}_joules_total", zone_name(zone.kind)),
                  fmt::format("Node energy in zone {} (primary model), in joules", zone_name(zone.kind)), MetricType::Counter,
                  with_mode(labels, mode), joules(total));
            b.add(fmt::format("kepler_node_{}_watts", zone_name(zone.kind)),
                  fmt::format("Node power in zone {} over the last interval (primary model), in watts", zone_name(zone.kind)),
                  MetricType::Gauge, with_mode(labels, mode), joules(interval) / dt);
        }
    }
}

/// The estimates channel of an external model (PROTOCOL.md §8): how its answers fared.
void add_external(FamilyBuilder& b, const std::string& model, const ExternalReport& x) {
    b.add("kepler_model_external_info", "External model behind an estimates segment: its own name and version",
          MetricType::Gauge,
          {{"model", model}, {"segment", clean_label(x.segment)}, {"producer", clean_label(x.producer)},
           {"version", clean_label(x.version)}},
          1);
    const AnswerCounts& c = x.counts;
    const std::string help = "Answers of an external model matched to a frame: ready (there when the frame was estimated), "
                             "on_time (within one interval) or late";
    b.add("kepler_model_answers_total", help, MetricType::Counter, {{"model", model}, {"timing", "ready"}},
          static_cast<double>(c.used));
    b.add("kepler_model_answers_total", help, MetricType::Counter, {{"model", model}, {"timing", "on_time"}},
          static_cast<double>(c.answers - c.used - c.late));
    b.add("kepler_model_answers_total", help, MetricType::Counter, {{"model", model}, {"timing", "late"}},
          static_cast<double>(c.late));
    b.add("kepler_model_missing_answers_total", "Frames an external model did not answer while the estimator remembered them",
          MetricType::Counter, {{"model", model}}, static_cast<double>(c.missing));
    b.add("kepler_model_rejected_answers_total",
          "Answers refused: invalid rows, wrong segment kind, unknown or forgotten frame, duplicates", MetricType::Counter,
          {{"model", model}}, static_cast<double>(c.rejected));
    b.add("kepler_model_dropped_answers_total",
          "Estimates frames not read: the producer published faster than the estimator takes them", MetricType::Counter,
          {{"model", model}}, static_cast<double>(x.arrivals_dropped));
    if (x.last_lag_s) {
        b.add("kepler_model_answer_lag_seconds", "From reading a frame to the arrival of its latest matched answer",
              MetricType::Gauge, {{"model", model}}, *x.last_lag_s);
    }
}

void add_models(FamilyBuilder& b, const Estimator& est) {
    for (const ModelReport& r : est.models().reports()) {
        const std::string model = clean_label(r.name);
        b.add("kepler_model_info", "Configured node models; selected=\"true\" is the one behind the kepler_node/container names",
              MetricType::Gauge, {{"model", model}, {"kind", r.kind}, {"selected", r.selected ? "true" : "false"}, {"reason", clean_label(r.reason)}}, 1);
        b.add("kepler_model_loads_total", "Model files loaded (first load and reloads)", MetricType::Counter, {{"model", model}},
              static_cast<double>(r.loads));
        b.add("kepler_model_load_errors_total", "Model files rejected as bad (the previous model keeps running)",
              MetricType::Counter, {{"model", model}}, static_cast<double>(r.load_errors));
        b.add("kepler_model_prediction_errors_total", "Predictions that failed", MetricType::Counter, {{"model", model}},
              static_cast<double>(r.estimate_errors));
        for (const auto& [kind, uj] : r.energy_uj) {
            const Labels labels = {{"model", model}, {"zone", std::string(zone_name(kind))}};
            b.add("kepler_model_node_joules_total", "Node energy according to each model, in joules", MetricType::Counter, labels,
                  joules(uj));
        }
        for (const auto& [kind, w] : r.watts) {
            b.add("kepler_model_node_watts", "Node power according to each model over the last interval, in watts",
                  MetricType::Gauge, {{"model", model}, {"zone", std::string(zone_name(kind))}}, w);
        }
        for (const auto& [kind, w] : r.abs_error_w) {
            b.add("kepler_model_absolute_error_watts", "Absolute error against the power meter over the last interval, in watts",
                  MetricType::Gauge, {{"model", model}, {"zone", std::string(zone_name(kind))}}, w);
        }
        for (const auto& [kind, m] : r.mape) {
            b.add("kepler_model_mape_ratio", "Rolling mean absolute percentage error against the meter, as a ratio",
                  MetricType::Gauge, {{"model", model}, {"zone", std::string(zone_name(kind))}}, m);
        }
        if (r.external) add_external(b, model, *r.external);
    }
}

void add_health(FamilyBuilder& b, const Estimator& est, bool timing) {
    const Health& h = est.health();
    b.add("kepler_estimator_frames_read_total", "Frames the estimator read", MetricType::Counter, {}, static_cast<double>(h.frames_read));
    b.add("kepler_estimator_frames_missed_total", "Frames published by the collector that the estimator never read",
          MetricType::Counter, {}, static_cast<double>(h.frames_missed));
    b.add("kepler_estimator_frames_rejected_total", "Broken frames skipped", MetricType::Counter, {}, static_cast<double>(h.frames_rejected));
    b.add("kepler_estimator_frames_unestimated_total", "Frames no model could estimate", MetricType::Counter, {},
          static_cast<double>(h.frames_unestimated));
    b.add("kepler_estimator_collector_generations_total",
          "New collector segment generations followed after the first (collector restarts and segment growth)",
          MetricType::Counter, {}, static_cast<double>(h.generations_followed));
    b.add("kepler_estimator_uncovered_seconds_total",
          "Time between frames that no interval covers (collector down): energy nobody measured", MetricType::Counter,
          {}, h.uncovered_seconds);
    uint64_t model_errors = 0;
    for (const ModelReport& r : est.models().reports()) model_errors += r.load_errors + r.estimate_errors;
    b.add("kepler_estimator_model_errors_total", "Model load and prediction errors, all models", MetricType::Counter, {},
          static_cast<double>(model_errors));
    b.add("kepler_estimator_process_series_refused_total", "Processes left without series by the series cap",
          MetricType::Counter, {}, static_cast<double>(est.ledger().process_series_refused()));
    if (!timing) return;
    MetricFamily latency{"kepler_estimator_frame_latency_seconds", "Time to estimate one frame", MetricType::Histogram, {}};
    ClientMetric m;
    uint64_t cumulative = 0;
    for (size_t i = 0; i < h.latency_buckets.size(); ++i) {
        cumulative += h.latency_buckets[i];
        const double bound = i < kLatencyBounds.size() ? kLatencyBounds[i] : std::numeric_limits<double>::infinity();
        m.histogram.bucket.push_back({cumulative, bound});
    }
    m.histogram.sample_count = cumulative;
    m.histogram.sample_sum = h.latency_sum_s;
    latency.metric.push_back(std::move(m));
    b.add_family(std::move(latency));
}

}  // namespace

std::string clean_label(std::string_view text) {
    std::string out(text);
    for (char& c : out) {
        const auto u = static_cast<unsigned char>(c);
        if (u < 0x20 || u >= 0x7f) c = '_';
    }
    return out;
}

std::vector<MetricFamily> PrometheusExport::Collect() const {
    std::lock_guard lock(estimator_.mutex());
    FamilyBuilder b;
    const Ledger& ledger = estimator_.ledger();
    add_node(b, estimator_);
    for (const auto& [_, c] : ledger.containers()) {
        add_workload(b, ledger, "container",
                     {{"container_id", clean_label(c.container_id)}, {"pod_name", clean_label(c.pod_name)},
                      {"container_name", clean_label(c.container_name)}, {"container_namespace", clean_label(c.namespace_name)}},
                     c.energy);
    }
    for (const auto& [_, p] : ledger.pods()) {
        add_workload(b, ledger, "pod", {{"pod_name", clean_label(p.pod_name)}, {"container_namespace", clean_label(p.namespace_name)}},
                     p.energy);
    }
    for (const auto& [name, n] : ledger.namespaces()) add_workload(b, ledger, "namespace", {{"container_namespace", clean_label(name)}}, n);
    for (const auto& [_, v] : ledger.vms()) {
        add_workload(b, ledger, "vm", {{"vm_id", clean_label(v.vm_id)}, {"vm_name", clean_label(v.vm_name)}}, v.energy);
    }
    if (options_.process_metrics) {
        std::vector<std::pair<ProcessKey, const ProcessEntry*>> procs;
        for (const auto& [key, p] : ledger.processes()) {
            if (p.exported) procs.emplace_back(key, &p);
        }
        std::sort(procs.begin(), procs.end(), [](const auto& a, const auto& b) {
            return std::tie(a.first.pid, a.first.start_time_ticks) < std::tie(b.first.pid, b.first.start_time_ticks);
        });
        for (const auto& [key, p] : procs) {
            add_workload(b, ledger, "process",
                         {{"pid", std::to_string(key.pid)}, {"start_time", std::to_string(key.start_time_ticks)},
                          {"container_id", clean_label(p->container_id)}, {"vm_id", clean_label(p->vm_id)},
                          {"command", clean_label(p->command)}},
                         p->energy);
        }
    }
    add_models(b, estimator_);
    add_health(b, estimator_, options_.include_timing);
    return b.take();
}

std::string to_text(const std::vector<MetricFamily>& families) { return prometheus::TextSerializer().Serialize(families); }

}  // namespace kepler_estimate
