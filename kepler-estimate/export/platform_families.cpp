// Platform power (whole node, wall side) per meter, under both name sets: Kepler 0.11's
// kepler_platform_watts with its labels (source, node_name, bmc_id, chassis_id, source_id, source_name,
// source_type), and kepler_platform_joules_total, ours (Kepler reads the BMC at scrape time and has no
// energy counter): the same meters' energy since the estimator started, never decreasing.
#include "export/families.hpp"

namespace kepler::estimate::families {

void add_platform(Exposition& out, const EstimatorSnapshot& est) {
    if (est.ledger.platform_meters().empty()) return;
    Exposition::Family& watts = out.family("kepler_platform_watts",
                                           "Platform (whole node, wall side) power per meter, in watts: a BMC's power "
                                           "supplies or chassis, PMBus power supplies, ACPI power meters",
                                           MetricType::gauge);
    Exposition::Family& joules_total = out.family("kepler_platform_joules_total",
                                                  "Platform energy per meter since the exporter started, in joules",
                                                  MetricType::counter);
    const std::string node = clean_label(est.node_name);
    for (const auto& [zone, m] : est.ledger.platform_meters()) {
        // Kepler 0.11 names the PSU in source_name; frames carry its id, which names it as well.
        const LabelSet labels = {{"source", m.source},           {"node_name", node},
                                 {"bmc_id", clean_label(m.bmc_id)}, {"chassis_id", clean_label(m.chassis_id)},
                                 {"source_id", clean_label(m.source_id)}, {"source_name", clean_label(m.source_id)},
                                 {"source_type", m.source_type}};
        out.add(joules_total, labels, joules(m.total_uj));
        if (m.fresh) out.add(watts, labels, m.watts);  // a stale reading is not a value
    }
}

}  // namespace kepler::estimate::families
