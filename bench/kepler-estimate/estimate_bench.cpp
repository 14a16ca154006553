// Micro-benchmarks of the estimator's per-frame work: attribution at 1k and 10k processes (goal:
// 10k in <= 5 ms), the node model per frame (goal: <= 100 us), the cost of a scrape against the
// number of series, and how long a frame waits while a scrape runs.
#include <benchmark/benchmark.h>
#include <fmt/format.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <memory>
#include <thread>

#include "pipeline/estimator.hpp"
#include "app/runner.hpp"
#include "attribute/attribution.hpp"
#include "export/prometheus_export.hpp"
#include "model/xgboost_model.hpp"
#include "publish/estimates_publisher.hpp"

using namespace kepler::estimate;
namespace fs = std::filesystem;

namespace {

constexpr uint64_t kSecond = 1'000'000'000ull;

/// A segment with one frame of `processes` processes spread over `containers` pods, read back as a
/// private copy. Not thread-safe.
class SyntheticFrame {
public:
    /// `gpus` GPUs (zones gpu-N after package and DRAM) with kGpuUsers users each: the GPU sections.
    SyntheticFrame(uint32_t processes, uint32_t containers, bool metered, uint32_t gpus = 0) : gpus_(gpus) {
        keplershm::WriterOptions o;
        o.process_capacity = processes;
        o.workload_capacity = containers;
        o.cpu_count = o.cpu_capacity = 64;
        o.metric_mask = KEPLERSHM_METRIC_CPU_TIME | KEPLERSHM_METRIC_NODE_CPU;
        o.node_name = "bench";
        o.cpu_model = "Bench CPU";
        o.slot_count = 2;
        o.max_segment_bytes = 1ull << 30;
        if (metered) {
            keplershm_zone_info pkg{}, dram{};
            keplershm::set_text(pkg.name, "package-0");
            pkg.kind = KEPLERSHM_ZONE_PACKAGE;
            keplershm::set_text(dram.name, "dram-0");
            dram.kind = KEPLERSHM_ZONE_DRAM;
            o.zones = {pkg, dram};
            for (uint32_t g = 0; g < gpus; ++g) {
                keplershm_zone_info gpu{};
                keplershm::set_text(gpu.name, fmt::format("gpu-{}", g));
                gpu.kind = KEPLERSHM_ZONE_GPU;
                gpu.socket = g;
                gpu.power_source = KEPLERSHM_POWER_NVML;
                o.zones.push_back(gpu);
            }
            o.gpu_device_capacity = gpus;
            o.gpu_usage_capacity = gpus * kGpuUsers;
        }
        name_ = fmt::format("kepest-bench-{}-{}", getpid(), counter_++);
        writer_ = std::make_unique<keplershm::Writer>(name_, o);
        reader_ = std::make_unique<keplershm::Reader>(keplershm::Reader::open(name_));
        write(processes, containers, 1);
    }

