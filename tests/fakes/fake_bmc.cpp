#include "fake_bmc.hpp"

#include <openssl/evp.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <random>
#include <stdexcept>

namespace kepler::testing {

namespace {

using nlohmann::json;
using Response = FakeHttpServer::Response;

const std::string kRoot = "/redfish/v1";

json link(const std::string& odata_id) { return json{{"@odata.id", odata_id}}; }

json collection(const std::string& type, const std::string& name, const std::string& odata_id,
                const std::vector<std::string>& member_ids) {
    json members = json::array();
    for (const std::string& id : member_ids) members.push_back(link(odata_id + "/" + id));
    return {{"@odata.type", type}, {"@odata.id", odata_id}, {"Name", name}, {"Members@odata.count", members.size()},
            {"Members", members}};
}

/// A Redfish error body: the general code, with the specific message in @Message.ExtendedInfo as BMCs send it.
Response error(int status, const std::string& message_id, const std::string& message) {
    const json body = {{"error",
                        {{"code", "Base.1.8.GeneralError"},
                         {"message", message},
                         {"@Message.ExtendedInfo",
                          json::array({{{"@odata.type", "#Message.v1_1_1.Message"},
                                        {"MessageId", "Base.1.8." + message_id},
                                        {"Message", message},
                                        {"Severity", "Critical"}}})}}}};
    return Response{status, body.dump(), {}};
}

Response ok(int status, const json& document) { return Response{status, document.dump(), {}}; }

/// "/redfish/v1/Chassis/1U/?$expand=." → {"redfish", "v1", "Chassis", "1U"}: the query is ignored, like the
/// trailing slash that BMCs accept on every URI.
std::vector<std::string> split_path(const std::string& target) {
    const std::string path = target.substr(0, target.find_first_of("?#"));
    std::vector<std::string> segments;
    size_t start = 0;
    while (start <= path.size()) {
        const size_t end = std::min(path.find('/', start), path.size());
        if (end > start) segments.push_back(path.substr(start, end - start));
        start = end + 1;
    }
    return segments;
}

std::string base64(const std::string& text) {
    std::string encoded(4 * ((text.size() + 2) / 3) + 1, '\0');
    const int length = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(encoded.data()),
                                       reinterpret_cast<const unsigned char*>(text.data()), static_cast<int>(text.size()));
    encoded.resize(static_cast<size_t>(length));
    return encoded;
}

std::string random_token() {
    std::random_device random;
    std::string token;
    char hex[9];
    for (int i = 0; i < 4; ++i) {
        std::snprintf(hex, sizeof hex, "%08x", static_cast<unsigned>(random()));
        token += hex;
    }
    return token;
}

/// "Bay1" → "Power Supply Bay 1", as the mockup names its bays; any other id → "Power Supply <id>".
std::string power_supply_name(const std::string& psu) {
    if (psu.size() > 3 && psu.starts_with("Bay")) return "Power Supply Bay " + psu.substr(3);
    return "Power Supply " + psu;
}

json status_of(const std::string& state) {
    if (state == "Absent") return {{"State", state}};
    return {{"State", state}, {"Health", state == "Enabled" ? "OK" : "Warning"}};
}

/// A reading as BMCs publish it: null when the supply does not measure (offline, absent).
json reading(bool measured, double value) { return measured ? json(value) : json(nullptr); }

/// A valid JSON document of about `bytes`: parseable, so that only a client's size limit refuses it.
std::string huge_document(const std::string& odata_id, size_t bytes) {
    std::string document = R"({"@odata.id":")" + odata_id + R"(","Oem":{"Padding":")";
    document.append(bytes > document.size() ? bytes - document.size() : 0, 'x');
    document += R"("}})";
    return document;
}

std::string unique_certificate_stem() {
    static std::atomic<int> made{0};
    return "fake-bmc-" + std::to_string(getpid()) + "-" + std::to_string(made++);
}

}  // namespace

FakeBmc::FakeBmc(FakeBmcOptions options, const std::filesystem::path& cert_dir)
    : options_(std::move(options)), basic_credentials_("Basic " + base64(options_.username + ":" + options_.password)) {
    for (const std::string& chassis : options_.chassis) {
        for (const std::string& psu : options_.power_supplies) chassis_[chassis].supplies[psu] = PowerSupply{};
    }
    if (options_.tls) {
        tls_files_ = make_test_certificate(cert_dir, unique_certificate_stem());
        if (!tls_files_) throw std::runtime_error("fake BMC: openssl could not make a certificate in " + cert_dir.string());
    }
    server_ = std::make_unique<FakeHttpServer>([this](const Request& request) { return handle(request); }, tls_files_);
}

