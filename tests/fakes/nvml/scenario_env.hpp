// For end-to-end tests that start a collector on the fake libnvidia-ml.so.1: its scenario file, written
// whole, and FAKE_NVML_SCENARIO pointing at it for the children the test starts (they inherit it).
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

namespace fake_nvml {

/// Replaces `file` with `scenario` in one rename: the fake never reads half a file.
inline void write_scenario(const std::filesystem::path& file, const nlohmann::json& scenario) {
    const std::filesystem::path tmp = file.string() + ".tmp";
    std::ofstream(tmp) << scenario.dump(2);
    std::filesystem::rename(tmp, file);
}

/// FAKE_NVML_SCENARIO set for the scope's lifetime; unset at destruction.
class ScenarioEnv {
public:
    explicit ScenarioEnv(const std::filesystem::path& file) { setenv("FAKE_NVML_SCENARIO", file.c_str(), 1); }
    ~ScenarioEnv() { unsetenv("FAKE_NVML_SCENARIO"); }
    ScenarioEnv(const ScenarioEnv&) = delete;
    ScenarioEnv& operator=(const ScenarioEnv&) = delete;
};

}  // namespace fake_nvml
