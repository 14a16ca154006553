#include "energy/redfish/bmc_config.hpp"

#include <fmt/format.h>

#include <cstdlib>
#include <nlohmann/json.hpp>

#include "common/text_io.hpp"
#include "support/http/http_client.hpp"

namespace kepler::collect {

namespace {

constexpr size_t kMaxConfigBytes = 1u << 20;
constexpr size_t kMaxSecretBytes = 4096;

std::string read_secret(const std::string& path, const std::string& what) {
    const ReadResult r = read_text_file(path, kMaxSecretBytes);
    if (!r.ok()) throw BmcConfigError(fmt::format("BMC {}: {}", what, r.message));
    std::string text(trim(r.text));
    if (text.empty()) throw BmcConfigError(fmt::format("BMC {}: {} is empty", what, path));
    return text;
}

std::string string_field(const nlohmann::json& object, const char* key, const std::string& where) {
    if (!object.contains(key)) return {};
    if (!object[key].is_string()) throw BmcConfigError(fmt::format("{}: \"{}\" is not a string", where, key));
    return object[key].get<std::string>();
}

}  // namespace

void check_bmc_endpoint(const std::string& endpoint) {
    const bool https = support::is_https(endpoint);
    if (!https && endpoint.rfind("http://", 0) != 0) {
        throw BmcConfigError(fmt::format("BMC endpoint \"{}\" is not an http:// or https:// URL", endpoint));
    }
    const std::string_view rest = std::string_view(endpoint).substr(https ? 8 : 7);
    const size_t slash = rest.find('/');
    if (rest.empty() || slash == 0 || (slash != std::string_view::npos && slash + 1 != rest.size()) ||
        rest.find_first_of("?#@ ") != std::string_view::npos) {
        throw BmcConfigError(fmt::format("BMC endpoint \"{}\" must be scheme://host[:port] (no path, no credentials)", endpoint));
    }
}

void check_bmc_transport(const BmcConfig& config) {
    if (support::is_https(config.endpoint) || config.username.empty() || config.allow_plain_http) return;
    throw BmcConfigError(fmt::format(
        "BMC {} ({}): its credentials would travel in clear text over plain http; use an https:// endpoint, or allow "
        "it for a lab BMC with --redfish-allow-plain-http (\"allow_plain_http\": true in the configuration)",
        config.id, config.endpoint));
}

BmcConfig bmc_config_for_node(const std::string& path, const std::string& node) {
    const ReadResult r = read_text_file(path, kMaxConfigBytes);
    if (!r.ok()) throw BmcConfigError(fmt::format("BMC configuration: {}", r.message));
    const nlohmann::json doc = nlohmann::json::parse(r.text, nullptr, false);
    if (doc.is_discarded() || !doc.is_object()) {
        throw BmcConfigError(fmt::format("BMC configuration {}: not a JSON object", path));
    }
    const nlohmann::json& nodes = doc.contains("nodes") ? doc["nodes"] : nlohmann::json();
    const nlohmann::json& bmcs = doc.contains("bmcs") ? doc["bmcs"] : nlohmann::json();
    if (!nodes.is_object() || !bmcs.is_object()) {
        throw BmcConfigError(fmt::format("BMC configuration {}: needs objects \"nodes\" and \"bmcs\"", path));
    }
    if (!nodes.contains(node) || !nodes[node].is_string()) {
        throw BmcConfigError(fmt::format("BMC configuration {}: no BMC for node \"{}\" in \"nodes\"", path, node));
    }
    BmcConfig config;
    config.id = nodes[node].get<std::string>();
    if (!bmcs.contains(config.id) || !bmcs[config.id].is_object()) {
        throw BmcConfigError(fmt::format("BMC configuration {}: node \"{}\" names BMC \"{}\", which \"bmcs\" lacks", path,
                                         node, config.id));
    }
    const nlohmann::json& bmc = bmcs[config.id];
    const std::string where = fmt::format("BMC configuration {}: bmcs.{}", path, config.id);
    config.endpoint = string_field(bmc, "endpoint", where);
    if (config.endpoint.empty()) throw BmcConfigError(fmt::format("{}: no \"endpoint\"", where));
    check_bmc_endpoint(config.endpoint);
    config.username = string_field(bmc, "username", where);
    config.password = string_field(bmc, "password", where);
    if (const std::string file = string_field(bmc, "username_file", where); !file.empty()) config.username = read_secret(file, "username file");
    if (const std::string file = string_field(bmc, "password_file", where); !file.empty()) config.password = read_secret(file, "password file");
    config.ca_file = string_field(bmc, "ca_file", where);
    if (bmc.contains("insecure")) {
        if (!bmc["insecure"].is_boolean()) throw BmcConfigError(fmt::format("{}: \"insecure\" is not true or false", where));
        config.insecure = bmc["insecure"].get<bool>();
    }
    if (bmc.contains("allow_plain_http")) {
        if (!bmc["allow_plain_http"].is_boolean()) {
            throw BmcConfigError(fmt::format("{}: \"allow_plain_http\" is not true or false", where));
        }
        config.allow_plain_http = bmc["allow_plain_http"].get<bool>();
    }
    const std::string auth = string_field(bmc, "auth", where);
    if (!auth.empty() && auth != "session" && auth != "basic") {
        throw BmcConfigError(fmt::format("{}: \"auth\" is \"{}\"; use \"session\" or \"basic\"", where, auth));
    }
    config.basic_auth = auth == "basic";
    if (config.username.empty() != config.password.empty()) {
        throw BmcConfigError(fmt::format("{}: a username needs a password and a password a username", where));
    }
    return config;
}

void apply_bmc_credentials(BmcConfig& config, const std::string& credentials_file) {
    if (!credentials_file.empty()) {
        const ReadResult r = read_text_file(credentials_file, kMaxSecretBytes);
        if (!r.ok()) throw BmcConfigError(fmt::format("BMC credentials: {}", r.message));
        const std::string_view text = r.text;
        const size_t newline = text.find('\n');
        if (newline == std::string_view::npos) {
            throw BmcConfigError(fmt::format("BMC credentials {}: needs the username on line 1 and the password on line 2",
                                             credentials_file));
        }
        config.username = std::string(trim(text.substr(0, newline)));
        config.password = std::string(trim(text.substr(newline + 1)));
    }
    if (const char* user = std::getenv("KEPLER_BMC_USERNAME"); user && *user) config.username = user;
    if (const char* pass = std::getenv("KEPLER_BMC_PASSWORD"); pass && *pass) config.password = pass;
    if (config.username.empty() != config.password.empty()) {
        throw BmcConfigError("BMC credentials: a username needs a password and a password a username");
    }
}

}  // namespace kepler::collect
