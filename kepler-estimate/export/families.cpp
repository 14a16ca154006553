#include "export/families.hpp"

#include "export/build_info.hpp"  // generated

namespace kepler_estimate::families {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

void FamilyBuilder::add(const std::string& name, const std::string& help, MetricType type, Labels labels, double value) {
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

std::vector<MetricFamily> FamilyBuilder::take() {
    std::vector<MetricFamily> out;
    for (auto& [_, f] : families_) out.push_back(std::move(f));
    families_.clear();
    return out;
}

double interval_or_one(const Ledger& ledger) { return ledger.interval_s() > 0 ? ledger.interval_s() : 1.0; }

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

bool is_meter(std::string_view source) {
    return source == "rapl" || source == "hwmon" || source == "acpi" || source == "meter";  // measured_model.cpp names
}

const char* state(const Ledger& ledger, const EntityEnergy& energy) {
    return energy.last_seen_ns >= ledger.node().last_seen_ns ? "running" : "terminated";
}

const BuildFacts& build_facts() {
    static const BuildFacts facts{KEPLER_ESTIMATE_VERSION, KEPLER_ESTIMATE_REVISION, KEPLER_ESTIMATE_BRANCH,
                                  KEPLER_ESTIMATE_OS, KEPLER_ESTIMATE_ARCH};
    return facts;
}

}  // namespace kepler_estimate::families
