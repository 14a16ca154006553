// Command line of kepler-feed (CLI11).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "select/selection.hpp"

namespace kepler::feed {

struct FeedOptions {
    std::string shm_name;
    std::string listen = "127.0.0.1:9106";  // loopback unless the operator says otherwise
    std::string log_level = "info";          // debug, info, warning, error
    std::string tls_cert, tls_key, tls_client_ca;
    std::string token_file;
    std::string port_file;  // where the bound port is written (for --listen HOST:0)
    std::vector<std::string> estimates;  // estimates segments joined to the frames
    uint32_t estimates_wait_ms = 250;    // longest wait for their answers (also capped at interval / 4)
    Limits limits;
};

/// Parses argv; nullopt with `exit_code` set when the program should exit (help, bad option).
std::optional<FeedOptions> parse_command_line(int argc, char** argv, int& exit_code);

}  // namespace kepler::feed
