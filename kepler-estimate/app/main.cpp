// kepler-estimate: reads keplershm frames, estimates node power, attributes it and exports it.
#include <curl/curl.h>
#include <fmt/format.h>

#include <atomic>
#include <csignal>
#include <exception>

#include "app/runner.hpp"
#include "support/log/log.hpp"

namespace {
std::atomic<bool> g_stop{false};
extern "C" void on_signal(int) { g_stop.store(true); }
}  // namespace

int main(int argc, char** argv) {
    kepler::set_log_program("kepler-estimate");
    int exit_code = 0;
    const std::optional<kepler::estimate::Options> options = kepler::estimate::parse_options(argc, argv, exit_code);
    if (!options) return exit_code;
    kepler::set_log_level(kepler::parse_log_level(options->log_level).value_or(kepler::LogLevel::info));
    std::signal(SIGINT, on_signal);
    std::signal(SIGTERM, on_signal);
    curl_global_init(CURL_GLOBAL_DEFAULT);  // before any thread: not thread-safe
    kepler::estimate::configure_heap();
    int rc = 1;
    try {
        rc = kepler::estimate::run(*options, g_stop);
    } catch (const std::exception& e) {
        kepler::log_error("{}", e.what());
        rc = 1;
    }
    curl_global_cleanup();
    return rc;
}
