// bmc_config.hpp — which BMC this node reads and how: Kepler's BMC configuration (node name → BMC id →
// endpoint and credentials) or the equivalent flags, with credentials from a file or the environment,
// never from the command line.
#pragma once

#include <chrono>
#include <stdexcept>
#include <string>

namespace kepler::collect {

class BmcConfigError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

struct BmcConfig {
    std::string id;        // Kepler's bmc_id label
    std::string endpoint;  // https://host[:port] (http:// only for lab BMCs)
    std::string username;
    std::string password;
    std::string ca_file;             // PEM to verify the BMC with; empty: the system store
    bool insecure = false;           // skip TLS verification (lab BMCs): logged loudly
    bool basic_auth = false;         // HTTP Basic on every request instead of a Redfish session
    bool allow_plain_http = false;   // credentials over http:// (lab BMCs): refused unless set, then logged loudly
    std::chrono::milliseconds poll_interval{2000};
    std::chrono::milliseconds request_timeout{5000};
    std::chrono::milliseconds max_age{10000};  // an older reading is stale: not used
    size_t max_response_bytes = 1u << 20;
};

/// The BMC of `node` in a configuration file in Kepler's shape, as JSON:
///   {"nodes": {"<node>": "<bmc id>"},
///    "bmcs": {"<bmc id>": {"endpoint": "https://…", "username": "…", "password": "…",
///                          "username_file": "…", "password_file": "…", "ca_file": "…",
///                          "insecure": false, "auth": "session"|"basic", "allow_plain_http": false}}}
/// `username_file`/`password_file` (a mounted secret) win over the inline values. Throws BmcConfigError
/// naming the file and the problem (unreadable, not JSON, node or BMC missing, no endpoint, a username
/// without a password).
[[nodiscard]] BmcConfig bmc_config_for_node(const std::string& path, const std::string& node);

/// Credentials from the environment (KEPLER_BMC_USERNAME, KEPLER_BMC_PASSWORD) or from a file holding
/// the username on its first line and the password on its second, over what `config` had.
void apply_bmc_credentials(BmcConfig& config, const std::string& credentials_file);

/// Checks an endpoint: http(s)://host[:port] with nothing after the authority but an optional "/".
void check_bmc_endpoint(const std::string& endpoint);

/// Refuses credentials that would travel in clear text (an http:// endpoint) unless the operator allowed
/// it (`allow_plain_http`); throws BmcConfigError saying how to fix it.
void check_bmc_transport(const BmcConfig& config);

}  // namespace kepler::collect
