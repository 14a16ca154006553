// Scrapes and frames on two threads (issue 18): a scrape that is building its families holds nothing a
// frame needs, a frame whose models are running holds nothing a scrape needs, and every scrape shows one
// whole frame (per zone the containers sum to the node, and the
// node's energy is that of exactly the frames the scrape counts). Ordering only, no timing thresholds:
// the one timeout is a guard that turns a deadlock into a failure.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <atomic>
#include <chrono>
#include <future>
#include <thread>

#include "pipeline/estimator.hpp"
#include "export/prometheus_export.hpp"
#include "support/metric_series.hpp"
#include "support/test_frames.hpp"

using namespace kepler::estimate;
using namespace estimate_test;

namespace {

constexpr uint64_t kSecond = 1'000'000'000ull;
constexpr uint32_t kContainers = 8;
using Families = std::vector<prometheus::MetricFamily>;

keplershm::WriterOptions metered_node() {
    return node_options(4, kProcfsMetrics, {zone_info("package-0", KEPLERSHM_ZONE_PACKAGE, 0), zone_info("dram-0", KEPLERSHM_ZONE_DRAM, 0)});
}

/// Frame n (from 0): 40 processes in 8 pod containers; the meter reads (n + 1) J of package and 2 J of dram.
TestFrame numbered_frame(uint64_t n) {
    TestFrame f = simple_frame((n + 1) * kSecond, kSecond, std::vector<uint64_t>(40, 20'000'000), {(n + 1) * 1'000'000, 2'000'000});
    for (uint32_t c = 0; c < kContainers; ++c) {
        f.workloads.push_back(TestWorkload{.container_id = fmt::format("c{}", c), .container_name = fmt::format("app{}", c),
                                           .pod_uid = fmt::format("u{}", c), .pod_name = fmt::format("pod{}", c), .pod_namespace = "ns"});
    }
    for (size_t i = 0; i < f.processes.size(); ++i) f.processes[i].workload = static_cast<uint32_t>(i % kContainers);
    return f;
}

/// One frame's worth in every series: after k frames the node holds k(k+1)/2 J of package and 2k J of
/// dram, under both name sets, and per zone the containers (with system and unaccounted) sum to it.
void expect_one_frame(const Families& f) {
    const double k = series_value(f, "kepler_estimator_frames_read_total").value_or(-1);
    ASSERT_GE(k, 0);
    EXPECT_NEAR(series_sum(f, "kepler_node_package_joules_total"), k * (k + 1) / 2, 1e-6) << "frames " << k;
    EXPECT_NEAR(series_sum(f, "kepler_node_dram_joules_total"), 2 * k, 1e-6) << "frames " << k;
    for (const char* zone : {"package", "dram"}) {
        EXPECT_NEAR(series_sum(f, fmt::format("kepler_container_{}_joules_total", zone)),
                    series_sum(f, fmt::format("kepler_node_{}_joules_total", zone)), 1e-6)
            << zone << ", frames " << k;
    }
    if (k > 0) {
        EXPECT_NEAR(series_value(f, "kepler_node_cpu_joules_total", {{"zone", "package"}}).value_or(-1), k * (k + 1) / 2, 1e-6);
    }
}

}  // namespace

/// Two frames estimated; each test then holds one side (a scrape, or a frame whose models answered)
/// while the other runs. The wait is a guard, not a timing threshold: a side that needed the lock the
/// held one keeps would never come, and the test fails.
class HeldScrapeSnapshot : public ::testing::Test {
protected:
    void SetUp() override {
        for (uint64_t n = 0; n < 2; ++n) ASSERT_TRUE(est.process(feed.frame(numbered_frame(n))));
    }
    static bool came(std::promise<void>& other_side) {
        return other_side.get_future().wait_for(std::chrono::seconds(60)) == std::future_status::ready;
    }
    Feed feed{metered_node()};
    Estimator est{EstimatorOptions{}};
    PrometheusExport exporter{est, ExportOptions{.process_metrics = true, .include_timing = false, .names = MetricNames::both}};
};

TEST_F(HeldScrapeSnapshot, FrameIsProcessedWhileAScrapeBuildsItsFamilies) {
    std::promise<void> scrape_held, frame_done;
    bool frame_came = false;
    exporter.set_after_snapshot_hook([&] {
        scrape_held.set_value();
        frame_came = came(frame_done);
    });
    Families families;
    std::thread scraper([&] { families = collect(exporter); });
    scrape_held.get_future().wait();
    const bool estimated = est.process(feed.frame(numbered_frame(2)));  // while the scrape is held
    frame_done.set_value();
    scraper.join();
    EXPECT_TRUE(estimated);
    EXPECT_TRUE(frame_came) << "the frame waited for the scrape";
    // The scrape shows the two frames it copied, whole, not the third that came while it was building.
    EXPECT_EQ(series_value(families, "kepler_estimator_frames_read_total"), 2.0);
    expect_one_frame(families);
    exporter.set_after_snapshot_hook({});
    EXPECT_EQ(series_value(collect(exporter), "kepler_estimator_frames_read_total"), 3.0);
}

TEST_F(HeldScrapeSnapshot, AScrapeDoesNotWaitForTheModels) {
    // The models run without the lock (an external one may be waited for, up to 100 ms by default):
    // a scrape taken then copies the frames published before it and returns.
    std::promise<void> models_answered, scraped;
    bool scrape_came = false;
    est.set_after_models_hook([&] {
        models_answered.set_value();
        scrape_came = came(scraped);
    });
    bool estimated = false;
    std::thread pipeline([&] { estimated = est.process(feed.frame(numbered_frame(2))); });
    models_answered.get_future().wait();
    const Families during = collect(exporter);  // the third frame's models have answered; it is not published
    scraped.set_value();
    pipeline.join();
    EXPECT_TRUE(scrape_came) << "the scrape waited for the models";
    EXPECT_TRUE(estimated);
    EXPECT_EQ(series_value(during, "kepler_estimator_frames_read_total"), 2.0);
    expect_one_frame(during);
    est.set_after_models_hook({});
    const Families after = collect(exporter);
    EXPECT_EQ(series_value(after, "kepler_estimator_frames_read_total"), 3.0);
    expect_one_frame(after);
}

TEST(ScrapeSnapshot, EveryScrapeIsOneWholeFrameWhileFramesRun) {
    constexpr uint64_t kAtLeast = 50;  // frames and scrapes each; both loops run until both counts are reached
    Feed feed(metered_node());
    Estimator est(EstimatorOptions{});
    PrometheusExport exporter(est, ExportOptions{.process_metrics = true, .include_timing = false, .names = MetricNames::both});
    std::atomic<uint64_t> frames{0}, scrapes{0};
    // SYNC POINT: relaxed loads and stores of frames/scrapes, partners of each other across the two loops:
    // the counters only decide when the loops end; the estimator's own lock orders the data they share.
    std::thread pipeline([&] {
        for (uint64_t n = 0; n < kAtLeast || scrapes.load(std::memory_order_relaxed) < kAtLeast; ++n) {
            EXPECT_TRUE(est.process(feed.frame(numbered_frame(n))));
            frames.store(n + 1, std::memory_order_relaxed);
        }
    });
    while (frames.load(std::memory_order_relaxed) < kAtLeast || scrapes.load(std::memory_order_relaxed) < kAtLeast) {
        expect_one_frame(collect(exporter));
        scrapes.fetch_add(1, std::memory_order_relaxed);
    }
    pipeline.join();
    expect_one_frame(collect(exporter));
}
