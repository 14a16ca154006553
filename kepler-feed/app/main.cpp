// kepler-feed: serves a keplershm segment's frames over gRPC (see README.md, "Remote feed").
#include <signal.h>

#include <fmt/format.h>

#include <exception>

#include "app/server.hpp"

int main(int argc, char** argv) {
    int exit_code = 0;
    const auto options = kepler_feed::parse_command_line(argc, argv, exit_code);
    if (!options) return exit_code;
    // Blocked before any thread starts, so that every thread inherits the mask and sigwait() alone sees them.
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, nullptr);
    try {
        return kepler_feed::run_server(*options);
    } catch (const std::exception& e) {
        fmt::print(stderr, "kepler-feed: {}\n", e.what());
        return 1;
    }
}
