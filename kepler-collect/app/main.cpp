// kepler-collect: see kepler-collect/README.md.
#include "kepler_collect/collector.hpp"

int main(int argc, char** argv) {
    int exit_code = 0;
    const auto options = kepler::collect::parse_command_line(argc, argv, exit_code);
    if (!options) return exit_code;
    return kepler::collect::run_collector(*options);
}