FakeBmc::~FakeBmc() {
    {
        std::lock_guard lock(mutex_);
        stopping_ = true;
    }
    // Slow or hung requests answer now (and later ones at once, 503), so the server's connection threads
    // can be joined.
    fault_changed_.notify_all();
    server_.reset();
}

std::string FakeBmc::url() const { return server_->url(); }

std::filesystem::path FakeBmc::ca_file() const { return tls_files_ ? tls_files_->certificate : std::filesystem::path(); }

void FakeBmc::set_input_watts(const std::string& chassis, const std::string& psu, double watts) {
    std::lock_guard lock(mutex_);
    supply(chassis, psu).input_watts = watts;
}

void FakeBmc::set_power_supply_state(const std::string& chassis, const std::string& psu, std::string state) {
    std::lock_guard lock(mutex_);
    supply(chassis, psu).state = std::move(state);
}

void FakeBmc::set_energy_kwh(const std::string& chassis, const std::string& psu, double kwh) {
    std::lock_guard lock(mutex_);
    supply(chassis, psu).energy_kwh = kwh;
}

void FakeBmc::set_consumed_watts(const std::string& chassis, double watts) {
    std::lock_guard lock(mutex_);
    const auto found = chassis_.find(chassis);
    if (found == chassis_.end()) throw std::invalid_argument("fake BMC: no chassis " + chassis);
    found->second.consumed_watts = watts;
}

void FakeBmc::set_fault(Fault fault, double slow_seconds) {
    {
        std::lock_guard lock(mutex_);
        fault_ = fault;
        slow_seconds_ = slow_seconds;
        ++fault_generation_;
    }
    fault_changed_.notify_all();
}

void FakeBmc::expire_sessions() {
    std::lock_guard lock(mutex_);
    sessions_.clear();
}

int FakeBmc::logins() const {
    std::lock_guard lock(mutex_);
    return logins_;
}

size_t FakeBmc::requests() const { return server_->requests().size(); }

std::vector<FakeHttpServer::Request> FakeBmc::request_log() const { return server_->requests(); }

FakeBmc::PowerSupply& FakeBmc::supply(const std::string& chassis, const std::string& psu) {
    const auto found = chassis_.find(chassis);
    if (found == chassis_.end()) throw std::invalid_argument("fake BMC: no chassis " + chassis);
    const auto supply = found->second.supplies.find(psu);
    if (supply == found->second.supplies.end()) throw std::invalid_argument("fake BMC: no power supply " + psu + " in " + chassis);
    return supply->second;
}

const FakeBmc::PowerSupply* FakeBmc::find_supply(const std::string& chassis, const std::string& psu) const {
    const auto found = chassis_.find(chassis);
    if (found == chassis_.end()) return nullptr;
    const auto supply = found->second.supplies.find(psu);
    return supply == found->second.supplies.end() ? nullptr : &supply->second;
}

// ---- requests: faults first, then authentication, then the tree ----

FakeHttpServer::Response FakeBmc::handle(const Request& request) {
    std::unique_lock lock(mutex_);
    if (fault_ == Fault::slow || fault_ == Fault::hang) wait_out_fault(lock);
    const Fault fault = fault_;  // what the fault is now, once a slow or hung request was let go
    Response response;
    if (stopping_) {
        response = error(503, "ServiceTemporarilyUnavailable", "The fake BMC is stopping.");
    } else if (fault == Fault::unavailable) {
        response = error(503, "ServiceTemporarilyUnavailable", "The service is temporarily unavailable.");
        response.headers.emplace_back("Retry-After", "1");
    } else {
        const std::vector<std::string> path = split_path(request.target);
        response = route(request, path);
        if (fault == Fault::huge && response.status == 200) response.body = huge_document(request.target, options_.huge_body_bytes);
        if (fault == Fault::malformed) response.body.resize(response.body.size() / 2);
    }
    response.headers.emplace_back("OData-Version", "4.0");
    return response;
}

