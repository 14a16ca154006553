// mig_activity.hpp — a MIG-partitioned GPU's instances' activity each interval (nvml_source.cpp's): NVML
// keeps no per-process samples under MIG, so each GPU instance's active time is measured instead, through
// GPM where the driver and the GPU have it (Hopper and later), else from dcgm-exporter's
// DCGM_FI_PROF_GR_ENGINE_ACTIVE where an endpoint is given, else not at all.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "energy/gpu/dcgm_exporter.hpp"
#include "energy/gpu/nvml_library.hpp"
#include "keplershm.h"

namespace kepler::collect {

class MigActivity {
public:
    /// The activity of `gpu`'s GPU instances, whose compute instances are `records` (GPU instance id,
    /// device record); `nvml_index` names the GPU to dcgm-exporter, and `dcgm` gives its reader (made on
    /// first use; null when no endpoint is given). Null, with `note` saying why, when it cannot be measured.
    static std::unique_ptr<MigActivity> make(const nvml::Library& lib, nvml::Device gpu, uint32_t nvml_index,
                                             const std::vector<std::pair<unsigned, uint32_t>>& records,
                                             const std::function<DcgmActivityReader*()>& dcgm, std::string& note);
    ~MigActivity();
    MigActivity(const MigActivity&) = delete;
    MigActivity& operator=(const MigActivity&) = delete;

    /// Each instance record's active time since the previous read (ACTIVE_VALID when measured).
    void read(std::vector<keplershm_gpu_device>& devices);
    /// The GPU was not readable: the next read is a new start.
    void forget();

private:
    struct Instance {
        unsigned gpu_instance_id = 0;
        std::vector<uint32_t> records;     // its compute instances' device records
        nvml::GpmSample previous = nullptr;  // GPM: the previous reading's buffer and the next one's
        nvml::GpmSample current = nullptr;
        bool have_previous = false;
        uint64_t previous_ns = 0;  // CLOCK_MONOTONIC of the previous reading
    };

    MigActivity(const nvml::Library& lib, nvml::Device gpu, uint32_t nvml_index) : lib_(lib), gpu_(gpu), nvml_index_(nvml_index) {}
    bool start_gpm(std::string& note);
    void read_gpm(std::vector<keplershm_gpu_device>& devices);
    void read_dcgm_exporter(std::vector<keplershm_gpu_device>& devices);
    static void set_active(std::vector<keplershm_gpu_device>& devices, const Instance& instance, bool measured, uint64_t active_ns);

    const nvml::Library& lib_;
    nvml::Device gpu_;
    uint32_t nvml_index_;
    std::vector<Instance> instances_;
    DcgmActivityReader* dcgm_ = nullptr;  // set: dcgm-exporter; null: GPM
    std::unique_ptr<nvml::GpmMetricsGet> request_;  // GPM's (13 kB)
};

}  // namespace kepler::collect
