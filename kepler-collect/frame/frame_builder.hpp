// frame_builder.hpp — turns one interval's measurements into a keplershm frame: processes (most CPU
// first when over capacity), their workloads with Kubernetes names, zones, CPUs and the unaccounted
// record.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "energy/gpu/gpu_source.hpp"
#include "keplershm/keplershm.hpp"
#include "sources/process_source.hpp"
#include "workloads/kube_metadata.hpp"
#include "workloads/workload_resolver.hpp"

namespace kepler::collect {

struct FrameInputs {
    uint64_t interval_start_ns = 0;   // CLOCK_MONOTONIC
    uint64_t interval_end_ns = 0;
    uint64_t interval_start_realtime_ns = 0;
    uint64_t interval_end_realtime_ns = 0;
    bool first = false;               // first frame of this writer: deltas since start-up
    uint32_t source = KEPLERSHM_SOURCE_NONE;
    uint32_t power_source = KEPLERSHM_POWER_NONE;
    const SourceSample* sample = nullptr;
    /// The workload of each process of `sample` (same order); nullptr when unknown.
    const std::vector<std::shared_ptr<const CgroupWorkload>>* workloads = nullptr;
    const NodeCpuSample* node_cpu = nullptr;  // nullptr: the source measured no node CPU time
    const std::vector<keplershm_zone_sample>* zones = nullptr;
    const PodIndex* pods = nullptr;           // nullptr: no Kubernetes metadata
    const std::vector<keplershm_gpu_device>* gpu_devices = nullptr;  // nullptr: no GPU source
    const std::vector<GpuProcessUse>* gpu_usage = nullptr;           // devices index gpu_devices
};

struct FrameSummary {
    uint32_t processes_published = 0;
    uint32_t processes_truncated = 0;
    bool unknown_container = false;  // a pod container missing from the metadata: ask for a refresh
};

/// Fills `draft` (records, counts and frame header fields except sequence/generation).
FrameSummary build_frame(keplershm::Draft& draft, const FrameInputs& in);

}  // namespace kepler::collect
