// End to end: a test writer publishes frames (the real collector will take its place), the
// kepler-estimate binary serves /metrics, a real Prometheus server scrapes it, and PromQL says that
// the containers' energy sums to the node's and that no counter ever went backwards, across a
// writer restart.
#include <curl/curl.h>
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <atomic>
#include <functional>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

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

std::string escape(const std::string& text) {
    char* e = curl_easy_escape(nullptr, text.c_str(), static_cast<int>(text.size()));
    std::string out(e);
    curl_free(e);
    return out;
}

/// The single value of an instant PromQL query, or nullopt when it has no result yet.
std::optional<double> query(int port, const std::string& promql) {
    std::string body;
    if (http_get(fmt::format("http://127.0.0.1:{}/api/v1/query?query={}", port, escape(promql)), body) != 200) return std::nullopt;
    const auto doc = nlohmann::json::parse(body, nullptr, false);
    if (doc.is_discarded() || doc["status"] != "success" || doc["data"]["result"].empty()) return std::nullopt;
    return std::stod(doc["data"]["result"][0]["value"][1].get<std::string>());
}

bool wait_for(const std::function<bool()>& done, std::chrono::seconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
        if (done()) return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(250));
    }
    return done();
}

/// Prometheus scraping 127.0.0.1:`target_port` every second, listening on `port`.
Child start_prometheus(const fs::path& dir, int target_port, int port) {
    std::ofstream(dir / "prometheus.yml") << fmt::format(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n  - job_name: kepler\n"
        "    static_configs:\n      - targets: ['127.0.0.1:{}']\n",
        target_port);
    return Child({"/usr/bin/prometheus", "--config.file=" + (dir / "prometheus.yml").string(),
                  "--storage.tsdb.path=" + (dir / "data").string(), fmt::format("--web.listen-address=127.0.0.1:{}", port)},
                 (dir / "prometheus.log").string());
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
