#include "export/families.hpp"

#include <algorithm>

namespace kepler::estimate::families {

double interval_or_one(const Ledger& ledger) { return ledger.interval_s() > 0 ? ledger.interval_s() : 1.0; }

ByKind by_kind(const Ledger& ledger, const std::vector<EnergyPair>& energy) {
    ByKind out;
    for (size_t z = 0; z < energy.size() && z < ledger.zones().size(); ++z) {
        std::optional<EnergyPair>& slot = out.zones.at(static_cast<size_t>(ledger.zones()[z].kind));
        EnergyPair& k = slot ? *slot : slot.emplace();
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
    // The meters' names, as measured_model.cpp labels zones: every power source the library names.
    for (uint32_t power = KEPLERSHM_POWER_RAPL; power <= KEPLERSHM_POWER_PMBUS; ++power) {
        if (source == keplershm::power_source_name(power)) return true;
    }
    return false;
}

const char* state(const Ledger& ledger, const EntityEnergy& energy) {
    return energy.last_seen_ns >= ledger.node().last_seen_ns ? "running" : "terminated";
}

std::vector<std::pair<ProcessKey, const ProcessEntry*>> exported_processes(const Ledger& ledger) {
    std::vector<std::pair<ProcessKey, const ProcessEntry*>> procs;
    for (const auto& [key, p] : ledger.processes()) {
        if (p.exported) procs.emplace_back(key, &p);
    }
    std::sort(procs.begin(), procs.end(), [](const auto& x, const auto& y) {
        return std::tie(x.first.pid, x.first.start_time_ticks) < std::tie(y.first.pid, y.first.start_time_ticks);
    });
    return procs;
}

}  // namespace kepler::estimate::families