void FakeBmc::wait_out_fault(std::unique_lock<std::mutex>& lock) {
    const unsigned generation = fault_generation_;
    const auto released = [&] { return stopping_ || fault_generation_ != generation; };
    if (fault_ == Fault::slow) {
        fault_changed_.wait_for(lock, std::chrono::duration<double>(slow_seconds_), released);
    } else {
        fault_changed_.wait(lock, released);
    }
}

FakeHttpServer::Response FakeBmc::route(const Request& request, const std::vector<std::string>& path) {
    const bool in_service = path.size() >= 2 && path[0] == "redfish" && path[1] == "v1";
    if (path.size() == 1 && path[0] == "redfish" && request.method == "GET") return ok(200, {{"v1", kRoot + "/"}});
    // The ServiceRoot is public, so that a client can find the login before it has credentials.
    if (in_service && path.size() == 2 && request.method == "GET") return ok(200, service_root());
    if (in_service && path.size() >= 3 && path[2] == "SessionService" && options_.accept_sessions) {
        if (path.size() == 4 && path[3] == "Sessions" && request.method == "POST") return login(request);
    }
    if (!authorized(request)) {
        Response refusal = error(401, "NoValidSession", "There is no valid session established with the implementation.");
        if (options_.accept_basic) refusal.headers.emplace_back("WWW-Authenticate", "Basic realm=\"Redfish\"");
        return refusal;
    }
    if (in_service && path.size() == 5 && path[2] == "SessionService" && options_.accept_sessions) return session_request(request, path);
    const json found = in_service ? document(path) : json();
    if (found.is_null()) return error(404, "ResourceMissingAtURI", "The resource at the URI '" + request.target + "' was not found.");
    if (request.method != "GET") return error(405, "ActionNotSupported", "The action " + request.method + " is not supported by the resource.");
    return ok(200, found);
}

bool FakeBmc::authorized(const Request& request) const {
    const auto token = request.headers.find("x-auth-token");
    if (options_.accept_sessions && token != request.headers.end() && sessions_.contains(token->second)) return true;
    const auto authorization = request.headers.find("authorization");
    return options_.accept_basic && authorization != request.headers.end() && authorization->second == basic_credentials_;
}

FakeHttpServer::Response FakeBmc::login(const Request& request) {
    const json credentials = json::parse(request.body, nullptr, false);
    if (credentials.is_discarded() || !credentials.is_object()) return error(400, "MalformedJSON", "The request body submitted was malformed JSON.");
    if (!credentials.contains("UserName") || !credentials.contains("Password")) {
        return error(400, "PropertyMissing", "The property UserName or Password is a required property.");
    }
    if (credentials["UserName"] != options_.username || credentials["Password"] != options_.password) {
        return error(401, "ResourceAtUriUnauthorized", "While accessing the resource, the service received an authorization error.");
    }
    const std::string id = std::to_string(next_session_++);
    const std::string token = random_token();
    sessions_[token] = id;
    ++logins_;
    const std::string location = kRoot + "/SessionService/Sessions/" + id;
    Response created = ok(201, {{"@odata.type", "#Session.v1_6_0.Session"}, {"@odata.id", location}, {"Id", id},
                                {"Name", "User Session"}, {"UserName", options_.username}});
    created.headers = {{"X-Auth-Token", token}, {"Location", location}};
    return created;
}

/// /redfish/v1/SessionService/Sessions/<n>: read, or deleted to log out (its token is refused after).
FakeHttpServer::Response FakeBmc::session_request(const Request& request, const std::vector<std::string>& path) {
    const auto session = std::find_if(sessions_.begin(), sessions_.end(), [&](const auto& entry) { return entry.second == path[4]; });
    if (path[3] != "Sessions" || session == sessions_.end()) {
        return error(404, "ResourceMissingAtURI", "The resource at the URI '" + request.target + "' was not found.");
    }
    const std::string location = kRoot + "/SessionService/Sessions/" + path[4];
    if (request.method == "DELETE") {
        sessions_.erase(session);
        return Response{204, "", {}};
    }
    if (request.method != "GET") return error(405, "ActionNotSupported", "The action " + request.method + " is not supported by the resource.");
    return ok(200, {{"@odata.type", "#Session.v1_6_0.Session"}, {"@odata.id", location}, {"Id", path[4]},
                    {"Name", "User Session"}, {"UserName", options_.username}});
}

