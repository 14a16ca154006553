// fake_bmc — the fake Redfish BMC (fake_bmc.hpp) as a program, for benchmarks and manual runs.
//
//   fake_bmc [--plain] [--dir DIR] [--watts W] [--energy]
//
// Prints the BMC's URL on the first line of stdout and its CA file on the second (empty with --plain),
// then reads commands from stdin, one a line, until EOF, and exits 0:
//   watts <chassis> <psu> <W>        input power of one supply
//   state <chassis> <psu> <State>    Enabled, UnavailableOffline, Absent, ...
//   energy <chassis> <psu> <kWh>     EnergykWh (published with --energy)
//   consumed <chassis> <W>           PowerControl's PowerConsumedWatts
//   fault none|unavailable|slow [seconds]|huge|malformed|hang
//   expire                           every session token becomes invalid
// The tree has chassis 1U with supplies Bay1 and Bay2; the credentials are admin / secret. Without --dir
// the certificate goes to a temporary directory, removed at exit.
#include <stdlib.h>

#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>
#include <string>

#include "fakes/fake_bmc.hpp"

namespace {

using kepler::testing::FakeBmc;
using kepler::testing::FakeBmcOptions;
namespace fs = std::filesystem;

constexpr const char* kUsage = "usage: fake_bmc [--plain] [--dir DIR] [--watts W] [--energy]\n";

struct Arguments {
    FakeBmcOptions options;
    fs::path directory;  // empty: a temporary one
    double watts = 150.0;
};

std::optional<Arguments> refuse(const std::string& message) {
    std::cerr << "fake_bmc: " << message << "\n" << kUsage;
    return std::nullopt;
}

/// The arguments, or nullopt (after a message on stderr) when they are not understood.
std::optional<Arguments> parse_arguments(int argc, char** argv) {
    Arguments arguments;
    for (int i = 1; i < argc; ++i) {
        const std::string flag = argv[i];
        const bool has_value = i + 1 < argc;
        if (flag == "--plain") {
            arguments.options.tls = false;
        } else if (flag == "--energy") {
            arguments.options.energy_kwh = true;
        } else if (flag == "--dir" && has_value) {
            arguments.directory = argv[++i];
        } else if (flag == "--watts" && has_value) {
            char* end = nullptr;
            arguments.watts = std::strtod(argv[++i], &end);
            if (*end != '\0') return refuse("--watts takes a number");
        } else {
            return refuse("unknown argument " + flag);
        }
    }
    return arguments;
}

const std::map<std::string, FakeBmc::Fault> kFaults = {
    {"none", FakeBmc::Fault::none},   {"unavailable", FakeBmc::Fault::unavailable}, {"slow", FakeBmc::Fault::slow},
    {"huge", FakeBmc::Fault::huge},   {"malformed", FakeBmc::Fault::malformed},     {"hang", FakeBmc::Fault::hang},
};

/// Carries out one command line; false when it is not understood (or names no such chassis or supply).
bool run_command(FakeBmc& bmc, const std::string& line) {
    std::istringstream words(line);
    std::string command, chassis, psu, text;
    double number = 0.0;
    words >> command;
    try {
        if (command == "watts" && words >> chassis >> psu >> number) {
            bmc.set_input_watts(chassis, psu, number);
        } else if (command == "state" && words >> chassis >> psu >> text) {
            bmc.set_power_supply_state(chassis, psu, text);
        } else if (command == "energy" && words >> chassis >> psu >> number) {
            bmc.set_energy_kwh(chassis, psu, number);
        } else if (command == "consumed" && words >> chassis >> number) {
            bmc.set_consumed_watts(chassis, number);
        } else if (command == "fault" && words >> text && kFaults.contains(text)) {
            double slow_seconds = 5.0;
            words >> slow_seconds;
            bmc.set_fault(kFaults.at(text), slow_seconds);
        } else if (command == "expire") {
            bmc.expire_sessions();
        } else {
            return command.empty();  // a blank line is no command, not a wrong one
        }
    } catch (const std::invalid_argument& error) {
        std::cerr << "fake_bmc: " << error.what() << "\n";
        return false;
    }
    return true;
}

int serve(const Arguments& arguments, const fs::path& directory) {
    FakeBmc bmc(arguments.options, directory);
    for (const std::string& chassis : arguments.options.chassis) {
        for (const std::string& psu : arguments.options.power_supplies) bmc.set_input_watts(chassis, psu, arguments.watts);
    }
    std::cout << bmc.url() << "\n" << bmc.ca_file().string() << std::endl;
    for (std::string line; std::getline(std::cin, line);) {
        if (!run_command(bmc, line)) std::cerr << "fake_bmc: not understood: " << line << "\n";
    }
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    const std::optional<Arguments> arguments = parse_arguments(argc, argv);
    if (!arguments) return 2;
    fs::path directory = arguments->directory;
    const bool temporary = directory.empty();
    if (temporary) {
        std::string pattern = (fs::temp_directory_path() / "fake-bmc-XXXXXX").string();
        if (mkdtemp(pattern.data()) == nullptr) {
            std::perror("fake_bmc: mkdtemp");
            return 1;
        }
        directory = pattern;
    }
    int status = 1;
    try {
        status = serve(*arguments, directory);
    } catch (const std::exception& error) {
        std::cerr << "fake_bmc: " << error.what() << "\n";
    }
    std::error_code ignored;
    if (temporary) fs::remove_all(directory, ignored);
    return status;
}
