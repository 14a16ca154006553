// kepler-feed: serves a keplershm segment's frames over gRPC (see README.md, "Remote feed").
#include <signal.h>

#include <fmt/format.h>

#include <exception>

#include "app/server.hpp"
#include "support/log/log.hpp"

int main(int argc, char** argv) {
    kepler::set_log_program("kepler-feed");
    int exit_code = 0;
    const auto options = kepler::feed::parse_command_line(argc, argv, exit_code);
    if (!options) return exit_code;
    kepler::set_log_level(kepler::parse_log_level(options->log_level).value_or(kepler::LogLevel::info));
    // Blocked before any thread starts, so that every thread inherits the mask and sigwait() alone sees them.
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, nullptr);
    try {
        return kepler::feed::run_server(*options);
    } catch (const std::exception& e) {
        kepler::log_error("{}", e.what());
        return 1;
    }
}