    /// Publishes frame number `n` (interval n s .. n+1 s) and reads it back.
    const keplershm::FrameView& write(uint32_t processes, uint32_t containers, uint64_t n) {
        keplershm::Draft d = writer_->begin();
        d.frame().interval_start_ns = n * kSecond;
        d.frame().interval_end_ns = (n + 1) * kSecond;
        d.frame().metric_mask = writer_->header().metric_mask;
        for (uint32_t c = 0; c < containers; ++c) {
            keplershm_workload w{};
            w.kind = KEPLERSHM_WORKLOAD_POD;
            keplershm::set_text(w.container_id, fmt::format("{:064x}", c + 1));
            keplershm::set_text(w.container_name, fmt::format("container-{}", c));
            keplershm::set_text(w.pod_uid, fmt::format("uid-{}", c / 2));
            keplershm::set_text(w.pod_name, fmt::format("pod-{}", c / 2));
            keplershm::set_text(w.pod_namespace, fmt::format("ns-{}", c % 10));
            d.add_workload(w);
        }
        for (uint32_t i = 0; i < processes; ++i) {
            keplershm_process p{};
            p.pid = p.tgid = i + 1;
            p.start_time_ticks = 1000 + i;
            p.cpu_time_ns = (i * 7919ull) % 20'000'000ull;
            p.workload_index = containers ? i % containers : KEPLERSHM_NO_WORKLOAD;
            keplershm::set_text(p.comm, "worker");
            d.add_process(p);
        }
        for (uint32_t c = 0; c < 64; ++c) {
            keplershm_cpu_sample s{};
            s.cpu = c;
            s.user_ns = 300'000'000;
            d.add_cpu(s);
        }
        if (writer_->header().zone_count > 0) {
            d.add_zone(keplershm_zone_sample{0, KEPLERSHM_ZONE_VALID, 0, 0, 150'000'000, 0});
            d.add_zone(keplershm_zone_sample{1, KEPLERSHM_ZONE_VALID, 0, 0, 20'000'000, 0});
        }
        add_gpus(d, processes);
        d.unaccounted().cpu_time_ns = 5'000'000;
        writer_->commit(d);
        if (reader_->next(std::chrono::milliseconds(1000), view_) != keplershm::Status::ok) throw std::runtime_error("frame lost");
        return view_;
    }
    const keplershm::FrameView& view() const { return view_; }
    static constexpr uint32_t kGpuUsers = 50;

private:
    /// Each GPU at 300 W used by kGpuUsers processes with different busy times.
    void add_gpus(keplershm::Draft& d, uint32_t processes) const {
        for (uint32_t g = 0; g < gpus_; ++g) {
            keplershm_gpu_device dev{};
            dev.zone_index = 2 + g;
            dev.vendor = KEPLERSHM_GPU_NVIDIA;
            dev.device_index = g;
            dev.flags = KEPLERSHM_GPU_USAGE_VALID;
            dev.parent = dev.gpu_instance_id = dev.compute_instance_id = 0xffffffffu;
            d.add_gpu_device(dev);
            d.add_zone(keplershm_zone_sample{2 + g, KEPLERSHM_ZONE_VALID, 0, 0, 300'000'000, 0});
            for (uint32_t u = 0; u < kGpuUsers; ++u) {
                keplershm_gpu_usage use{};
                use.process_index = (g * kGpuUsers + u) % processes;
                use.pid = use.process_index + 1;
                use.start_time_ticks = 1000 + use.process_index;
                use.device = g;
                use.flags = KEPLERSHM_GPU_USE_COMPUTE | KEPLERSHM_GPU_USE_BUSY_VALID;
                use.busy_ns = (u + 1) * 1'000'000ull;
                d.add_gpu_usage(use);
            }
        }
    }

    uint32_t gpus_ = 0;
    static inline int counter_ = 0;
    std::string name_;
    std::unique_ptr<keplershm::Writer> writer_;
    std::unique_ptr<keplershm::Reader> reader_;
    keplershm::FrameView view_;
};

void BM_Attribute(benchmark::State& state) {
    const auto processes = static_cast<uint32_t>(state.range(0));
    SyntheticFrame frame(processes, 100, true);
    const NodeEnergy node{{ZoneEnergy{ZoneKey{ZoneKind::package, 0}, 150'000'000, 60'000'000, {}},
                           ZoneEnergy{ZoneKey{ZoneKind::dram, 0}, 20'000'000, 8'000'000, {}}},
                          "rapl"};
    Attribution out;
    for (auto _ : state) {
        attribute(frame.view(), node, IdlePolicy::cpu_share, out);
        benchmark::DoNotOptimize(out.zones.data());
    }
    state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * processes);
}
BENCHMARK(BM_Attribute)->Arg(1000)->Arg(10000)->Unit(benchmark::kMicrosecond);

/// The whole per-frame pipeline: features, every model, attribution and aggregation into the ledger.
void BM_EstimateFrame(benchmark::State& state) {
    const auto processes = static_cast<uint32_t>(state.range(0));
    SyntheticFrame frame(processes, 500, true);
    Estimator estimator(EstimatorOptions{});
    uint64_t n = 2;
    for (auto _ : state) {
        state.PauseTiming();
        const keplershm::FrameView& view = frame.write(processes, 500, n++);
        state.ResumeTiming();
        benchmark::DoNotOptimize(estimator.process(view));
    }
    state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * processes);
}
BENCHMARK(BM_EstimateFrame)->Arg(1000)->Arg(10000)->Unit(benchmark::kMicrosecond);

