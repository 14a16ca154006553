// End to end, GPUs: the real collector loads the fake libnvidia-ml.so.1 (tests/fakes/nvml) with two GPUs,
// three child processes of this test live in two containers of one pod (real cgroup v2 directories named
// as kubelet and containerd name them), the kepler-estimate binary splits each GPU's active power by the
// processes' SM time, and a real Prometheus server scrapes it. Per process, container and pod the GPU
// watts are the expected split within 1 %; the node's GPU energy is the processes' plus the idle part
// (--idle-policy none keeps idle on the node); no GPU series is negative.
//
// GPU 0 draws 300 W, GPU 1 60 W, both idle at 60 W (--gpu-idle-watts): GPU 0's 240 W active go 3:1 to
// A (SM 60 %) and B (SM 20 %); GPU 1 has no active power, so C (SM 30 %) gets none. A is container 1's,
// B and C container 2's. The children sleep: they use no CPU at all, as a process waiting on its GPU.
//
// Two more runs of the same pipeline: a GPU user the collector cannot see, charged to the container the
// kubelet's pod-resources API (a fake kubelet over gRPC) says holds the GPU; and a GPU in MIG mode whose
// instances' activity comes from GPM.
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "http_server.hpp"
#include "pod_resources/fake_kubelet.hpp"
#include "scenario_env.hpp"
#include "support/prometheus_server.hpp"
#include "support/subprocess.hpp"
#include "support/test_frames.hpp"

using namespace estimate_test;
namespace fs = std::filesystem;

#if defined(COLLECT_BINARY) && defined(FAKE_NVML_LIBRARY)
namespace {

std::string random_hex(size_t digits) {
    static std::mt19937_64 rng{std::random_device{}()};
    std::string out;
    while (out.size() < digits) out += fmt::format("{:016x}", rng());
    return out.substr(0, digits);
}

/// The mount point of the cgroup v2 hierarchy (its root, not a namespace's subtree): /sys/fs/cgroup on a
/// unified host, /sys/fs/cgroup/unified on a hybrid one. Empty when none is mounted.
fs::path cgroup2_mount() {
    std::ifstream in("/proc/self/mountinfo");
    for (std::string line; std::getline(in, line);) {
        const size_t dash = line.find(" - ");
        if (dash == std::string::npos) continue;
        std::istringstream left(line.substr(0, dash)), right(line.substr(dash + 3));
        std::string id, parent, dev, root, mount_point, fstype;
        left >> id >> parent >> dev >> root >> mount_point;
        right >> fstype;
        if (fstype == "cgroup2" && root == "/" && fs::exists(fs::path(mount_point) / "cgroup.controllers")) return mount_point;
    }
    return {};
}

/// Children of this test that only sleep, each moved into a container scope of one fake Kubernetes pod:
/// kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod<uid>.slice/cri-containerd-<id>.scope,
/// the systemd driver's layout under cgroup v2 (tests/kepler-collect/fixtures/cgroup_paths.tsv). The uid
/// and ids are random, so parallel runs do not meet. At destruction the children are killed and reaped and
/// the pod's cgroups removed, leaf to root (the shared slices only when no other run still uses them).
class FakePod {
public:
    FakePod(const fs::path& cgroup_root, size_t containers) {
        pod_uid_ = fmt::format("{}-{}-{}-{}-{}", random_hex(8), random_hex(4), random_hex(4), random_hex(4), random_hex(12));
        std::string systemd_uid = pod_uid_;
        std::replace(systemd_uid.begin(), systemd_uid.end(), '-', '_');
        const fs::path qos = cgroup_root / "kubepods.slice/kubepods-besteffort.slice";
        pod_dir_ = qos / fmt::format("kubepods-besteffort-pod{}.slice", systemd_uid);
        dirs_ = {cgroup_root / "kubepods.slice", qos, pod_dir_};
        for (size_t i = 0; i < containers; ++i) {
            container_ids_.push_back(random_hex(64));
            dirs_.push_back(pod_dir_ / fmt::format("cri-containerd-{}.scope", container_ids_.back()));
        }
        for (const fs::path& d : dirs_) {
            std::error_code ec;
            fs::create_directory(d, ec);
            if (ec) {
                why_ = fmt::format("cannot create {}: {}", d.string(), ec.message());
                return;
            }
        }
    }

