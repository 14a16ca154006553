// Micro-benchmarks of the collector's per-interval work that does not need privileges: parsing, the
// procfs scan, cgroup identification, frame building. The eBPF cost and the daemon's CPU/RSS are
// measured by the scripts next to this file (see README.md).
#include <benchmark/benchmark.h>

#include <stdlib.h>

#include <filesystem>
#include <fstream>

#include "common/text_io.hpp"
#include "energy/gpu/gpu_source.hpp"
#include "frame/frame_builder.hpp"
#include "sources/proc_stat.hpp"
#include "sources/procfs_source.hpp"
#include "workloads/cgroup_identity.hpp"

namespace kepler::collect {
namespace {

void BM_ParseProcPidStat(benchmark::State& state) {
    const std::string line = read_text_file_or_throw("/proc/self/stat", 4096);
    for (auto _ : state) benchmark::DoNotOptimize(parse_proc_pid_stat(line));
}
BENCHMARK(BM_ParseProcPidStat);

void BM_IdentifyCgroupPath(benchmark::State& state) {
    const std::string path =
        "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod0d9b6c4e_27a2_4b57_8bb9_4f1c9e2b9a10.slice/"
        "cri-containerd-7f3c2d1e0a9b8c7d6e5f4a3b2c1d0e9f8a7b6c5d4e3f2a1b0c9d8e7f6a5b4c3d.scope";
    for (auto _ : state) benchmark::DoNotOptimize(identify_cgroup_path(path));
}
BENCHMARK(BM_IdentifyCgroupPath);

// A scan of every /proc/<pid>/stat on this machine, opening each file (the first interval, and every
// interval before files were held open).
void BM_ProcfsScan(benchmark::State& state) {
    size_t processes = 0;
    for (auto _ : state) processes = ProcfsSource::scan("/proc").size();
    state.counters["processes"] = static_cast<double>(processes);
    state.counters["time_per_process"] = benchmark::Counter(static_cast<double>(processes), benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_ProcfsScan)->Unit(benchmark::kMicrosecond);

// One procfs interval as the source reads it: the same files, held open and read again in place.
void BM_ProcfsRereadHeldFiles(benchmark::State& state) {
    ProcStatFiles files("/proc");
    size_t processes = files.read_all().size();
    for (auto _ : state) processes = files.read_all().size();
    state.counters["processes"] = static_cast<double>(processes);
    state.counters["time_per_process"] = benchmark::Counter(static_cast<double>(processes), benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_ProcfsRereadHeldFiles)->Unit(benchmark::kMicrosecond);

// Filling a frame with N processes spread over N/10 workloads, through a real writer.
void BM_BuildFrame(benchmark::State& state) {
    const auto n = static_cast<uint32_t>(state.range(0));
    SourceSample sample;
    std::vector<std::shared_ptr<const CgroupWorkload>> workloads;
    for (uint32_t i = 0; i < n; ++i) {
        ProcessActivity a;
        a.key = ProcessKey{1000 + i, 5000 + i};
        a.cpu_time_ns = 1'000'000 + i;
        a.set_comm("worker");
        sample.processes.push_back(a);
        auto w = std::make_shared<CgroupWorkload>();
        w->path = "/system.slice/service-" + std::to_string(i / 10) + ".service";
        workloads.push_back(std::move(w));
    }
    keplershm::WriterOptions options;
    options.process_capacity = n;
    options.workload_capacity = n;
    options.replace_live = true;
    keplershm::Writer writer("kc-bench-frame-" + std::to_string(n), options);
    FrameInputs in;
    in.sample = &sample;
    in.workloads = &workloads;
    for (auto _ : state) {
        keplershm::Draft draft = writer.begin();
        build_frame(draft, in);
        writer.commit(draft);
    }
    state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * n);
}
BENCHMARK(BM_BuildFrame)->Arg(100)->Arg(1000)->Arg(4000)->Unit(benchmark::kMicrosecond);

#ifdef FAKE_NVML_LIBRARY
/// The fake's scenario for the NVML benchmarks: 8 GPUs at 300 W with 50 processes each; removed at the end.
class EightGpus {
public:
    EightGpus() : path_(std::filesystem::temp_directory_path() / ("kepler-bench-nvml-" + std::to_string(getpid()) + ".json")) {
        std::ofstream out(path_);
        out << R"({"devices": [)";
        for (int g = 0; g < 8; ++g) {
            out << (g ? "," : "") << R"({"power_w": 300, "processes": [)";
            for (int p = 0; p < 50; ++p) out << (p ? "," : "") << R"({"pid": )" << 100000 + g * 50 + p << R"(, "sm_util": )" << 1 + p << "}";
            out << "]}";
        }
        out << "]}";
        out.close();
        setenv("FAKE_NVML_SCENARIO", path_.c_str(), 1);
    }
    ~EightGpus() { std::filesystem::remove(path_); }
    EightGpus(const EightGpus&) = delete;
    EightGpus& operator=(const EightGpus&) = delete;

    /// The NVML source on the fake, or null with the benchmark skipped.
    static std::unique_ptr<GpuSource> load(benchmark::State& state) {
        std::string why;
        NvmlSettings nvml;
        nvml.library = FAKE_NVML_LIBRARY;
        std::unique_ptr<GpuSource> gpus = make_nvml_source(nvml, why);
        if (!gpus) state.SkipWithError(why.c_str());
        return gpus;
    }

private:
    std::filesystem::path path_;
};

/// One interval of the NVML source (energy of every GPU, then their processes and utilization samples)
/// against the fake libnvidia-ml.so.1 of tests/fakes/nvml: 8 GPUs with 50 processes each. This is the
/// collector's own side of the calls (the real driver's time inside NVML is not in it); per GPU, divide by 8.
void BM_NvmlInterval(benchmark::State& state) {
    const EightGpus scenario;
    const std::unique_ptr<GpuSource> gpus = EightGpus::load(state);
    if (!gpus) return;
    std::vector<keplershm_zone_sample> samples(gpus->zones().size());
    std::vector<GpuProcessUse> uses;
    for (auto _ : state) {
        gpus->read(samples, 0);
        gpus->read_usage(uses, 0);
        benchmark::DoNotOptimize(uses.data());
    }
    state.counters["gpus"] = static_cast<double>(gpus->zones().size());
    state.counters["uses"] = static_cast<double>(uses.size());
}
BENCHMARK(BM_NvmlInterval)->Unit(benchmark::kMicrosecond);

/// The check the collector makes every --gpu-rescan (10 s) for GPUs it does not publish, on the same 8 GPUs.
void BM_NvmlRescan(benchmark::State& state) {
    const EightGpus scenario;
    const std::unique_ptr<GpuSource> gpus = EightGpus::load(state);
    if (!gpus) return;
    for (auto _ : state) benchmark::DoNotOptimize(gpus->new_devices());
}
BENCHMARK(BM_NvmlRescan)->Unit(benchmark::kMicrosecond);
#endif

}  // namespace
}  // namespace kepler::collect


BENCHMARK_MAIN();