// ---- the tree, after public-rackmount1 ----

nlohmann::json FakeBmc::document(const std::vector<std::string>& path) const {
    const std::vector<std::string> rest(path.begin() + 2, path.end());  // after /redfish/v1
    if (rest.empty()) return service_root();
    if (rest.size() == 1 && rest[0] == "SessionService" && options_.accept_sessions) {
        return {{"@odata.type", "#SessionService.v1_1_8.SessionService"}, {"@odata.id", kRoot + "/SessionService"},
                {"Id", "SessionService"}, {"Name", "Session Service"}, {"ServiceEnabled", true}, {"SessionTimeout", 30},
                {"Status", status_of("Enabled")}, {"Sessions", link(kRoot + "/SessionService/Sessions")}};
    }
    if (rest.size() == 2 && rest[0] == "SessionService" && rest[1] == "Sessions" && options_.accept_sessions) return sessions_document();
    if (rest.empty() || rest[0] != "Chassis") return nullptr;
    if (rest.size() == 1) {
        return collection("#ChassisCollection.ChassisCollection", "Chassis Collection", kRoot + "/Chassis", options_.chassis);
    }
    if (!chassis_.contains(rest[1])) return nullptr;
    if (rest.size() == 2) return chassis_document(rest[1]);
    return chassis_power_document(rest[1], std::vector<std::string>(rest.begin() + 2, rest.end()));
}

nlohmann::json FakeBmc::service_root() const {
    json root = {{"@odata.type", "#ServiceRoot.v1_15_0.ServiceRoot"},
                 {"@odata.id", kRoot + "/"},
                 {"Id", "RootService"},
                 {"Name", "Root Service"},
                 {"RedfishVersion", "1.15.0"},
                 {"UUID", "92384634-2938-2342-8820-489239905423"},
                 {"Chassis", link(kRoot + "/Chassis")},
                 {"Links", json::object()}};
    if (options_.accept_sessions) {
        root["SessionService"] = link(kRoot + "/SessionService");
        root["Links"]["Sessions"] = link(kRoot + "/SessionService/Sessions");
    }
    return root;
}

nlohmann::json FakeBmc::sessions_document() const {
    std::vector<std::string> ids;
    for (const auto& [token, id] : sessions_) ids.push_back(id);
    return collection("#SessionCollection.SessionCollection", "Session Collection", kRoot + "/SessionService/Sessions", ids);
}

nlohmann::json FakeBmc::chassis_document(const std::string& id) const {
    const std::string odata_id = kRoot + "/Chassis/" + id;
    json chassis = {{"@odata.type", "#Chassis.v1_22_0.Chassis"},
                    {"@odata.id", odata_id},
                    {"Id", id},
                    {"Name", "Computer System Chassis"},
                    {"ChassisType", "RackMount"},
                    {"Manufacturer", "Contoso"},
                    {"Model", "3500RX"},
                    {"PowerState", "On"},
                    {"Status", status_of("Enabled")}};
    if (options_.power_subsystem) chassis["PowerSubsystem"] = link(odata_id + "/PowerSubsystem");
    if (options_.power_control) {
        chassis["Power@Redfish.Deprecated"] = "Please migrate to use " + odata_id + "/PowerSubsystem";
        chassis["Power"] = link(odata_id + "/Power");
    }
    return chassis;
}

/// Chassis/<id>/Power, or Chassis/<id>/PowerSubsystem and below: `rest` is the path after the chassis.
nlohmann::json FakeBmc::chassis_power_document(const std::string& id, const std::vector<std::string>& rest) const {
    const std::string subsystem = kRoot + "/Chassis/" + id + "/PowerSubsystem";
    if (rest.size() == 1 && rest[0] == "Power" && options_.power_control) return power_document(id);
    if (rest[0] != "PowerSubsystem" || !options_.power_subsystem) return nullptr;
    if (rest.size() == 1) {
        return {{"@odata.type", "#PowerSubsystem.v1_1_0.PowerSubsystem"}, {"@odata.id", subsystem},
                {"Id", "PowerSubsystem"}, {"Name", "Power Subsystem for Chassis"}, {"Status", status_of("Enabled")},
                {"PowerSupplies", link(subsystem + "/PowerSupplies")}};
    }
    if (rest[1] != "PowerSupplies") return nullptr;
    if (rest.size() == 2) {
        return collection("#PowerSupplyCollection.PowerSupplyCollection", "Power Supply Collection", subsystem + "/PowerSupplies",
                          options_.power_supplies);
    }
    const PowerSupply* supply = find_supply(id, rest[2]);
    if (supply == nullptr) return nullptr;
    if (rest.size() == 3) return power_supply_document(id, rest[2]);
    if (rest.size() == 4 && rest[3] == "Metrics" && supply->state != "Absent") return metrics_document(id, rest[2]);
    return nullptr;
}

