#include "energy/redfish/redfish_client.hpp"

#include <fmt/format.h>

#include <cmath>
#include <map>
#include <nlohmann/json.hpp>

#include "keplershm.h"
#include "support/http/http_client.hpp"
#include "support/log/log.hpp"

namespace kepler::collect {

namespace {

using nlohmann::json;

constexpr size_t kMaxMembers = 64;  // chassis per BMC, supplies per chassis: far above real servers
constexpr double kMaxPlausibleWatts = 1e6;
constexpr size_t kMaxSessionAnswerBytes = 64u << 10;  // a session's login and logout answers

/// An @odata.id: a path on this BMC below /redfish/v1, never a URL elsewhere (the BMC is not trusted to
/// send the collector, with its credentials, to another host).
std::string member_path(const json& link, const std::string& what) {
    if (!link.is_object() || !link.contains("@odata.id") || !link["@odata.id"].is_string()) {
        throw RedfishError(fmt::format("redfish: {} has no @odata.id link", what));
    }
    std::string path = link["@odata.id"].get<std::string>();
    if (path.rfind("/redfish/v1", 0) != 0 || path.find("..") != std::string::npos || path.size() > 512 ||
        path.find_first_of(" ?#\r\n") != std::string::npos) {
        throw RedfishError(fmt::format("redfish: {} links to \"{}\", not a path below /redfish/v1", what, path.substr(0, 80)));
    }
    return path;
}

std::vector<std::string> members(const json& collection, const std::string& what) {
    if (!collection.contains("Members") || !collection["Members"].is_array()) {
        throw RedfishError(fmt::format("redfish: {} has no Members array", what));
    }
    std::vector<std::string> paths;
    for (const json& member : collection["Members"]) {
        if (paths.size() == kMaxMembers) {
            log_warn("redfish: {} lists more than {} members; the rest are left out", what, kMaxMembers);
            break;
        }
        paths.push_back(member_path(member, what + " member"));
    }
    return paths;
}

std::string text_or(const json& object, const char* key, const std::string& fallback) {
    return object.contains(key) && object[key].is_string() ? object[key].get<std::string>() : fallback;
}

std::string last_segment(const std::string& path) {
    const size_t slash = path.find_last_of('/');
    return slash == std::string::npos ? path : path.substr(slash + 1);
}

}  // namespace

std::optional<double> redfish_reading(const json& value, double max) {
    const json* number = &value;
    if (value.is_object()) {
        if (!value.contains("Reading")) return std::nullopt;
        number = &value["Reading"];
    }
    if (!number->is_number()) return std::nullopt;
    const double watts = number->get<double>();
    if (!std::isfinite(watts) || watts < 0 || watts > max) return std::nullopt;
    return watts;
}

std::optional<double> redfish_watts(const json& value) { return redfish_reading(value, kMaxPlausibleWatts); }

RedfishClient::RedfishClient(BmcConfig config) : config_(std::move(config)) {
    check_bmc_endpoint(config_.endpoint);
    while (!config_.endpoint.empty() && config_.endpoint.back() == '/') config_.endpoint.pop_back();
}

RedfishClient::~RedfishClient() { log_out(); }

support::HttpRequest RedfishClient::request_to(std::string url) const {
    support::HttpRequest request;
    request.url = std::move(url);
    request.ca_file = config_.ca_file;
    request.insecure_skip_verify = config_.insecure;
    request.timeout_ms = config_.request_timeout.count();
    request.connect_timeout_ms = std::min<long>(2000, config_.request_timeout.count());
    request.max_bytes = config_.max_response_bytes;
    return request;
}

json RedfishClient::get(const std::string& path) {
    const bool session = !config_.basic_auth && !config_.username.empty();
    for (int attempt = 0; attempt < 2; ++attempt) {
        if (session && token_.empty() && path != "/redfish/v1") log_in();
        support::HttpRequest request = request_to(config_.endpoint + path);
        if (!token_.empty()) request.headers.emplace_back("X-Auth-Token", token_);
        if (config_.basic_auth) {
            request.basic_user = config_.username;
            request.basic_password = config_.password;
        }
        support::HttpResponse response;
        try {
            response = connection_.request(request);
        } catch (const support::HttpError& e) {
            throw RedfishError(fmt::format("redfish: {}", e.what()));
        }
        if (response.status == 401 && session && attempt == 0) {
            token_.clear();  // expired or revoked: one new session, then the request again
            continue;
        }
        if (response.status != 200) {
            throw RedfishError(fmt::format("redfish: GET {} answered HTTP {}", request.url, response.status));
        }
        json doc = json::parse(response.body, nullptr, false);
        if (doc.is_discarded() || !doc.is_object()) {
            throw RedfishError(fmt::format("redfish: GET {} did not answer a JSON object", request.url));
        }
        return doc;
    }
    throw RedfishError(fmt::format("redfish: {}{} refuses the new session (HTTP 401)", config_.endpoint, path));
}

void RedfishClient::log_in() {
    if (sessions_path_.empty()) {
        const json root = get("/redfish/v1");
        sessions_path_ = root.contains("Links") && root["Links"].contains("Sessions")
            ? member_path(root["Links"]["Sessions"], "ServiceRoot Links.Sessions")
            : "/redfish/v1/SessionService/Sessions";
    }
    support::HttpRequest request = request_to(config_.endpoint + sessions_path_);
    request.method = "POST";
    request.body = json{{"UserName", config_.username}, {"Password", config_.password}}.dump();
    request.max_bytes = kMaxSessionAnswerBytes;
    support::HttpResponse response;
    try {
        response = connection_.request(request);
    } catch (const support::HttpError& e) {
        throw RedfishError(fmt::format("redfish: session login: {}", e.what()));
    }
    if (response.status == 401 || response.status == 403) {
        throw RedfishError(fmt::format("redfish: {} refuses the credentials of user \"{}\" (HTTP {})", request.url,
                                       config_.username, response.status));
    }
    const auto token = response.headers.find("x-auth-token");
    if ((response.status != 200 && response.status != 201) || token == response.headers.end() || token->second.empty()) {
        throw RedfishError(fmt::format("redfish: session login at {} answered HTTP {} without an X-Auth-Token",
                                       request.url, response.status));
    }
    token_ = token->second;
    const auto location = response.headers.find("location");
    session_url_.clear();
    if (location != response.headers.end()) {
        // Location may be a path or an absolute URL on the same BMC; only its path is kept.
        std::string where = location->second;
        if (where.rfind(config_.endpoint, 0) == 0) where = where.substr(config_.endpoint.size());
        if (where.rfind("/redfish/v1/", 0) == 0) session_url_ = config_.endpoint + where;
    }
    ++logins_;
}

void RedfishClient::log_out() noexcept {
    if (token_.empty() || session_url_.empty()) return;
    try {
        support::HttpRequest request = request_to(session_url_);
        request.method = "DELETE";
        request.headers.emplace_back("X-Auth-Token", token_);
        request.timeout_ms = 1000;  // at stop: never wait long for a BMC that is gone
        request.max_bytes = kMaxSessionAnswerBytes;
        (void)connection_.request(request);
    } catch (const std::exception&) {
        // The BMC ends idle sessions itself; a collector that stops must not hang on one that is gone.
    }
    token_.clear();
}

std::vector<RedfishMeter> RedfishClient::discover() {
    const json root = get("/redfish/v1");
    const std::string chassis_path = root.contains("Chassis") ? member_path(root["Chassis"], "ServiceRoot Chassis")
                                                              : "/redfish/v1/Chassis";
    std::vector<RedfishMeter> meters;
    std::vector<std::string> problems;
    for (const std::string& path : members(get(chassis_path), "Chassis collection")) {
        try {
            const json chassis = get(path);
            const std::string id = text_or(chassis, "Id", last_segment(path));
            const size_t before = meters.size();
            if (chassis.contains("PowerSubsystem")) {
                const json subsystem = get(member_path(chassis["PowerSubsystem"], id + " PowerSubsystem"));
                if (subsystem.contains("PowerSupplies")) {
                    const json supplies = get(member_path(subsystem["PowerSupplies"], id + " PowerSupplies"));
                    for (const std::string& psu_path : members(supplies, id + " PowerSupplies")) {
                        const json psu = get(psu_path);
                        if (!psu.contains("Metrics")) continue;  // nothing to read (e.g. an empty bay)
                        meters.push_back(RedfishMeter{id, text_or(psu, "Id", last_segment(psu_path)),
                                                      text_or(psu, "Name", ""), KEPLERSHM_METER_POWER_SUPPLY,
                                                      member_path(psu["Metrics"], psu_path + " Metrics"), 0});
                    }
                }
            }
            if (meters.size() == before && chassis.contains("Power")) {  // the older API, where it is all there is
                const std::string power_path = member_path(chassis["Power"], id + " Power");
                const json power = get(power_path);
                if (power.contains("PowerControl") && power["PowerControl"].is_array()) {
                    const json& controls = power["PowerControl"];
                    for (size_t i = 0; i < controls.size() && i < kMaxMembers; ++i) {
                        if (!controls[i].is_object() || !redfish_watts(controls[i].value("PowerConsumedWatts", json()))) continue;
                        meters.push_back(RedfishMeter{id, text_or(controls[i], "MemberId", std::to_string(i)),
                                                      text_or(controls[i], "Name", ""), KEPLERSHM_METER_POWER_CONTROL,
                                                      power_path, i});
                    }
                }
            }
        } catch (const RedfishError& e) {
            problems.push_back(e.what());
        }
    }
    for (const std::string& p : problems) log_warn("{}", p);
    if (meters.empty()) {
        throw RedfishError(fmt::format("redfish: {} publishes no power supply metrics and no PowerControl reading{}",
                                       config_.endpoint, problems.empty() ? "" : " (see the warnings above)"));
    }
    return meters;
}

std::vector<RedfishReading> RedfishClient::read(const std::vector<RedfishMeter>& meters) {
    std::map<std::string, json> documents;  // one GET per resource per poll (PowerControl entries share one)
    std::vector<RedfishReading> readings(meters.size());
    for (size_t i = 0; i < meters.size(); ++i) {
        const RedfishMeter& meter = meters[i];
        auto doc = documents.find(meter.url);
        if (doc == documents.end()) doc = documents.emplace(meter.url, get(meter.url)).first;
        const json& d = doc->second;
        if (meter.detail == KEPLERSHM_METER_POWER_SUPPLY) {
            if (d.contains("InputPowerWatts")) readings[i].watts = redfish_watts(d["InputPowerWatts"]);
            if (d.contains("EnergykWh")) readings[i].energy_kwh = redfish_reading(d["EnergykWh"], 1e15);
        } else if (d.contains("PowerControl") && d["PowerControl"].is_array() && meter.control_index < d["PowerControl"].size()) {
            const json& control = d["PowerControl"][meter.control_index];
            if (control.is_object() && control.contains("PowerConsumedWatts")) {
                readings[i].watts = redfish_watts(control["PowerConsumedWatts"]);
            }
        }
    }
    return readings;
}

}  // namespace kepler::collect