/// BM_EstimateFrame at 1,000 processes with range(0) GPUs of 50 users each (the GPU sections read,
/// GPU zones attributed by busy time): against its run with 0 GPUs, what GPUs add to a frame.
void BM_EstimateFrameWithGpus(benchmark::State& state) {
    constexpr uint32_t kProcesses = 1000;
    const auto gpus = static_cast<uint32_t>(state.range(0));
    SyntheticFrame frame(kProcesses, 500, true, gpus);
    Estimator estimator(EstimatorOptions{});
    uint64_t n = 2;
    for (auto _ : state) {
        state.PauseTiming();
        const keplershm::FrameView& view = frame.write(kProcesses, 500, n++);
        state.ResumeTiming();
        benchmark::DoNotOptimize(estimator.process(view));
    }
    state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * kProcesses);
}
BENCHMARK(BM_EstimateFrameWithGpus)->Arg(0)->Arg(8)->Unit(benchmark::kMicrosecond);

/// --publish-estimates, per frame: every model's answer into its segment (measured, the primary, with
/// 500 workloads x 2 zones = 1,002 rows; curve with 1 row). Segments exist after the first frame.
void BM_PublishEstimates(benchmark::State& state) {
    const auto processes = static_cast<uint32_t>(state.range(0));
    SyntheticFrame frame(processes, 500, true);
    Estimator estimator(EstimatorOptions{});
    frame.write(processes, 500, 2);
    if (!estimator.process(frame.view())) throw std::runtime_error("frame not estimated");
    EstimatesPublisher publisher(fmt::format("kepest-bench-pub-{}", getpid()));
    for (auto _ : state) {
        benchmark::DoNotOptimize(
            publisher.publish(frame.view(), estimator.last_answers(), estimator.primary_model(), estimator.last_attribution()));
    }
    state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * processes);
}
BENCHMARK(BM_PublishEstimates)->Arg(1000)->Arg(10000)->Unit(benchmark::kMicrosecond);

void BM_CurveModel(benchmark::State& state) {
    SyntheticFrame frame(100, 10, false);
    auto model = make_curve_model("curve", CurveParams{});
    const NodeFeatures features = compute_features(frame.view());
    const NodeFacts node = node_facts(frame.view().segment());
    for (auto _ : state) benchmark::DoNotOptimize(model->estimate(FrameInput{frame.view(), features, node}));
}
BENCHMARK(BM_CurveModel)->Unit(benchmark::kMicrosecond);

/// A model like PLATFORM.md's reference point (100 trees, depth 6, 4 features, 1 thread), 2 zones.
void BM_XgboostModel(benchmark::State& state) {
    if (!fs::exists(MODEL_DB_DIR)) {
        state.SkipWithError("no nx12 data to train on");
        return;
    }
    const fs::path dir = fs::temp_directory_path() / fmt::format("kepest-bench-model-{}", getpid());
    const std::string command = fmt::format(
        "/usr/bin/python3 {} --data {} --out {} --features cpu_time_ms_per_s,node_cpu_busy_ms_per_s,cpu_count,cycles_per_s "
        "--zones package,dram --rounds 100 --depth 6 > /dev/null",
        TRAIN_SCRIPT, MODEL_DB_DIR, dir.string());
    if (std::system(command.c_str()) != 0) {
        state.SkipWithError("training failed");
        return;
    }
    SyntheticFrame frame(100, 10, false);
    XgboostModel model("bench", dir, 1);
    const NodeFeatures raw = compute_features(frame.view());
    NodeFeatures features = raw;
    features.values[static_cast<size_t>(Feature::cycles_per_s)] = 3e9;  // the frame has no PMU
    const NodeFacts node = node_facts(frame.view().segment());
    for (auto _ : state) benchmark::DoNotOptimize(model.estimate(FrameInput{frame.view(), features, node}));
    fs::remove_all(dir);
}
BENCHMARK(BM_XgboostModel)->Unit(benchmark::kMicrosecond);

void BM_ComputeFeatures(benchmark::State& state) {
    SyntheticFrame frame(static_cast<uint32_t>(state.range(0)), 10, false);
    for (auto _ : state) benchmark::DoNotOptimize(compute_features(frame.view()));
}
BENCHMARK(BM_ComputeFeatures)->Arg(1000)->Arg(10000)->Unit(benchmark::kMicrosecond);

