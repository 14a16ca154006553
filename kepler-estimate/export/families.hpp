// Private to export/: the helpers that the Kepler 0.7 and Kepler >= 0.10 name sets share. Each set is
// one function over a snapshot of the estimator (the caller's own copy: no lock is held while the
// exposition is written).
#pragma once

#include <array>
#include <optional>
#include <string>

#include "pipeline/estimator.hpp"
#include "export/exposition.hpp"
#include "export/prometheus_export.hpp"

namespace kepler::estimate::families {

[[nodiscard]] inline double joules(uint64_t uj) { return static_cast<double>(uj) / 1e6; }
/// Length of the latest interval; 1 s before the first frame so that watts are 0, not NaN.
[[nodiscard]] double interval_or_one(const Ledger& ledger);

/// Per zone kind (sockets summed) and per mode, the total over the slots that count in totals. Indexed
/// by ZoneKind, empty where the node has no such zone: a scrape builds two per entity (22,000 series for
/// 1,000 processes), so no allocation.
struct ByKind {
    std::array<std::optional<EnergyPair>, kZoneKindCount> zones{};
    EnergyPair total;
    [[nodiscard]] const std::optional<EnergyPair>& zone(ZoneKind kind) const { return zones.at(static_cast<size_t>(kind)); }
};
[[nodiscard]] ByKind by_kind(const Ledger& ledger, const std::vector<EnergyPair>& energy);

/// Kepler names a meter by where it reads it ("rapl-sysfs", "acpi") and anything else "estimator".
[[nodiscard]] bool is_meter(std::string_view source);
/// Kepler's `state` (>= 0.10): "running" while the collector lists the workload, then "terminated"
/// until the series expire after --retention.
[[nodiscard]] const char* state(const Ledger& ledger, const EntityEnergy& energy);

/// Processes with series (not refused by the series cap), by (pid, start time): the order is stable.
[[nodiscard]] std::vector<std::pair<ProcessKey, const ProcessEntry*>> exported_processes(const Ledger& ledger);

void add_kepler07(Exposition& out, const EstimatorSnapshot& est, const ExportOptions& options);
void add_kepler010(Exposition& out, const EstimatorSnapshot& est, const ExportOptions& options);
/// kepler_platform_watts and kepler_platform_joules_total: the same in both name sets, written once.
void add_platform(Exposition& out, const EstimatorSnapshot& est);

}  // namespace kepler::estimate::families
