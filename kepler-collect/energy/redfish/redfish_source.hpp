// redfish_source.hpp — the node's BMC as an energy source: one platform zone per power supply (or
// PowerControl entry), read on a thread of its own every poll interval, so that a BMC that is slow,
// refuses, answers garbage or disappears never delays a frame. Each reading is stamped with the time it
// arrived; the frame loop turns the newest readings into energy up to its own time (held power, or the
// supply's own EnergykWh counter where the BMC publishes one) and marks zones whose newest reading is
// older than max_age as stale.
#pragma once

#include <memory>

#include "energy/energy_source.hpp"
#include "energy/redfish/bmc_config.hpp"
#include "energy/redfish/redfish_client.hpp"

namespace kepler::collect {

/// Discovers the BMC's meters (blocking, bounded by the request timeout per document) and starts
/// polling. Throws RedfishError or BmcConfigError with the reason when the BMC offers nothing to read.
[[nodiscard]] std::unique_ptr<EnergySource> make_redfish_source(const BmcConfig& config);

/// A zone's name: "<chassis id>/<source id>", cut to fit the protocol's 32 bytes.
[[nodiscard]] std::string redfish_zone_name(const RedfishMeter& meter);

}  // namespace kepler::collect
