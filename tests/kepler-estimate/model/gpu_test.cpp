// GPUs in the estimator (frames of protocol 1.4): a GPU's idle power is the lowest seen while nobody used
// it (or the configured figure), its active power goes to its users by their busy time (equal shares when
// none was sampled busy, nobody's when the frame names no user) and never by CPU time; energy is conserved
// per device; and the node families carry Kepler 0.11's GPU labels.
#include <gtest/gtest.h>

#include "export/prometheus_export.hpp"
#include "export/top_view.hpp"
#include "load/model_spec.hpp"
#include "pipeline/estimator.hpp"
#include "support/metric_series.hpp"
#include "support/test_frames.hpp"

using namespace kepler::estimate;
using namespace estimate_test;

namespace {

constexpr uint64_t kSecond = 1'000'000'000ull;
constexpr uint64_t kJoule = 1'000'000ull;  // µJ
constexpr uint32_t kNone = 0xffffffffu;

keplershm_zone_info gpu_zone(uint32_t index) {
    keplershm_zone_info z = zone_info("gpu-" + std::to_string(index), KEPLERSHM_ZONE_GPU, index);
    z.power_source = KEPLERSHM_POWER_NVML;
    z.max_energy_range_uj = 0;
    return z;
}

/// package-0 (zone 0) and two NVIDIA GPUs (zones 1 and 2).
keplershm::WriterOptions gpu_node() {
    keplershm::WriterOptions o = node_options(4, kProcfsMetrics, {zone_info("package-0", KEPLERSHM_ZONE_PACKAGE, 0), gpu_zone(0), gpu_zone(1)});
    o.gpu_device_capacity = 8;
    o.gpu_usage_capacity = 16;
    return o;
}

keplershm_gpu_device device(uint32_t index, bool usage_listed = true) {
    keplershm_gpu_device d{};
    d.zone_index = 1 + index;
    d.vendor = KEPLERSHM_GPU_NVIDIA;
    d.device_index = index;
    d.flags = usage_listed ? KEPLERSHM_GPU_USAGE_VALID : 0;
    d.parent = d.gpu_instance_id = d.compute_instance_id = kNone;
    keplershm::set_text(d.uuid, "GPU-test-" + std::to_string(index));
    keplershm::set_text(d.name, "NVIDIA H100 80GB HBM3");
    return d;
}

keplershm_gpu_usage use(uint32_t pid, uint32_t process_index, uint32_t device, uint64_t busy_ns, bool busy_valid = true) {
    keplershm_gpu_usage u{};
    u.pid = pid;
    u.device = device;
    u.process_index = process_index;
    u.start_time_ticks = process_index != kNone ? 1000 + process_index : 0;
    u.flags = KEPLERSHM_GPU_USE_COMPUTE | (busy_valid ? uint32_t{KEPLERSHM_GPU_USE_BUSY_VALID} : 0u);
    u.busy_ns = busy_ns;
    return u;
}

/// One second: processes 100, 101, 102 busy on the CPU; the package at 50 W; the GPUs at the given watts.
TestFrame gpu_frame(uint64_t second, double gpu0_w, double gpu1_w) {
    TestFrame f = simple_frame(second * kSecond, kSecond, {kSecond / 2, kSecond / 4, kSecond / 4},
                               {50 * kJoule, static_cast<uint64_t>(gpu0_w * kJoule), static_cast<uint64_t>(gpu1_w * kJoule)});
    f.gpu_devices = {device(0), device(1)};
    return f;
}

/// Kepler's rule (idle stays on the node), with every GPU's idle power configured at `idle` ("" detects it).
EstimatorOptions idle_on_node(const std::string& idle = "50") {
    EstimatorOptions options;
    options.idle_policy = IdlePolicy::none;
    if (!idle.empty()) options.model_set.gpu_idle = parse_gpu_idle_watts(idle);
    return options;
}

/// The GPU energy given to processes plus the unaccounted part, of zone `zone` in the last frame.
uint64_t given_uj(const Estimator& est, size_t zone) {
    const ZoneShares& gpu = est.last_attribution().zones.at(zone);
    uint64_t given = gpu.unaccounted_dynamic_uj;
    for (const uint64_t uj : gpu.dynamic_uj) given += uj;
    return given;
}

ExportOptions kepler010_with_processes() {
    ExportOptions o;
    o.names = MetricNames::kepler010;
    o.process_metrics = true;
    return o;
}

double process_gpu_joules(const std::vector<prometheus::MetricFamily>& families, uint32_t pid) {
    return series_sum(families, "kepler_process_gpu_joules_total", {{"pid", std::to_string(pid)}});
}

TEST(Gpu, IdleIsTheLowestPowerSeenUnusedAndActivePowerFollowsBusyTime) {
    Feed feed(gpu_node(), "gpu-split");
    Estimator est(idle_on_node(""));  // Kepler's rule: idle stays on the node
    // Nobody on the GPUs: 60 W and 50 W are their idle power.
    ASSERT_TRUE(est.process(feed.frame(gpu_frame(1, 60, 50))));
    // GPU 0 at 300 W used by 100 (300 ms busy) and 101 (100 ms); 102 runs on the CPU only; GPU 1 still idle.
    TestFrame busy = gpu_frame(2, 300, 50);
    busy.gpu_usage = {use(100, 0, 0, 300'000'000), use(101, 1, 0, 100'000'000)};
    ASSERT_TRUE(est.process(feed.frame(busy)));

    const auto families = collect(PrometheusExport(est, kepler010_with_processes()));
    EXPECT_NEAR(process_gpu_joules(families, 100), 180.0, 1e-6) << "3/4 of GPU 0's 240 J active energy";
    EXPECT_NEAR(process_gpu_joules(families, 101), 60.0, 1e-6);
    EXPECT_NEAR(process_gpu_joules(families, 102), 0.0, 1e-9) << "CPU time never earns GPU energy";

    const Labels gpu0 = {{"gpu", "0"}, {"gpu_uuid", "GPU-test-0"}, {"gpu_name", "NVIDIA H100 80GB HBM3"}, {"vendor", "nvidia"}};
    EXPECT_NEAR(series_value(families, "kepler_node_gpu_joules_total", gpu0).value_or(-1), 360.0, 1e-6);
    EXPECT_NEAR(series_value(families, "kepler_node_gpu_idle_joules_total", gpu0).value_or(-1), 120.0, 1e-6);
    EXPECT_NEAR(series_value(families, "kepler_node_gpu_active_joules_total", gpu0).value_or(-1), 240.0, 1e-6);
    EXPECT_NEAR(series_value(families, "kepler_node_gpu_watts", gpu0).value_or(-1), 300.0, 1e-6);
    EXPECT_NEAR(series_value(families, "kepler_node_gpu_active_watts", {{"gpu", "1"}}).value_or(-1), 0.0, 1e-9);
    EXPECT_EQ(series_value(families, "kepler_node_gpu_info", gpu0), 1.0);
    EXPECT_EQ(series_value(families, "kepler_node_gpu_info", {{"gpu", "1"}, {"gpu_uuid", "GPU-test-1"}}), 1.0);

    // The top view has a GPU column: process 100's 180 W of GPU 0 (its CPU share of the package besides).
    const std::string top = render_top(est, 5);
    EXPECT_NE(top.find("gpu 0     nvidia NVIDIA H100 80GB HBM3 GPU-test-0"), std::string::npos) << top;
    EXPECT_NE(top.find("   180.00 W       100"), std::string::npos) << top;
}

TEST(Gpu, BeforeTheGpuWasSeenUnusedItsIdleIsZeroAndAConfiguredIdleWins) {
    for (const bool configured : {false, true}) {
        SCOPED_TRACE(configured ? "--gpu-idle-watts 0=100" : "detected");
        Feed feed(gpu_node(), "gpu-idle");
        Estimator est(idle_on_node(configured ? "0=100" : ""));
        TestFrame f = gpu_frame(1, 300, 50);
        f.gpu_usage = {use(100, 0, 0, 500'000'000)};
        ASSERT_TRUE(est.process(feed.frame(f)));
        const auto families = collect(PrometheusExport(est, kepler010_with_processes()));
        EXPECT_NEAR(series_value(families, "kepler_node_gpu_idle_joules_total", {{"gpu", "0"}}).value_or(-1), configured ? 100.0 : 0.0, 1e-6);
        EXPECT_NEAR(process_gpu_joules(families, 100), configured ? 200.0 : 300.0, 1e-6) << "its only user gets all the active energy";
    }
}

TEST(Gpu, UsersWithoutBusySamplesShareEquallyAndAFrameWithoutUsersGivesNoProcessGpuEnergy) {
    Feed feed(gpu_node(), "gpu-equal");
    Estimator est(idle_on_node());
    // MIG-like: the driver lists two users of GPU 0 but samples neither (no BUSY_VALID).
    TestFrame listed = gpu_frame(1, 250, 50);
    listed.gpu_usage = {use(100, 0, 0, 0, false), use(101, 1, 0, 0, false)};
    ASSERT_TRUE(est.process(feed.frame(listed)));
    // A GPU meter without user data (no GPU sections: an older collector, a hwmon GPU): active energy is
    // nobody's, whatever ran on the CPU.
    TestFrame unknown = gpu_frame(2, 250, 50);
    unknown.gpu_devices.clear();
    ASSERT_TRUE(est.process(feed.frame(unknown)));

    const auto families = collect(PrometheusExport(est, kepler010_with_processes()));
    EXPECT_NEAR(process_gpu_joules(families, 100), 100.0, 1e-6) << "half of the first second's 200 J, none of the second's";
    EXPECT_NEAR(process_gpu_joules(families, 101), 100.0, 1e-6);
    EXPECT_NEAR(process_gpu_joules(families, 102), 0.0, 1e-9);
}

TEST(Gpu, EnergyIsConservedPerDeviceUnderEveryIdlePolicy) {
    for (const IdlePolicy policy : {IdlePolicy::cpu_share, IdlePolicy::even, IdlePolicy::none}) {
        SCOPED_TRACE(std::string(to_string(policy)));
        Feed feed(gpu_node(), "gpu-conserved");
        EstimatorOptions options;
        options.idle_policy = policy;
        Estimator est(options);
        ASSERT_TRUE(est.process(feed.frame(gpu_frame(1, 60, 50))));
        TestFrame f = gpu_frame(2, 300, 80);
        // A user the frame holds no process record of (left out for capacity) weighs on the unaccounted part.
        f.gpu_usage = {use(100, 0, 0, 200'000'000), use(999, kNone, 0, 200'000'000), use(101, 1, 1, 100'000'000)};
        ASSERT_TRUE(est.process(feed.frame(f)));
        const auto families = collect(PrometheusExport(est, ExportOptions{}));
        // Kepler 0.7's container totals hold every joule: processes, the unaccounted part and the node's idle.
        const double node_gpu = series_sum(families, "kepler_node_gpu_joules_total", {});
        EXPECT_NEAR(node_gpu, 60 + 50 + 300 + 80, 1e-6);
        const double containers = series_sum(families, "kepler_container_gpu_joules_total", {});
        const double idle_on_node = policy == IdlePolicy::none ? 60 + 50 + 60 + 50 : 0.0;
        EXPECT_NEAR(containers + idle_on_node, node_gpu, 1e-3);
    }
}

/// GPU 0 partitioned: its own record (0), then MIG instances with the given GPU instance ids and active
/// times (ns; nullopt: not measured), each a record of its own on GPU 0's zone.
std::vector<keplershm_gpu_device> mig_gpu(const std::vector<std::pair<uint32_t, std::optional<uint64_t>>>& instances) {
    std::vector<keplershm_gpu_device> out = {device(0), device(1)};
    out[0].flags |= KEPLERSHM_GPU_MIG_ENABLED;
    for (const auto& [id, active] : instances) {
        keplershm_gpu_device d = device(0);
        d.flags = KEPLERSHM_GPU_MIG_INSTANCE | KEPLERSHM_GPU_USAGE_VALID | (active ? uint32_t{KEPLERSHM_GPU_ACTIVE_VALID} : 0u);
        d.parent = 0;
        d.gpu_instance_id = id;
        d.compute_instance_id = 0;
        d.active_ns = active.value_or(0);
        keplershm::set_text(d.uuid, "MIG-test-" + std::to_string(id));
        out.push_back(d);
    }
    return out;
}

TEST(Gpu, MigInstancesShareTheGpusActivePowerByTheirMeasuredActivityAndTheirUsersEqually) {
    struct Case {
        const char* name;
        std::vector<std::pair<uint32_t, std::optional<uint64_t>>> instances;
        double p100, p101, p102;
    };
    // Records 2.. are the instances; 100 runs on the first, 101 and 102 on the second.
    for (const Case& c : {Case{"60 % and 20 %: 3:1, the second instance's part halved", {{1, 600'000'000}, {2, 200'000'000}}, 150, 25, 25},
                          Case{"one instance unmeasured: equal shares, as without GPM", {{1, 600'000'000}, {2, std::nullopt}}, 200.0 / 3, 200.0 / 3, 200.0 / 3},
                          Case{"nothing active: equal shares", {{1, 0}, {2, 0}}, 200.0 / 3, 200.0 / 3, 200.0 / 3},
                          Case{"an active instance without users keeps its part off every process", {{1, 600'000'000}, {2, 200'000'000}, {3, 200'000'000}}, 120, 20, 20}}) {
        SCOPED_TRACE(c.name);
        Feed feed(gpu_node(), "gpu-mig");
        Estimator est(idle_on_node());
        TestFrame f = gpu_frame(1, 250, 50);
        f.gpu_devices = mig_gpu(c.instances);
        f.gpu_usage = {use(100, 0, 2, 0, false), use(101, 1, 3, 0, false), use(102, 2, 3, 0, false)};
        ASSERT_TRUE(est.process(feed.frame(f)));
        const auto families = collect(PrometheusExport(est, kepler010_with_processes()));
        EXPECT_NEAR(process_gpu_joules(families, 100), c.p100, 1e-3);
        EXPECT_NEAR(process_gpu_joules(families, 101), c.p101, 1e-3);
        EXPECT_NEAR(process_gpu_joules(families, 102), c.p102, 1e-3);
        EXPECT_EQ(given_uj(est, 1), 200 * kJoule) << "conserved on the GPU";
    }
}

/// gpu_frame with processes 100 and 101 in container ml/train-0/trainer and 102 in lab/notebook/jupyter;
/// GPU 0's only user is a process the collector could not see (another pid namespace, or gone).
TestFrame allocated_gpu_frame(uint64_t second) {
    TestFrame f = gpu_frame(second, 250, 50);
    f.workloads = {{KEPLERSHM_WORKLOAD_POD, "c-train", "trainer", "uid-1", "train-0", "ml"},
                   {KEPLERSHM_WORKLOAD_POD, "c-book", "jupyter", "uid-2", "notebook", "lab"}};
    f.processes[0].workload = f.processes[1].workload = 0;
    f.processes[2].workload = 1;
    f.gpu_usage = {use(4'000'000, kNone, 0, 500'000'000)};
    return f;
}

TEST(Gpu, EnergyNoListedUserExplainsGoesToTheContainersTheKubeletAllocatedTheGpuTo) {
    // GPU 0: 250 W, 50 W idle (configured): 200 J active a second, its one user unknown to the frame.
    GpuAllocations exclusive;
    exclusive.add("GPU-test-0", {"ml", "train-0", "trainer"});
    GpuAllocations time_sliced = exclusive;
    time_sliced.add("gpu-test-0::1", {"lab", "notebook", "jupyter"});
    struct Case {
        const char* name;
        const GpuAllocations* allocations;
        double p100, p101, p102;
    };
    for (const Case& c : {Case{"no allocations: the unknown user's energy is nobody's", nullptr, 0, 0, 0},
                          Case{"held by trainer: its processes by CPU time (2:1)", &exclusive, 200.0 * 2 / 3, 200.0 / 3, 0},
                          Case{"time-sliced: each container half", &time_sliced, 100.0 * 2 / 3, 100.0 / 3, 100}}) {
        SCOPED_TRACE(c.name);
        Feed feed(gpu_node(), "gpu-alloc");
        Estimator est(idle_on_node());
        if (c.allocations != nullptr) est.set_gpu_allocations(std::make_shared<const GpuAllocations>(*c.allocations));
        ASSERT_TRUE(est.process(feed.frame(allocated_gpu_frame(1))));
        const auto families = collect(PrometheusExport(est, kepler010_with_processes()));
        EXPECT_NEAR(process_gpu_joules(families, 100), c.p100, 1e-3);
        EXPECT_NEAR(process_gpu_joules(families, 101), c.p101, 1e-3);
        EXPECT_NEAR(process_gpu_joules(families, 102), c.p102, 1e-3);
        EXPECT_EQ(given_uj(est, 1), 200 * kJoule) << "conserved per device: the processes' and nobody's";
    }
}

TEST(Gpu, AUserTheFrameKnowsKeepsItsShareAndAHolderOutsideTheFrameGetsNothing) {
    GpuAllocations a;
    a.add("GPU-test-0", {"ml", "train-0", "trainer"});
    a.add("GPU-test-0", {"ml", "gone-0", "trainer"});  // a holder with no process in the frame
    Feed feed(gpu_node(), "gpu-alloc-known");
    Estimator est(idle_on_node());
    est.set_gpu_allocations(std::make_shared<const GpuAllocations>(a));
    TestFrame f = allocated_gpu_frame(1);
    // 102 (the notebook's) is seen on GPU 0 too, as busy as the unknown user: half is its own.
    f.gpu_usage.push_back(use(102, 2, 0, 500'000'000));
    ASSERT_TRUE(est.process(feed.frame(f)));
    const auto families = collect(PrometheusExport(est, kepler010_with_processes()));
    EXPECT_NEAR(process_gpu_joules(families, 102), 100.0, 1e-3) << "a listed user keeps its busy share";
    EXPECT_NEAR(process_gpu_joules(families, 100) + process_gpu_joules(families, 101), 100.0, 1e-3)
        << "the unknown user's half goes to the one holder in the frame, whole";
}

TEST(Gpu, AMeterOfGpusAloneLeavesTheCpuToAModelAndTheGpusStayMeasured) {
    // A GPU VM: no RAPL, one GPU zone. The curve estimates the CPU; the GPU is the meter's.
    keplershm::WriterOptions o = node_options(4, kProcfsMetrics, {gpu_zone(0)});
    o.gpu_device_capacity = 1;
    o.gpu_usage_capacity = 4;
    Feed feed(o, "gpu-vm");
    Estimator est(idle_on_node());
    TestFrame f = simple_frame(kSecond, kSecond, {kSecond / 2, kSecond / 4}, {250 * kJoule});
    f.gpu_devices = {device(0)};
    f.gpu_devices[0].zone_index = 0;
    f.gpu_usage = {use(101, 1, 0, 100'000'000)};
    ASSERT_TRUE(est.process(feed.frame(f)));
    EXPECT_EQ(est.primary_model(), "curve");
    const auto families = collect(PrometheusExport(est, kepler010_with_processes()));
    EXPECT_NEAR(series_value(families, "kepler_node_gpu_joules_total", {{"gpu", "0"}}).value_or(-1), 250.0, 1e-6);
    EXPECT_GT(series_sum(families, "kepler_node_cpu_joules_total", {{"zone", "package"}}), 0.0) << "the curve's CPU estimate";
    EXPECT_NEAR(process_gpu_joules(families, 101), 200.0, 1e-6);
    EXPECT_NEAR(process_gpu_joules(families, 100), 0.0, 1e-9);
}

}  // namespace
