// fake_bmc.hpp — a server's BMC as a Redfish (DMTF) service over real HTTPS on 127.0.0.1, for the
// collector's platform-power client: the client under test speaks the real protocol (session login, Basic
// auth, JSON documents, TLS with the BMC's self-signed certificate) to a real socket.
//
// The tree follows DMTF's public mockup "public-rackmount1" (Redfish-Mockup-Server), with its property
// names and shapes, cut down to what power readings need:
//   /redfish/v1                                       ServiceRoot (readable without credentials)
//   /redfish/v1/SessionService[/Sessions[/<n>]]       login: POST Sessions; logout: DELETE Sessions/<n>
//   /redfish/v1/Chassis[/<chassis>]
//   /redfish/v1/Chassis/<chassis>/PowerSubsystem/PowerSupplies[/<psu>[/Metrics]]   the modern API
//   /redfish/v1/Chassis/<chassis>/Power               the deprecated API (PowerControl, PowerSupplies)
// Every other resource needs an X-Auth-Token of a live session or Basic credentials, as the options allow;
// refusals and unknown paths are answered with a Redfish error body ({"error":{"code":..,"message":..}}).
//
// Power supply states, as BMCs report them: "Enabled" has readings; any other state (e.g.
// "UnavailableOffline") keeps its Metrics resource with null readings; "Absent" has no Metrics at all.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "fakes/http_server.hpp"

namespace kepler::testing {

struct FakeBmcOptions {
    bool tls = true;               // HTTPS with the BMC's own self-signed certificate, else plain HTTP
    bool power_subsystem = true;   // publish Chassis/<id>/PowerSubsystem (the modern API)
    bool power_control = true;     // publish Chassis/<id>/Power (PowerControl, the deprecated API)
    std::vector<std::string> chassis = {"1U"};
    std::vector<std::string> power_supplies = {"Bay1", "Bay2"};  // in each chassis
    bool energy_kwh = false;       // PowerSupplyMetrics has EnergykWh
    std::string username = "admin";
    std::string password = "secret";
    bool accept_basic = true;      // Authorization: Basic is accepted
    bool accept_sessions = true;   // the SessionService exists (login with POST, X-Auth-Token after)
    size_t huge_body_bytes = 100'000'000;  // the body's size under Fault::huge
};

class FakeBmc {
public:
    enum class Fault {
        none,
        unavailable,  // 503 (with Retry-After) to every request
        slow,         // every answer comes after `slow_seconds` (sooner if the fault is changed)
        huge,         // 200 with a valid JSON document of options.huge_body_bytes
        malformed,    // the usual status and headers, with the JSON body cut in half
        hang,         // the request is read and never answered until the fault changes or the BMC stops
    };

    /// Starts serving; the certificate (under TLS) is made in `cert_dir`. Throws std::runtime_error when the
    /// certificate cannot be made or the server cannot listen.
    FakeBmc(FakeBmcOptions options, const std::filesystem::path& cert_dir);
    FakeBmc(const FakeBmc&) = delete;
    FakeBmc& operator=(const FakeBmc&) = delete;
    /// Prompt even under Fault::slow or Fault::hang: a waiting request is released first.
    ~FakeBmc();

    /// "https://127.0.0.1:<port>" (or http:// without TLS), without a trailing slash.
    [[nodiscard]] std::string url() const;
    /// The server's self-signed certificate, to pass to a client as its CA file; empty without TLS.
    [[nodiscard]] std::filesystem::path ca_file() const;

    // Readings and states; each setter throws std::invalid_argument for a chassis or PSU not in the options.
    /// InputPowerWatts (and the legacy PowerInputWatts); OutputPowerWatts follows at 94 %. Default 150 W.
    void set_input_watts(const std::string& chassis, const std::string& psu, double watts);
    /// Status.State: "Enabled" (the default), "UnavailableOffline", "Absent", ...
    void set_power_supply_state(const std::string& chassis, const std::string& psu, std::string state);
    /// EnergykWh.Reading (published only with options.energy_kwh). Default 0.
    void set_energy_kwh(const std::string& chassis, const std::string& psu, double kwh);
    /// PowerControl[0].PowerConsumedWatts; until set, the sum of the enabled supplies' input watts.
    void set_consumed_watts(const std::string& chassis, double watts);

    void set_fault(Fault fault, double slow_seconds = 5.0);
    /// Every session token becomes invalid (as when a BMC times sessions out or reboots): 401 on next use.
    void expire_sessions();

    [[nodiscard]] int logins() const;        // successful session logins so far
    [[nodiscard]] size_t requests() const;   // requests answered so far
    [[nodiscard]] std::vector<FakeHttpServer::Request> request_log() const;

private:
    struct PowerSupply {
        double input_watts = 150.0;
        std::string state = "Enabled";
        double energy_kwh = 0.0;
    };
    struct Chassis {
        std::map<std::string, PowerSupply> supplies;
        std::optional<double> consumed_watts;
    };
    using Response = FakeHttpServer::Response;
    using Request = FakeHttpServer::Request;

    Response handle(const Request& request);
    void wait_out_fault(std::unique_lock<std::mutex>& lock);
    Response route(const Request& request, const std::vector<std::string>& path);
    Response login(const Request& request);
    Response session_request(const Request& request, const std::vector<std::string>& path);
    [[nodiscard]] bool authorized(const Request& request) const;
    [[nodiscard]] nlohmann::json document(const std::vector<std::string>& path) const;  // null: none there
    [[nodiscard]] nlohmann::json service_root() const;
    [[nodiscard]] nlohmann::json sessions_document() const;
    [[nodiscard]] nlohmann::json chassis_document(const std::string& id) const;
    [[nodiscard]] nlohmann::json chassis_power_document(const std::string& id, const std::vector<std::string>& rest) const;
    [[nodiscard]] nlohmann::json power_supply_document(const std::string& chassis, const std::string& psu) const;
    [[nodiscard]] nlohmann::json metrics_document(const std::string& chassis, const std::string& psu) const;
    [[nodiscard]] nlohmann::json power_document(const std::string& chassis) const;
    [[nodiscard]] const PowerSupply* find_supply(const std::string& chassis, const std::string& psu) const;
    PowerSupply& supply(const std::string& chassis, const std::string& psu);

    const FakeBmcOptions options_;
    const std::string basic_credentials_;  // the Authorization header that Basic auth must send
    std::optional<TlsFiles> tls_files_;
    mutable std::mutex mutex_;  // guards what follows: the test's thread sets it, the server's connection threads read it
    std::condition_variable fault_changed_;  // wakes slow and hung requests
    std::map<std::string, Chassis> chassis_;
    std::map<std::string, std::string> sessions_;  // token → session id
    int next_session_ = 1;
    int logins_ = 0;
    Fault fault_ = Fault::none;
    double slow_seconds_ = 5.0;
    unsigned fault_generation_ = 0;  // a waiting request stops waiting once the fault was set again
    bool stopping_ = false;
    std::unique_ptr<FakeHttpServer> server_;  // last: stopped (and joined) before the state it reads goes
};

}  // namespace kepler::testing
