// redfish_client.hpp — a BMC's power readings over Redfish (DMTF DSP0266): a session (X-Auth-Token,
// logged in again when the BMC says 401) or Basic authentication, discovery through the Chassis
// collection, and one reading per power supply (PowerSubsystem → PowerSupplies → Metrics, the wall
// side's InputPowerWatts and, where published, EnergykWh) or, on BMCs without PowerSubsystem, per
// PowerControl entry of the older Power resource (PowerConsumedWatts). Every response is bounded in
// size and time, on one kept-open connection. Blocking, and used by one thread at a time: the collector
// calls it from its own thread (redfish_source.hpp).
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "energy/redfish/bmc_config.hpp"
#include "support/http/http_client.hpp"

namespace kepler::collect {

/// The BMC cannot be read: transport, TLS, status, or a document that is not what Redfish says.
class RedfishError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

/// One meter of the BMC, as discovered.
struct RedfishMeter {
    std::string chassis_id;
    std::string source_id;    // PowerSupply Id, or PowerControl MemberId
    std::string source_name;  // its Name
    uint32_t detail = 0;      // enum keplershm_meter_detail: POWER_SUPPLY or POWER_CONTROL
    std::string url;          // PowerSupplyMetrics, or the chassis's Power resource
    size_t control_index = 0; // PowerControl entry
};

struct RedfishReading {
    std::optional<double> watts;       // nullopt: the BMC gave no usable number
    std::optional<double> energy_kwh;  // a power supply's own counter, where published
};

class RedfishClient {
public:
    explicit RedfishClient(BmcConfig config);
    RedfishClient(const RedfishClient&) = delete;
    RedfishClient& operator=(const RedfishClient&) = delete;
    /// Ends the session (best effort, short timeout).
    ~RedfishClient();

    /// Every chassis's power supplies, else its PowerControl entries. Throws RedfishError when the BMC
    /// answers no usable meter at all.
    [[nodiscard]] std::vector<RedfishMeter> discover();
    /// One reading per meter, in order; throws RedfishError when the BMC cannot be reached at all (a
    /// meter whose document lacks a number gets an empty reading instead).
    [[nodiscard]] std::vector<RedfishReading> read(const std::vector<RedfishMeter>& meters);
    /// Session logins so far (a new one after each 401 or expiry).
    [[nodiscard]] int logins() const noexcept { return logins_; }

    /// A Redfish document at `path` ("/redfish/v1/..."): authenticated, logged in again once on 401.
    [[nodiscard]] nlohmann::json get(const std::string& path);

private:
    /// A request to `url` with this BMC's TLS settings, time limits and size bound.
    [[nodiscard]] support::HttpRequest request_to(std::string url) const;
    void log_in();
    void log_out() noexcept;

    BmcConfig config_;
    support::HttpConnection connection_;  // kept open between polls: no TLS handshake per request
    std::string token_;
    std::string session_url_;
    std::string sessions_path_;
    int logins_ = 0;
};

/// Reads a Redfish power value: a number, or an excerpt object {"Reading": number}. nullopt for null,
/// absent, negative, non-finite or implausible (> 1 MW) values.
[[nodiscard]] std::optional<double> redfish_watts(const nlohmann::json& value);
/// The same for any reading, with its own upper bound (an energy counter in kWh grows for years).
[[nodiscard]] std::optional<double> redfish_reading(const nlohmann::json& value, double max);

}  // namespace kepler::collect