/// A scrape with `containers` containers, with process series when range(1) != 0: the snapshot and the
/// exposition's blocks, what the server then writes to the connection as they are.
void BM_Scrape(benchmark::State& state) {
    const auto containers = static_cast<uint32_t>(state.range(0));
    const bool processes = state.range(1) != 0;
    const uint32_t process_count = std::max<uint32_t>(containers, processes ? 1000 : containers);
    SyntheticFrame frame(process_count, containers, true);
    EstimatorOptions options;
    options.ledger.process_series_cap = 10000;
    Estimator estimator(options);
    estimator.process(frame.view());
    PrometheusExport exporter(estimator, ExportOptions{.process_metrics = processes, .include_timing = true});
    const size_t series = exporter.render().series();
    size_t bytes = 0;
    for (auto _ : state) {
        const Exposition exposition = exporter.render();
        bytes = 0;
        for (const std::string_view block : exposition.blocks()) bytes += block.size();
        benchmark::DoNotOptimize(bytes);
    }
    state.counters["series"] = static_cast<double>(series);
    state.counters["bytes"] = static_cast<double>(bytes);
}
BENCHMARK(BM_Scrape)->Args({10, 0})->Args({100, 0})->Args({1000, 0})->Args({100, 1})->Unit(benchmark::kMillisecond);

/// What a scrape holds the estimator's lock for: the copy of what the exporters read, with
/// range(0) processes in 100 containers; process series when range(1) != 0.
void BM_Snapshot(benchmark::State& state) {
    const auto processes = static_cast<uint32_t>(state.range(0));
    SyntheticFrame frame(processes, 100, true);
    Estimator estimator(EstimatorOptions{});
    estimator.process(frame.view());
    for (auto _ : state) benchmark::DoNotOptimize(estimator.snapshot(state.range(1) != 0));
}
BENCHMARK(BM_Snapshot)->Args({1000, 0})->Args({1000, 1})->Args({10000, 0})->Args({10000, 1})->Unit(benchmark::kMicrosecond);

/// Frame latency (process(), wall time) while another thread scrapes 430 containers (12k series,
/// collect + text) back to back, against the same frames with no scrape (range(0) == 0): how long a
/// frame waits for a scrape (issue 18). The frames themselves are written with the timer paused.
void BM_FrameDuringScrape(benchmark::State& state) {
    const bool scraping = state.range(0) != 0;
    constexpr uint32_t kContainers = 430;
    SyntheticFrame frame(kContainers, kContainers, true);
    Estimator estimator(EstimatorOptions{});
    estimator.process(frame.view());
    PrometheusExport exporter(estimator, ExportOptions{.include_timing = true});
    const size_t series = exporter.render().series();
    std::atomic<bool> stop{false};
    std::atomic<uint64_t> scrapes{0};
    std::thread scraper([&] {
        // SYNC POINT: partner stop.store() after the loop; relaxed: `stop` only ends this loop, join() orders the rest.
        while (scraping && !stop.load(std::memory_order_relaxed)) {
            benchmark::DoNotOptimize(exporter.render().text().size());
            scrapes.fetch_add(1, std::memory_order_relaxed);
        }
    });
    uint64_t n = 2;
    double worst_s = 0;
    for (auto _ : state) {
        state.PauseTiming();
        const keplershm::FrameView& view = frame.write(kContainers, kContainers, n++);
        state.ResumeTiming();
        const auto started = std::chrono::steady_clock::now();
        benchmark::DoNotOptimize(estimator.process(view));
        worst_s = std::max(worst_s, std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
    }
    stop.store(true, std::memory_order_relaxed);
    scraper.join();
    state.counters["series"] = static_cast<double>(series);
    state.counters["worst_ms"] = worst_s * 1e3;
    state.counters["scrapes"] = static_cast<double>(scrapes.load(std::memory_order_relaxed));
}
BENCHMARK(BM_FrameDuringScrape)->Arg(0)->Arg(1)->UseRealTime()->Unit(benchmark::kMicrosecond);

}  // namespace

int main(int argc, char** argv) {
    kepler::estimate::configure_heap();  // the heap the estimator runs with, or scrapes measure page faults
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    return 0;
}