    ~FakePod() {
        for (const pid_t pid : pids_) kill(pid, SIGKILL);
        for (const pid_t pid : pids_) waitpid(pid, nullptr, 0);
        for (auto d = dirs_.rbegin(); d != dirs_.rend(); ++d) {
            // An emptied cgroup can stay busy for a moment after its last task was reaped.
            for (int attempt = 0; attempt < 50 && ::rmdir(d->c_str()) != 0 && errno == EBUSY; ++attempt) {
                std::this_thread::sleep_for(std::chrono::milliseconds(20));
            }
        }
    }
    FakePod(const FakePod&) = delete;
    FakePod& operator=(const FakePod&) = delete;

    /// "" when the pod's cgroups exist, else why not.
    [[nodiscard]] const std::string& why_not() const { return why_; }

    /// Starts a child in container `container` that sleeps (or, `nibbling`, uses ~10 % of a CPU: a process
    /// that feeds a GPU); its pid, or -1 with why_not() saying why.
    pid_t add_process(size_t container, bool nibbling = false) {
        const pid_t pid = fork();
        if (pid < 0) {
            why_ = "fork failed";
            return -1;
        }
        if (pid == 0) {
            while (nibbling) {
                const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(1);
                while (std::chrono::steady_clock::now() < until) {
                }
                std::this_thread::sleep_for(std::chrono::milliseconds(9));
            }
            for (;;) pause();  // no CPU at all: a process waiting on its GPU
        }
        pids_.push_back(pid);
        const fs::path procs = dirs_.at(3 + container) / "cgroup.procs";
        std::ofstream out(procs);
        out << pid << std::flush;
        if (!out) why_ = fmt::format("cannot move pid {} into {}: {}", pid, procs.string(), std::strerror(errno));
        return out ? pid : -1;
    }

    [[nodiscard]] const std::string& pod_uid() const { return pod_uid_; }
    [[nodiscard]] const std::string& container_id(size_t i) const { return container_ids_.at(i); }
    [[nodiscard]] std::string cgroup_of(pid_t pid) const { return read_file(fmt::format("/proc/{}/cgroup", pid)); }

private:
    std::string pod_uid_;
    fs::path pod_dir_;
    std::vector<fs::path> dirs_;  // kubepods.slice, the QoS slice, the pod's slice, its container scopes
    std::vector<std::string> container_ids_;
    std::vector<pid_t> pids_;
    std::string why_;
};

/// A fake pod on this machine with a process in each listed container (`nibbling`: using a little CPU),
/// or why this machine cannot run the end-to-end tests: they need a Prometheus server, root and a cgroup v2
/// hierarchy to place processes in.
struct PodOnHost {
    std::unique_ptr<FakePod> pod;
    std::vector<pid_t> pids;
    std::string skip;  // "" when the pod and its processes are there
};

PodOnHost pod_on_host(size_t containers, const std::vector<std::pair<size_t, bool>>& processes) {
    PodOnHost out;
    const fs::path cgroup_root = cgroup2_mount();
    if (!fs::exists("/usr/bin/prometheus")) out.skip = "no Prometheus server (Debian package prometheus)";
    else if (geteuid() != 0) out.skip = "not root: placing processes in cgroups needs it";
    else if (cgroup_root.empty()) out.skip = "no cgroup v2 hierarchy mounted (cgroup.controllers at the root of a cgroup2 mount)";
    if (!out.skip.empty()) return out;
    out.pod = std::make_unique<FakePod>(cgroup_root, containers);
    if (!out.pod->why_not().empty()) {
        out.skip = "cannot make a pod's cgroups: " + out.pod->why_not();
        return out;
    }
    for (const auto& [container, nibbling] : processes) {
        const pid_t pid = out.pod->add_process(container, nibbling);
        if (pid < 0) {
            out.skip = "cannot place processes in cgroups (v1 host, or no permission): " + out.pod->why_not();
            return out;
        }
        out.pids.push_back(pid);
    }
    return out;
}

nlohmann::json gpu_process(pid_t pid, unsigned sm_util) {
    return {{"pid", pid}, {"type", "compute"}, {"used_memory_bytes", 1ull << 30}, {"sm_util", sm_util}};
}

constexpr const char* kUuid0 = "GPU-e2e0e2e0-0000-4000-8000-000000000000";
constexpr const char* kUuid1 = "GPU-e2e0e2e0-0000-4000-8000-000000000001";
constexpr const char* kGpuName = "NVIDIA H100 80GB HBM3";

/// The pipeline under test, started in `dir` on a fake RAPL and the fake NVML (the scenario the caller's
/// fake_nvml::ScenarioEnv names): the real collector (procfs, as the other end-to-end tests: the same
/// source everywhere; eBPF needs BTF and privileges), kepler-estimate (idle kept on the node, as Kepler
/// 0.10) and a real Prometheus server scraping it. Each takes the extra arguments given.
class GpuNode {
public:
    GpuNode(const fs::path& dir, const std::vector<std::string>& collector_args, const std::vector<std::string>& estimator_args)
        : dir_(dir),
          rapl_(dir / "sys"),
          segment_(unique_segment_name("e2e-gpu")),
          cleanup_{segment_},
          collector_(with(collector_args, {COLLECT_BINARY, "--shm-name", segment_, "--interval", "1s", "--source", "procfs",
                                           "--sysfs-root", (dir / "sys").string(), "--replace-live", "--node-name", "node-gpu",
                                           "--nvml-library", FAKE_NVML_LIBRARY}),
                     (dir / "collector.log").string()),
          port_(free_port()),
          estimator_(with(estimator_args, {ESTIMATE_BINARY, "--shm-name", segment_, "--listen", fmt::format("127.0.0.1:{}", port_),
                                           "--idle-policy", "none"}),
                     (dir / "estimator.log").string()),
          prometheus_port_(free_port()),
          prometheus_(start_prometheus(dir, port_, prometheus_port_)) {}

