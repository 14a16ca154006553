// nvml_test_support.hpp — what the NVML source's tests share (nvml_test.cpp, nvml_mig_test.cpp): the fake
// libnvidia-ml.so.1's scenario file, loading the source on it, and reading it.
//
// Each test writes its scenario into a directory of its own: a new scenario path is a new machine to the
// fake (its counters start afresh), so tests do not depend on each other's order. Timing bounds are loose
// and each says why: the machine running these is shared and may stall any thread for tens of ms.
#pragma once

#include <stdlib.h>

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/text_io.hpp"
#include "energy/gpu/gpu_source.hpp"
#include "keplershm/keplershm.hpp"
#include "test_support.hpp"

namespace kepler::collect::nvml_test {

using nlohmann::json;
using testing::TempDir;
using Clock = std::chrono::steady_clock;

constexpr uint32_t kNone = 0xffffffffu;

/// The fake's scenario file, FAKE_NVML_SCENARIO pointing at it; each write replaces it atomically (written
/// aside, then renamed), so that the fake sees the old or the new scenario, never half of one.
class Scenario {
public:
    explicit Scenario(const json& scenario) {
        write(scenario);
        setenv("FAKE_NVML_SCENARIO", path().c_str(), 1);
    }
    ~Scenario() { unsetenv("FAKE_NVML_SCENARIO"); }
    void write(const json& scenario) const { dir_.write("scenario.json", scenario.dump()); }
    [[nodiscard]] std::string path() const { return (dir_.path() / "scenario.json").string(); }

private:
    TempDir dir_;
};

inline json gpus(std::vector<json> devices) { return {{"devices", devices}}; }

inline NvmlSettings nvml_at(const std::string& library) {
    NvmlSettings settings;
    settings.library = library;
    return settings;
}

inline std::unique_ptr<GpuSource> load(const char* library = FAKE_NVML_LIBRARY) {
    std::string why;
    std::unique_ptr<GpuSource> source = make_nvml_source(nvml_at(library), why);
    EXPECT_NE(source, nullptr) << why;
    return source;
}

inline std::vector<keplershm_zone_sample> read(GpuSource& source) {
    std::vector<keplershm_zone_sample> samples(source.zones().size());
    source.read(samples, monotonic_now_ns());
    return samples;
}

inline bool valid(const keplershm_zone_sample& s) { return (s.flags & KEPLERSHM_ZONE_VALID) != 0; }

/// Watts over an interval: its energy over the time between the two reads that bound it.
inline double watts(const keplershm_zone_sample& now, const keplershm_zone_sample& before) {
    return static_cast<double>(now.energy_delta_uj) / static_cast<double>(now.read_time_ns - before.read_time_ns) * 1e3;
}

inline std::map<uint32_t, GpuProcessUse> by_pid(const std::vector<GpuProcessUse>& uses) {
    std::map<uint32_t, GpuProcessUse> out;
    for (const GpuProcessUse& u : uses) {
        EXPECT_FALSE(out.contains(u.pid)) << "pid " << u.pid << " listed twice";
        out[u.pid] = u;
    }
    return out;
}

}  // namespace kepler::collect::nvml_test