nlohmann::json FakeBmc::power_supply_document(const std::string& chassis, const std::string& psu) const {
    const PowerSupply& supply = *find_supply(chassis, psu);
    const std::string odata_id = kRoot + "/Chassis/" + chassis + "/PowerSubsystem/PowerSupplies/" + psu;
    json document = {{"@odata.type", "#PowerSupply.v1_5_0.PowerSupply"},
                     {"@odata.id", odata_id},
                     {"Id", psu},
                     {"Name", power_supply_name(psu)},
                     {"Status", status_of(supply.state)}};
    if (supply.state == "Absent") return document;
    document["Model"] = "RKS-440DC";
    document["Manufacturer"] = "Contoso Power";
    document["PowerCapacityWatts"] = 400;
    document["Metrics"] = link(odata_id + "/Metrics");
    return document;
}

nlohmann::json FakeBmc::metrics_document(const std::string& chassis, const std::string& psu) const {
    const PowerSupply& supply = *find_supply(chassis, psu);
    const bool measured = supply.state == "Enabled";
    json metrics = {{"@odata.type", "#PowerSupplyMetrics.v1_0_1.PowerSupplyMetrics"},
                    {"@odata.id", kRoot + "/Chassis/" + chassis + "/PowerSubsystem/PowerSupplies/" + psu + "/Metrics"},
                    {"Id", "Metrics"},
                    {"Name", "Metrics for " + power_supply_name(psu)},
                    {"Status", status_of(supply.state)},
                    {"InputPowerWatts", {{"Reading", reading(measured, supply.input_watts)}}},
                    {"OutputPowerWatts", {{"Reading", reading(measured, 0.94 * supply.input_watts)}}}};
    if (options_.energy_kwh) metrics["EnergykWh"] = {{"Reading", reading(measured, supply.energy_kwh)}};
    return metrics;
}

/// The deprecated Power resource: PowerControl[0] for the chassis's input, and one PowerSupplies entry a bay.
nlohmann::json FakeBmc::power_document(const std::string& id) const {
    const std::string odata_id = kRoot + "/Chassis/" + id + "/Power";
    const Chassis& chassis = chassis_.at(id);
    double enabled_input_watts = 0.0;
    json supplies = json::array();
    for (const std::string& psu : options_.power_supplies) {
        const PowerSupply& supply = chassis.supplies.at(psu);
        const bool measured = supply.state == "Enabled";
        if (measured) enabled_input_watts += supply.input_watts;
        const std::string member = std::to_string(supplies.size());
        supplies.push_back({{"@odata.id", odata_id + "#/PowerSupplies/" + member},
                            {"MemberId", member},
                            {"Name", power_supply_name(psu)},
                            {"Status", status_of(supply.state)},
                            {"PowerSupplyType", "AC"},
                            {"PowerCapacityWatts", 400},
                            {"PowerInputWatts", reading(measured, supply.input_watts)},
                            {"LastPowerOutputWatts", reading(measured, 0.94 * supply.input_watts)}});
    }
    const json control = {{"@odata.id", odata_id + "#/PowerControl/0"},
                          {"MemberId", "0"},
                          {"Name", "System Input Power"},
                          {"PowerConsumedWatts", chassis.consumed_watts.value_or(enabled_input_watts)},
                          {"PowerCapacityWatts", 800},
                          {"Status", status_of("Enabled")},
                          {"RelatedItem", json::array({link(kRoot + "/Chassis/" + id)})}};
    return {{"@odata.type", "#Power.v1_7_1.Power"}, {"@odata.id", odata_id}, {"Id", "Power"}, {"Name", "Power"},
            {"PowerControl", json::array({control})}, {"PowerSupplies", supplies}};
}

}  // namespace kepler::testing