    [[nodiscard]] std::string logs() const {
        return "collector:\n" + read_file((dir_ / "collector.log").string()) + "estimator:\n" + read_file((dir_ / "estimator.log").string());
    }
    [[nodiscard]] std::optional<double> query(const std::string& promql) const { return ::estimate_test::query(prometheus_port_, promql); }
    [[nodiscard]] std::string query_json(const std::string& promql) const { return ::estimate_test::query_json(prometheus_port_, promql); }
    /// Waits up to a minute for `promql` to have a value above 0: the first frames are in.
    [[nodiscard]] bool wait_for_data(const std::string& promql) const {
        return wait_for([&] { return query(promql).value_or(0) > 0; }, std::chrono::seconds(60));
    }
    /// A series' average over the last 10 s of scrapes (a failure, with the logs, when it has none).
    double avg(const std::string& series) const {
        const std::optional<double> v = query(fmt::format("avg_over_time({}[10s])", series));
        EXPECT_TRUE(v.has_value()) << series << " has no samples\n" << logs();
        return v.value_or(-1e9);
    }

private:
    static std::vector<std::string> with(const std::vector<std::string>& extra, std::vector<std::string> argv) {
        argv.insert(argv.end(), extra.begin(), extra.end());
        return argv;
    }

    fs::path dir_;
    FakeRapl rapl_;
    std::string segment_;
    SegmentCleanup cleanup_;
    Child collector_;
    int port_;
    Child estimator_;
    int prometheus_port_;
    Child prometheus_;
};

TEST(GpuEndToEnd, ProcessContainerAndPodGetTheirShareOfEachGpuAndEnergyIsConserved) {
    const PodOnHost host = pod_on_host(2, {{0, false}, {1, false}, {1, false}});
    if (!host.skip.empty()) GTEST_SKIP() << host.skip;
    const FakePod& pod = *host.pod;
    const pid_t a = host.pids[0], b = host.pids[1], c = host.pids[2];
    TempDir dir;
    ASSERT_NE(pod.cgroup_of(a).find(pod.container_id(0)), std::string::npos) << pod.cgroup_of(a);
    ASSERT_NE(pod.cgroup_of(c).find(pod.container_id(1)), std::string::npos) << pod.cgroup_of(c);

    const fs::path scenario = dir.path() / "scenario.json";
    fake_nvml::write_scenario(scenario, {{"devices",
                               {{{"uuid", kUuid0}, {"name", kGpuName}, {"power_w", 300}, {"power_limit_w", 700},
                                 {"processes", {gpu_process(a, 60), gpu_process(b, 20)}}},
                                {{"uuid", kUuid1}, {"name", kGpuName}, {"power_w", 60}, {"power_limit_w", 700},
                                 {"processes", {gpu_process(c, 30)}}}}}});
    const fake_nvml::ScenarioEnv env(scenario);

    const GpuNode pipeline(dir.path(), {"--kube", "off"}, {"--metric-names", "both", "--process-metrics", "--gpu-idle-watts", "0=60,1=60"});

    const std::string node0 = R"(kepler_node_gpu_watts{gpu="0"})";
    ASSERT_TRUE(pipeline.wait_for_data(node0)) << pipeline.logs();
    // From here on every frame has the three users (they were on the GPUs before the collector started);
    // the window starts 3 s later, past the collector's first frame (no busy samples yet: equal shares).
    std::this_thread::sleep_for(std::chrono::seconds(13));
    auto avg = [&](const std::string& series) { return pipeline.avg(series); };
    auto process = [&](pid_t pid) { return avg(fmt::format(R"(kepler_process_gpu_watts{{pid="{}"}})", pid)); };
    auto container = [&](size_t i) { return avg(fmt::format(R"(kepler_container_gpu_watts{{container_id="{}"}})", pod.container_id(i))); };

    const double watts_a = process(a), watts_b = process(b), watts_c = process(c);
    const double container1 = container(0), container2 = container(1);
    const double pod_watts = avg(fmt::format(R"(kepler_pod_gpu_watts{{mode="",pod_id="{}"}})", pod.pod_uid()));
    const double gpu0 = avg(node0), gpu1 = avg(R"(kepler_node_gpu_watts{gpu="1"})");
    const double idle0 = avg(R"(kepler_node_gpu_idle_watts{gpu="0"})"), idle1 = avg(R"(kepler_node_gpu_idle_watts{gpu="1"})");
    const double active0 = avg(R"(kepler_node_gpu_active_watts{gpu="0"})");
    std::cout << fmt::format("measured W: A {:.3f} B {:.3f} C {:.3f} | container1 {:.3f} container2 {:.3f} pod {:.3f} | "
                             "gpu0 {:.3f} (idle {:.3f}, active {:.3f}) gpu1 {:.3f} (idle {:.3f})\n",
                             watts_a, watts_b, watts_c, container1, container2, pod_watts, gpu0, idle0, active0, gpu1, idle1);

    EXPECT_NEAR(watts_a, 180.0, 1.8) << "A: 3/4 of GPU 0's 240 W active";
    EXPECT_NEAR(watts_b, 60.0, 0.6) << "B: 1/4 of GPU 0's 240 W active";
    EXPECT_NEAR(watts_c, 0.0, 3.0) << "C: GPU 1 has no active power (within 1 % of GPU 0's 300 W)";
    EXPECT_NEAR(container1, 180.0, 1.8) << "container 1: A";
    EXPECT_NEAR(container2, 60.0, 0.6) << "container 2: B and C";
    EXPECT_NEAR(pod_watts, 240.0, 2.4) << "the pod: all active GPU power";
    EXPECT_NEAR(gpu0, 300.0, 3.0);
    EXPECT_NEAR(gpu1, 60.0, 0.6);
    EXPECT_NEAR(idle0, 60.0, 0.6) << "--gpu-idle-watts 0=60";
    EXPECT_NEAR(idle1, 60.0, 0.6) << "--gpu-idle-watts 1=60";
    EXPECT_NEAR(active0, 240.0, 2.4);

    // Kepler 0.7's container GPU energy, dynamic and idle: the same split, idle on nobody (policy none).
    const std::optional<double> dynamic07 = pipeline.query(fmt::format(R"(rate(kepler_container_gpu_joules_total{{container_id="{}",mode="dynamic"}}[10s]))", pod.container_id(0)));
    EXPECT_NEAR(dynamic07.value_or(-1), 180.0, 1.8) << "kepler_container_gpu_joules_total{mode=dynamic}, container 1";
    const std::optional<double> idle07 = pipeline.query(fmt::format(R"(sum(rate(kepler_container_gpu_joules_total{{container_id=~"{}|{}",mode="idle"}}[10s])))",
                                     pod.container_id(0), pod.container_id(1)));
    EXPECT_NEAR(idle07.value_or(-1), 0.0, 0.01);

    // The devices, as the scenario names them.
    for (const auto& [gpu, uuid] : {std::pair{"0", kUuid0}, std::pair{"1", kUuid1}}) {
        EXPECT_EQ(pipeline.query(fmt::format(R"(kepler_node_gpu_info{{gpu="{}",gpu_uuid="{}",gpu_name="{}",vendor="nvidia",node_name="node-gpu"}})",
                                                     gpu, uuid, kGpuName)),
                  1.0)
            << "GPU " << gpu << "\n"
            << pipeline.logs();
    }

    // Conservation, in one evaluation: the processes' GPU energy (Kepler 0.11's series: no mode label)
    // plus the idle energy the node kept is the node's GPU energy (0.11's series: with a gpu label).
    const std::string processes = R"(sum(kepler_process_gpu_joules_total{mode=""}))";
    const std::string idle = "sum(kepler_node_gpu_idle_joules_total)";
    const std::string node = R"(sum(kepler_node_gpu_joules_total{gpu!=""}))";
    const std::optional<double> node_joules = pipeline.query(node);
    const std::optional<double> gap = pipeline.query(fmt::format("{} + {} - {}", processes, idle, node));
    ASSERT_TRUE(node_joules && gap) << pipeline.logs();
    std::cout << fmt::format("conservation: node GPU {:.1f} J, processes + idle - node = {:.4f} J\n", *node_joules, *gap);
    EXPECT_GT(*node_joules, 0.0);
    EXPECT_NEAR(*gap, 0.0, 0.01 * *node_joules) << "GPU energy not given to a process is lost";
    const std::optional<double> pods_vs_processes = pipeline.query(fmt::format(R"(sum(kepler_pod_gpu_joules_total{{mode="",pod_id="{}"}}) - sum(kepler_process_gpu_joules_total{{mode="",pid=~"{}|{}|{}"}}))",
                                     pod.pod_uid(), a, b, c));
    EXPECT_NEAR(pods_vs_processes.value_or(-1e9), 0.0, 0.01 * *node_joules) << "the pod's GPU energy is its processes'";

    // Nothing negative at any scrape of the last minute (the count per step keeps the names apart); no
    // GPU counter went back.
    const std::string gpu_series = R"({__name__=~"kepler_.*gpu.*"})";
    EXPECT_GT(pipeline.query(fmt::format("min_over_time(count({} >= 0)[1m:1s])", gpu_series)).value_or(0), 10.0);
    EXPECT_FALSE(pipeline.query(fmt::format("max_over_time(count({} < 0)[1m:1s])", gpu_series)).has_value())
        << "a GPU series below 0 at some scrape";
    std::string resets, which;
    for (const char* family : {"kepler_node_gpu_joules_total", "kepler_node_gpu_active_joules_total", "kepler_node_gpu_idle_joules_total",
                               "kepler_process_gpu_joules_total", "kepler_container_gpu_joules_total", "kepler_pod_gpu_joules_total"}) {
        resets += fmt::format("{}sum(resets({}[1m]))", resets.empty() ? "" : " + ", family);
        which += fmt::format("{}: {}\n", family, pipeline.query_json(fmt::format("resets({}[1m]) > 0", family)));
    }
    EXPECT_EQ(pipeline.query(resets), 0.0) << "a GPU counter decreased; the series that did:\n" << which;
}

/// The kubelet's /pods as the collector reads it for names: `pod` is ml/train-0 with containers "trainer"
/// (container 0) and "notebook" (container 1).
std::string kubelet_pods(const FakePod& pod) {
    nlohmann::json statuses = nlohmann::json::array();
    for (const auto& [i, name] : {std::pair{0, "trainer"}, std::pair{1, "notebook"}}) {
        statuses.push_back({{"name", name}, {"containerID", "containerd://" + pod.container_id(i)}});
    }
    return nlohmann::json{{"kind", "PodList"}, {"apiVersion", "v1"}, {"metadata", nlohmann::json::object()},
                          {"items", {{{"metadata", {{"name", "train-0"}, {"namespace", "ml"}, {"uid", pod.pod_uid()}}},
                                      {"status", {{"containerStatuses", statuses}}}}}}}
        .dump();
}

// GPU 0 draws 300 W, idle 60 W: of its 240 W active, A (container "trainer") is sampled at SM 20 % and a
// process the collector cannot see (a pid no /proc has: another pid namespace) at SM 60 %. The kubelet
// allocated the GPU to container "notebook", whose one process B (using a little CPU) is not listed on the
// GPU: the unseen user's 180 W are the notebook's, A keeps its 60 W.
TEST(GpuEndToEnd, AGpuUserTheCollectorCannotSeeIsChargedToTheContainerTheKubeletAllocatedTheGpuTo) {
    const PodOnHost host = pod_on_host(2, {{0, false}, {1, true}});  // B nibbles: a frame holds it
    if (!host.skip.empty()) GTEST_SKIP() << host.skip;
    const FakePod& pod = *host.pod;
    const pid_t a = host.pids[0], b = host.pids[1];
    TempDir dir;
    constexpr pid_t kUnseen = 0x7ffffff0;  // above any pid_max (PID_MAX_LIMIT is 2^22)

    const fs::path scenario = dir.path() / "scenario.json";
    fake_nvml::write_scenario(scenario, {{"devices", {{{"uuid", kUuid0}, {"name", kGpuName}, {"power_w", 300}, {"power_limit_w", 700},
                                                       {"processes", {gpu_process(a, 20), gpu_process(kUnseen, 60)}}}}}});
    const fake_nvml::ScenarioEnv env(scenario);
    const std::string pods = kubelet_pods(pod);
    kepler::testing::FakeHttpServer kubelet_http([&](const kepler::testing::FakeHttpServer::Request&) {
        return kepler::testing::FakeHttpServer::Response{200, pods, {}};
    });
    kepler::testing::FakeKubelet kubelet(dir.path() / "pod-resources.sock");
    kubelet.set_pods({{"train-0", "ml", {{"trainer", {}}, {"notebook", {{"nvidia.com/gpu", {kUuid0}}}}}}});

    const GpuNode pipeline(dir.path(), {"--kube", "kubelet", "--kubelet-url", kubelet_http.url()},
                           {"--metric-names", "kepler-0.10", "--gpu-idle-watts", "0=60", "--pod-resources", kubelet.socket().string(),
                            "--pod-resources-refresh", "1s"});
    const std::string notebook = fmt::format(R"(kepler_container_gpu_watts{{container_id="{}",container_name="notebook"}})", pod.container_id(1));
    // Names reach the frames once the collector's first pod list is in; from then on 10 s of scrapes.
    ASSERT_TRUE(pipeline.wait_for_data(notebook)) << pipeline.logs();
    std::this_thread::sleep_for(std::chrono::seconds(11));
    auto avg = [&](const std::string& series) { return pipeline.avg(series); };
    const double watts_a = avg(fmt::format(R"(kepler_process_gpu_watts{{pid="{}"}})", a));
    const double watts_b = avg(fmt::format(R"(kepler_process_gpu_watts{{pid="{}"}})", b));
    const double trainer = avg(R"(kepler_container_gpu_watts{container_name="trainer"})");
    const double notebook_watts = avg(notebook);
    const double pod_watts = avg(R"(kepler_pod_gpu_watts{pod_name="train-0",pod_namespace="ml"})");
    std::cout << fmt::format("measured W: A {:.3f} B {:.3f} | trainer {:.3f} notebook {:.3f} pod {:.3f}\n", watts_a, watts_b, trainer,
                             notebook_watts, pod_watts);
    EXPECT_NEAR(watts_a, 60.0, 0.6) << "A: its own SM share, 1/4 of 240 W";
    EXPECT_NEAR(watts_b, 180.0, 1.8) << "B: the unseen user's 3/4, as the notebook's one process";
    EXPECT_NEAR(trainer, 60.0, 0.6);
    EXPECT_NEAR(notebook_watts, 180.0, 1.8) << "the container the kubelet allocated the GPU to";
    EXPECT_NEAR(pod_watts, 240.0, 2.4) << "the pod: all active GPU power, none lost";
    EXPECT_GE(kubelet.calls(), 5u) << "the estimator reads the kubelet every --pod-resources-refresh";
    EXPECT_EQ(pipeline.query("kepler_estimator_gpu_devices_allocated"), 1.0);
    EXPECT_EQ(pipeline.query("kepler_estimator_pod_resources_errors_total"), 0.0);
}

// A GPU partitioned into two MIG instances, measured through GPM: GPU instance 1 at 60 % graphics activity
// runs A (container 1), GPU instance 2 at 20 % runs B and C (container 2). The driver samples no process
// under MIG: of the 240 W active, GI 1 gets 3/4 (A 180 W) and GI 2 1/4, halved between B and C (30 W each).
TEST(GpuEndToEnd, MigInstancesShareTheGpuByTheirGpmActivityAndTheirProcessesEqually) {
    const PodOnHost host = pod_on_host(2, {{0, false}, {1, false}, {1, false}});
    if (!host.skip.empty()) GTEST_SKIP() << host.skip;
    const FakePod& pod = *host.pod;
    const pid_t a = host.pids[0], b = host.pids[1], c = host.pids[2];
    TempDir dir;

    auto instance = [](unsigned id, double percent, std::vector<nlohmann::json> processes) {
        return nlohmann::json{{"gpu_instance_id", id}, {"compute_instance_id", 0}, {"gr_active_percent", percent}, {"processes", processes}};
    };
    const fs::path scenario = dir.path() / "scenario.json";
    fake_nvml::write_scenario(scenario, {{"devices", {{{"uuid", kUuid0}, {"name", kGpuName}, {"power_w", 300}, {"mig_mode", 1}, {"gpm", true},
                                                       {"mig_devices", {instance(1, 60, {gpu_process(a, 0)}),
                                                                        instance(2, 20, {gpu_process(b, 0), gpu_process(c, 0)})}}}}}});
    const fake_nvml::ScenarioEnv env(scenario);
    const GpuNode pipeline(dir.path(), {"--kube", "off"}, {"--metric-names", "kepler-0.10", "--gpu-idle-watts", "0=60"});
    const std::string process_a = fmt::format(R"(kepler_process_gpu_watts{{pid="{}"}})", a);
    ASSERT_TRUE(pipeline.wait_for_data(process_a)) << pipeline.logs();
    std::this_thread::sleep_for(std::chrono::seconds(11));
    const double watts_a = pipeline.avg(process_a);
    const double watts_b = pipeline.avg(fmt::format(R"(kepler_process_gpu_watts{{pid="{}"}})", b));
    const double watts_c = pipeline.avg(fmt::format(R"(kepler_process_gpu_watts{{pid="{}"}})", c));
    const double container2 = pipeline.avg(fmt::format(R"(kepler_container_gpu_watts{{container_id="{}"}})", pod.container_id(1)));
    const double pod_watts = pipeline.avg(fmt::format(R"(kepler_pod_gpu_watts{{mode="",pod_id="{}"}})", pod.pod_uid()));
    std::cout << fmt::format("measured W: A {:.3f} B {:.3f} C {:.3f} | container2 {:.3f} pod {:.3f}\n", watts_a, watts_b, watts_c,
                             container2, pod_watts);
    EXPECT_NEAR(watts_a, 180.0, 1.8) << "GI 1: 60 of 80 activity points of 240 W";
    EXPECT_NEAR(watts_b, 30.0, 0.3) << "GI 2's 60 W, halved";
    EXPECT_NEAR(watts_c, 30.0, 0.3);
    EXPECT_NEAR(container2, 60.0, 0.6);
    EXPECT_NEAR(pod_watts, 240.0, 2.4) << "all active power, none lost";
}

}  // namespace
#endif
