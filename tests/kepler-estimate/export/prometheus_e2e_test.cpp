// End to end: a test writer or the real collector publishes frames, the kepler-estimate binary
// serves /metrics, a real Prometheus server scrapes it, and PromQL says that the containers' energy
// sums to the node's, that no counter ever went backwards (across a writer restart), that the
// queries of Kepler's dashboards return data for each name set, and that real QEMU guests are VMs.
#include <curl/curl.h>
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <map>
#include <functional>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "support/metric_series.hpp"
#include "support/prometheus_server.hpp"
#include "support/subprocess.hpp"
#include "support/test_frames.hpp"

using namespace estimate_test;
namespace fs = std::filesystem;

namespace {

uint64_t now_ns() {
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

keplershm::WriterOptions metered_node() {
    keplershm::WriterOptions o = node_options(4, kProcfsMetrics, {zone_info("package-0", KEPLERSHM_ZONE_PACKAGE, 0), zone_info("dram-0", KEPLERSHM_ZONE_DRAM, 0)});
    o.replace_live = true;
    return o;
}

/// Publishes a frame every 100 ms from its own thread, as a collector would. Thread-safe via stop().
class BackgroundWriter {
public:
    explicit BackgroundWriter(std::string name) : name_(std::move(name)), thread_([this] { run(); }) {}
    ~BackgroundWriter() { stop(); }
    void stop() {
        stop_ = true;
        if (thread_.joinable()) thread_.join();
    }

private:
    void run() {
        TestWriter writer(name_, metered_node());
        uint64_t last = now_ns();
        for (uint64_t i = 0; !stop_; ++i) {
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
            const uint64_t t = now_ns();
            TestFrame f = simple_frame(last, t - last, {10'000'000 + i % 7 * 1'000'000, 20'000'000, 3'000'000 * (i % 3)},
                                       {2'000'000 + i % 5 * 100'000, 400'000});
            f.workloads = {TestWorkload{.kind = KEPLERSHM_WORKLOAD_POD, .container_id = "c-web", .container_name = "web", .pod_uid = "u1",
                                        .pod_name = "web-0", .pod_namespace = "shop"},
                           TestWorkload{.kind = KEPLERSHM_WORKLOAD_POD, .container_id = "c-db", .container_name = "db", .pod_uid = "u2",
                                        .pod_name = "db-0", .pod_namespace = "shop"}};
            f.processes[0].workload = 0;
            f.processes[1].workload = 1;
            f.unaccounted_cpu_ns = 1'000'000;
            writer.write(f);
            last = t;
        }
    }

    std::string name_;
    std::atomic<bool> stop_{false};
    std::thread thread_;
};

/// The estimator's /metrics once it has Kepler series (`marker`), or "" after 30 s.
std::string scrape_when_ready(int port, const std::string& marker) {
    std::string metrics;
    wait_for([&] {
        return http_get(fmt::format("http://127.0.0.1:{}/metrics", port), metrics) == 200 && metrics.find(marker) != std::string::npos;
    }, std::chrono::seconds(30));
    return metrics;
}

/// promtool's complaints about an exposition ("" when clean).
std::string promtool_lint(const fs::path& file, const std::string& text, int& status) {
    std::ofstream(file) << text;
    std::string lint;
    status = promtool_check(file.string(), lint);
    return lint;
}

/// At several evaluation times: the containers' energy equals the node's (each scrape is one
/// consistent snapshot), and no counter was ever reset. `node` is the PromQL of the node's total.
void expect_conserved_and_monotonic(int port, const std::string& node) {
    for (int i = 0; i < 3; ++i) {
        const std::optional<double> diff = query(port, "sum(kepler_container_joules_total) - (" + node + ")");
        const std::optional<double> total = query(port, node);
        ASSERT_TRUE(diff && total);
        EXPECT_GT(*total, 0.0);
        EXPECT_NEAR(*diff, 0.0, 1e-9 * *total + 1e-6) << "container energy must sum to the node's";
        std::this_thread::sleep_for(std::chrono::milliseconds(1100));
    }
    EXPECT_EQ(query(port, "sum(resets(kepler_node_package_joules_total[5m])) + sum(resets(kepler_container_joules_total[5m]))"), 0.0)
        << "no counter may decrease, also across the writer restart";
}

}  // namespace

TEST(PrometheusEndToEnd, ContainerEnergySumsToTheNodeInPromQL) {
    if (!fs::exists("/usr/bin/prometheus")) GTEST_SKIP() << "no Prometheus server (Debian package prometheus)";
    TempDir dir;
    const std::string segment = unique_segment_name("e2e");
    const int estimator_port = free_port();
    const int prometheus_port = free_port();
    auto writer = std::make_unique<BackgroundWriter>(segment);
    Child estimator({ESTIMATE_BINARY, "--shm-name", segment, "--listen", fmt::format("127.0.0.1:{}", estimator_port), "--process-metrics"},
                    (dir.path() / "estimator.log").string());

    // The estimator's own exposition, live (with the latency histogram), passes promtool.
    std::string metrics;
    ASSERT_TRUE(wait_for([&] {
        return http_get(fmt::format("http://127.0.0.1:{}/metrics", estimator_port), metrics) == 200 &&
               metrics.find("kepler_container_joules_total{") != std::string::npos;
    }, std::chrono::seconds(20))) << read_file((dir.path() / "estimator.log").string());
    std::ofstream(dir.path() / "live.prom") << metrics;
    std::string lint;
    EXPECT_EQ(promtool_check((dir.path() / "live.prom").string(), lint), 0) << lint;
    EXPECT_EQ(lint, "");
    EXPECT_NE(metrics.find("kepler_estimator_frame_latency_seconds_bucket"), std::string::npos);
    EXPECT_NE(metrics.find("\nkepler_estimator_self_cpu_seconds_total "), std::string::npos);

    Child prometheus = start_prometheus(dir.path(), estimator_port, prometheus_port);
    const std::string node = "sum(kepler_node_package_joules_total) + sum(kepler_node_dram_joules_total)";
    ASSERT_TRUE(wait_for([&] { return query(prometheus_port, "count(kepler_container_joules_total)").value_or(0) >= 4; }, std::chrono::seconds(60)))
        << read_file((dir.path() / "prometheus.log").string());

    // Restart the writer (a collector restart: new generation, its counters start over).
    writer->stop();
    writer.reset();
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    writer = std::make_unique<BackgroundWriter>(segment);
    const double before = query(prometheus_port, node).value_or(0);
    ASSERT_TRUE(wait_for([&] { return query(prometheus_port, node).value_or(0) > before + 0.5; }, std::chrono::seconds(30)));

    expect_conserved_and_monotonic(prometheus_port, node);
    EXPECT_GE(query(prometheus_port, "count(kepler_process_joules_total)").value_or(0), 3.0);
    EXPECT_EQ(query(prometheus_port, "sum(kepler_model_info{selected=\"true\",model=\"measured\"})"), 1.0);
}

#ifdef COLLECT_BINARY
namespace {

/// PromQL of Kepler 0.7's dashboard panels that must return data.
void expect_kepler07_panels(int port) {
    for (const char* zone : {"package", "dram", "other", "gpu"}) {
        for (const char* by : {"pod_name, container_namespace", "container_namespace"}) {
            const std::string q = fmt::format("sum by ({}) (irate(kepler_container_{}_joules_total[1m]))", by, zone);
            EXPECT_TRUE(answers(port, q)) << q;
        }
    }
    EXPECT_GT(query(port, "sum(irate(kepler_container_package_joules_total[1m]))").value_or(0), 1.0) << "about 20 W on the package";
    EXPECT_GT(query(port, "sum(irate(kepler_container_dram_joules_total[1m]))").value_or(0), 0.1) << "about 4 W on the dram";
    // Per zone, the containers (with system, kernel and unaccounted) sum to the node, in one scrape.
    for (const char* zone : {"package", "dram"}) {
        const std::string node = fmt::format("sum(kepler_node_{}_joules_total)", zone);
        const auto diff = query(port, fmt::format("sum(kepler_container_{}_joules_total) - {}", zone, node));
        ASSERT_TRUE(diff) << zone;
        EXPECT_NEAR(*diff, 0.0, 1e-9 * query(port, node).value_or(0) + 1e-6) << zone;
    }
    // Usage counters and info, as Kepler's dashboards and checks read them.
    EXPECT_TRUE(answers(port, "sum(irate(kepler_container_bpf_cpu_time_ms_total[1m]))"));
    EXPECT_EQ(query(port, "count(kepler_node_info{components_power_source=\"rapl-sysfs\"})"), 1.0);
    EXPECT_EQ(query(port, "count(kepler_exporter_build_info)"), 1.0);
}

/// Kepler >= 0.10's names from the same scrapes: the node per zone equals the 0.7 node, pods by namespace.
void expect_kepler010_panels(int port) {
    for (const char* zone : {"package", "dram"}) {
        const auto diff = query(port, fmt::format("sum(kepler_node_cpu_joules_total{{zone=\"{}\"}}) - sum(kepler_node_{}_joules_total)", zone, zone));
        ASSERT_TRUE(diff) << zone;
        EXPECT_NEAR(*diff, 0.0, 1e-6) << "both name sets come from one ledger: " << zone;
        EXPECT_TRUE(answers(port, fmt::format("sum by (zone) (rate(kepler_node_cpu_joules_total{{zone=\"{}\"}}[1m]))", zone)));
    }
    EXPECT_TRUE(answers(port, "sum(kepler_node_cpu_watts)"));
    EXPECT_TRUE(answers(port, "kepler_node_cpu_usage_ratio"));
    EXPECT_TRUE(answers(port, "sum by (pid, comm) (rate(kepler_process_cpu_joules_total[1m]))"));
    EXPECT_TRUE(answers(port, "sum(rate(kepler_process_cpu_seconds_total[1m]))"));
    EXPECT_EQ(query(port, "count(kepler_build_info)"), 1.0);
}

}  // namespace

TEST(PrometheusEndToEnd, KeplerDashboardsOnFakeRaplFedByTheRealCollector) {
    if (!fs::exists("/usr/bin/prometheus")) GTEST_SKIP() << "no Prometheus server (Debian package prometheus)";
    TempDir dir;
    FakeRapl rapl(dir.path() / "sys");
    const std::string segment = unique_segment_name("e2e-rapl");
    const SegmentCleanup cleanup{segment};
    Child collector({COLLECT_BINARY, "--shm-name", segment, "--interval", "250ms", "--source", "procfs", "--kube", "off",
                     "--sysfs-root", (dir.path() / "sys").string(), "--replace-live"},
                    (dir.path() / "collector.log").string());
    // One estimator per name set on the same segment; Prometheus scrapes `both`.
    std::map<std::string, int> ports;
    std::vector<std::unique_ptr<Child>> estimators;
    for (const char* names : {"kepler-0.7", "kepler-0.10", "both"}) {
        ports[names] = free_port();
        estimators.push_back(std::make_unique<Child>(
            std::vector<std::string>{ESTIMATE_BINARY, "--shm-name", segment, "--listen", fmt::format("127.0.0.1:{}", ports[names]),
                                     "--metric-names", names, "--process-metrics", "--max-process-series", "200"},
            (dir.path() / fmt::format("estimator-{}.log", names)).string()));
    }
    const std::map<std::string, std::string> markers = {
        {"kepler-0.7", "kepler_container_dram_joules_total{"}, {"kepler-0.10", "kepler_node_cpu_joules_total{"}, {"both", "kepler_node_info{"}};
    for (const auto& [names, port] : ports) {
        const std::string metrics = scrape_when_ready(port, markers.at(names));
        ASSERT_FALSE(metrics.empty()) << names << read_file((dir.path() / "collector.log").string());
        int status = 0;
        const std::string lint = promtool_lint(dir.path() / (names + ".prom"), metrics, status);
        EXPECT_EQ(status, 0) << names << ": " << lint;
        EXPECT_EQ(lint, "") << names;
    }

    const int prometheus_port = free_port();
    Child prometheus = start_prometheus(dir.path(), ports.at("both"), prometheus_port);
    ASSERT_TRUE(wait_for([&] { return query(prometheus_port, "sum(irate(kepler_container_dram_joules_total[1m])) > 0").has_value(); },
                         std::chrono::seconds(60)))
        << read_file((dir.path() / "prometheus.log").string());
    expect_kepler07_panels(prometheus_port);
    expect_kepler010_panels(prometheus_port);

    // Kepler's "kWh per day" panel samples each minute: it has data once two minute marks have passed.
    const std::string kwh = "sum by (container_namespace) (increase(kepler_container_package_joules_total[24h:1m])) * 2.7778e-7";
    ASSERT_TRUE(wait_for([&] { return query(prometheus_port, "sum(" + kwh + ") > 0").has_value(); }, std::chrono::seconds(150)))
        << "no kWh/day after 150 s";
    // Carbon: kWh x a grid factor (gCO2e per kWh, a dashboard variable), in one evaluation.
    EXPECT_GT(query(prometheus_port, "sum(" + kwh + ") * 475").value_or(0), 0.0);
    EXPECT_NEAR(query(prometheus_port, "(sum(" + kwh + ") * 475) / sum(" + kwh + ")").value_or(0), 475.0, 1e-9);

    // Bounded cardinality: the few containers of this host (system, kernel, unaccounted and any local
    // runtime's), at most 200 processes, every family fixed by name sets.
    const double series = query(prometheus_port, "count({__name__=~\"kepler_.+\"})").value_or(1e9);
    EXPECT_LT(series, 200 * 60 + 2000) << "series of all kepler families";
    EXPECT_LE(query(prometheus_port, "count(kepler_container_joules_total)").value_or(1e9), 2 * 50.0);
    EXPECT_EQ(query(prometheus_port, "sum(resets(kepler_container_joules_total[5m])) + sum(resets(kepler_node_cpu_joules_total[5m]))"), 0.0);
}
#endif

#ifdef COLLECT_BINARY
TEST(PrometheusEndToEnd, FedByTheRealCollector) {
    if (!fs::exists("/usr/bin/prometheus")) GTEST_SKIP() << "no Prometheus server (Debian package prometheus)";
    TempDir dir;
    const std::string segment = unique_segment_name("e2e-collect");
    const SegmentCleanup cleanup{segment};
    const int estimator_port = free_port();
    const int prometheus_port = free_port();
    auto start_collector = [&](const std::string& log) {
        return std::make_unique<Child>(std::vector<std::string>{COLLECT_BINARY, "--shm-name", segment, "--interval", "250ms", "--source",
                                                                "procfs", "--kube", "off", "--replace-live"},
                                       (dir.path() / log).string());
    };
    auto collector = start_collector("collector-1.log");
    Child estimator({ESTIMATE_BINARY, "--shm-name", segment, "--listen", fmt::format("127.0.0.1:{}", estimator_port)},
                    (dir.path() / "estimator.log").string());
    Child prometheus = start_prometheus(dir.path(), estimator_port, prometheus_port);
    const std::string node = "sum(kepler_node_package_joules_total)";  // this VM has no meter: the curve
    ASSERT_TRUE(wait_for([&] { return query(prometheus_port, node).value_or(0) > 0; }, std::chrono::seconds(60)))
        << read_file((dir.path() / "estimator.log").string()) << read_file((dir.path() / "collector-1.log").string());

    collector.reset();  // SIGTERM: the collector retires its segment; a new one starts over
    collector = start_collector("collector-2.log");
    const double before = query(prometheus_port, node).value_or(0);
    ASSERT_TRUE(wait_for([&] { return query(prometheus_port, node).value_or(0) > before + 1.0; }, std::chrono::seconds(30)))
        << read_file((dir.path() / "collector-2.log").string());

    expect_conserved_and_monotonic(prometheus_port, node);
    EXPECT_EQ(query(prometheus_port, "sum(kepler_model_info{selected=\"true\",model=\"curve\"})"), 1.0);
}
#endif

#ifdef COLLECT_BINARY
namespace {

/// A one-sector disk whose boot code spins (`jmp $`: a busy guest) or halts with interrupts off (an idle one).
fs::path boot_sector(const fs::path& dir, const std::string& name, bool busy) {
    std::string sector(512, '\0');
    const std::string code = busy ? std::string("\xEB\xFE", 2) : std::string("\xFA\xF4\xEB\xFD", 4);  // jmp $ | cli; hlt; jmp
    sector.replace(0, code.size(), code);
    sector[510] = '\x55';
    sector[511] = '\xAA';
    std::ofstream(dir / name, std::ios::binary) << sector;
    return dir / name;
}

/// The value of `label` on the first series of `family` carrying every label of `want` ("" when none).
std::string label_of(const std::vector<prometheus::MetricFamily>& families, const std::string& family, const Labels& want,
                     const std::string& label) {
    for (const auto& f : families) {
        if (f.name != family) continue;
        for (const auto& m : f.metric) {
            auto has = [&](const std::string& k, const std::string& v) {
                return std::any_of(m.label.begin(), m.label.end(), [&](const auto& l) { return l.name == k && l.value == v; });
            };
            if (!std::all_of(want.begin(), want.end(), [&](const auto& w) { return has(w.first, w.second); })) continue;
            for (const auto& l : m.label) {
                if (l.name == label) return l.value;
            }
        }
    }
    return {};
}

std::vector<prometheus::MetricFamily> scrape_families(int port) {
    std::string text;
    if (http_get(fmt::format("http://127.0.0.1:{}/metrics", port), text) != 200) return {};
    return parse_exposition(text);
}

}  // namespace

// Real QEMU guests (TCG: no KVM needed): one started by hand without -uuid spinning, one with -uuid idle.
// Both are VMs with Kepler's labels; the one without an id gets a stable one; the busy guest's energy is
// its qemu process's energy; Kepler's VM panels have data.
TEST(PrometheusEndToEnd, QemuGuestsAreVmsWithKeplersLabels) {
    const fs::path qemu = "/usr/bin/qemu-system-x86_64";
    if (!fs::exists(qemu)) GTEST_SKIP() << "no QEMU (Debian package qemu-system-x86)";
    if (!fs::exists("/usr/bin/prometheus")) GTEST_SKIP() << "no Prometheus server (Debian package prometheus)";
    TempDir dir;
    FakeRapl rapl(dir.path() / "sys");
    const std::string uuid = "5a1c2f0e-9b7d-4c3a-8e21-0f6d4b9a7c11";
    auto guest = [&](const std::string& name, bool busy, std::vector<std::string> extra) {
        std::vector<std::string> argv = {qemu.string(), "-name", "guest=" + name + ",debug-threads=on", "-machine", "pc", "-m", "64",
                                         "-display", "none", "-nodefaults", "-drive",
                                         "file=" + boot_sector(dir.path(), name + ".img", busy).string() + ",format=raw"};
        argv.insert(argv.end(), extra.begin(), extra.end());
        return std::make_unique<Child>(argv, (dir.path() / (name + ".log")).string());
    };
    const auto busy_vm = guest("kshmvm", true, {});
    const auto idle_vm = guest("kshmuuid", false, {"-uuid", uuid});

    const std::string segment = unique_segment_name("e2e-vm");
    const SegmentCleanup cleanup{segment};
    auto start_collector = [&](const std::string& log) {
        return std::make_unique<Child>(std::vector<std::string>{COLLECT_BINARY, "--shm-name", segment, "--interval", "250ms", "--source",
                                                                "procfs", "--kube", "off", "--sysfs-root", (dir.path() / "sys").string(),
                                                                "--replace-live"},
                                       (dir.path() / log).string());
    };
    auto collector = start_collector("collector-1.log");
    const int port = free_port();
    Child estimator({ESTIMATE_BINARY, "--shm-name", segment, "--listen", fmt::format("127.0.0.1:{}", port), "--metric-names", "both",
                     "--process-metrics", "--max-process-series", "2000"},
                    (dir.path() / "estimator.log").string());
    const Labels busy = {{"vm_name", "kshmvm"}, {"zone", "package"}};
    ASSERT_FALSE(scrape_when_ready(port, "vm_name=\"kshmvm\"").empty()) << read_file((dir.path() / "collector-1.log").string());
    // The idle guest appears in the first frame in which its process ran at all: under a sanitizer that
    // was after the busy one's (CI), so both are waited for before either is read.
    ASSERT_FALSE(scrape_when_ready(port, "vm_name=\"kshmuuid\"").empty()) << read_file((dir.path() / "collector-1.log").string());
    auto families = scrape_families(port);
    const std::string id = label_of(families, "kepler_vm_cpu_joules_total", busy, "vm_id");
    EXPECT_EQ(id.size(), 16u) << "derived from the command line and the process";
    EXPECT_EQ(label_of(families, "kepler_vm_cpu_joules_total", busy, "hypervisor"), "kvm");
    EXPECT_EQ(label_of(families, "kepler_vm_cpu_joules_total", {{"vm_name", "kshmuuid"}}, "vm_id"), uuid);
    EXPECT_EQ(label_of(families, "kepler_vm_cpu_joules_total", {{"vm_name", "kshmuuid"}}, "hypervisor"), "kvm");
    EXPECT_TRUE(series_value(families, "kepler_vm_package_joules_total", {{"vm_id", id}, {"vm_name", "kshmvm"}})) << "Kepler 0.7's names";

    // The VM's energy is its qemu process's energy, and a spinning guest keeps that process busy.
    const std::string pid = std::to_string(busy_vm->pid());
    auto sample = [&] {
        const auto f = scrape_families(port);  // one scrape: every series from the same frame
        return std::array<double, 3>{series_sum(f, "kepler_vm_cpu_joules_total", {{"vm_id", id}, {"zone", "package"}}),
                                     series_sum(f, "kepler_process_cpu_joules_total", {{"pid", pid}, {"zone", "package"}}),
                                     series_sum(f, "kepler_process_cpu_seconds_total", {{"pid", pid}})};
    };
    std::this_thread::sleep_for(std::chrono::seconds(2));
    const auto a = sample();
    const auto started = std::chrono::steady_clock::now();
    std::this_thread::sleep_for(std::chrono::seconds(6));
    const auto b = sample();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    EXPECT_GT(b[0] - a[0], 0.0);
    EXPECT_NEAR(b[0] - a[0], b[1] - a[1], 1e-6 * b[0]) << "the VM is exactly its qemu process";
    EXPECT_GT((b[2] - a[2]) / seconds, 0.2) << "a spinning guest keeps its qemu busy";

    // A new collector names the same VM process with the same id.
    collector.reset();
    collector = start_collector("collector-2.log");
    const double before = series_sum(scrape_families(port), "kepler_vm_cpu_joules_total", {{"vm_id", id}, {"zone", "package"}});
    ASSERT_TRUE(wait_for([&] {
        return series_sum(scrape_families(port), "kepler_vm_cpu_joules_total", {{"vm_id", id}, {"zone", "package"}}) > before + 1.0;
    }, std::chrono::seconds(30))) << read_file((dir.path() / "collector-2.log").string());

    const int prometheus_port = free_port();
    Child prometheus = start_prometheus(dir.path(), port, prometheus_port);
    const std::string panel = "sum by (vm_name, hypervisor) (rate(kepler_vm_cpu_joules_total{zone=\"package\",vm_name=\"kshmvm\"}[1m]))";
    ASSERT_TRUE(wait_for([&] { return query(prometheus_port, panel + " > 0").has_value(); }, std::chrono::seconds(60)))
        << read_file((dir.path() / "prometheus.log").string());
    EXPECT_EQ(query(prometheus_port, "count(count by (vm_id) (kepler_vm_cpu_joules_total{vm_name=\"kshmvm\"}))"), 1.0)
        << "one id across the collector's restart";
    EXPECT_TRUE(answers(prometheus_port, "sum by (vm_name) (kepler_vm_cpu_watts{hypervisor=\"kvm\"})"));
    EXPECT_TRUE(answers(prometheus_port, "sum by (vm_name) (irate(kepler_vm_package_joules_total[1m]))"));
}
#endif
