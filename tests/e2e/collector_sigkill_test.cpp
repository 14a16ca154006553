// Fault: the collector is SIGKILLed while the estimator runs, then restarted as the kubelet would (same
// command line as deploy/kubernetes/sidecar). The estimator must stay up, notice the gap, follow the new
// generation by itself, and no exported counter may go backwards (Prometheus would read a reset).
#include <signal.h>

#include <algorithm>

#include <gtest/gtest.h>

#include "keplershm/keplershm.hpp"
#include "support/metrics.hpp"
#include "support/process.hpp"

namespace {

using namespace std::chrono_literals;
using e2e::Child;
using e2e::Scrape;

std::vector<std::string> collector_argv(const std::string& name, bool replace_live) {
    std::vector<std::string> argv{COLLECT_BINARY, "--shm-name", name, "--interval", "200ms", "--kube", "off"};
    if (replace_live) argv.push_back("--replace-live");
    return argv;
}

bool is_counter(const std::string& series) {
    const std::string name = e2e::metric_name(series);
    auto ends_with = [&](const std::string& suffix) {
        return name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
    };
    return ends_with("_total") || ends_with("_count") || ends_with("_sum") || ends_with("_bucket");
}

double frames_read(const Scrape& s) { return e2e::value_of(s, "kepler_estimator_frames_read_total"); }

double sum_of(const Scrape& s, const std::string& name) {
    double sum = 0;
    for (const auto& [series, value] : s) {
        if (e2e::metric_name(series) == name) sum += value;
    }
    return sum;
}

/// Scrapes until the estimator has read `frames` frames in total.
Scrape scrape_after_frames(int port, double frames, std::chrono::milliseconds timeout) {
    Scrape last;
    e2e::wait_until([&] {
        if (auto s = e2e::scrape(port, 1)) last = *s;
        return frames_read(last) >= frames;
    }, timeout, 100ms);
    return last;
}

/// Every counter series of `before` is still there in `after` and did not decrease.
void expect_monotonic(const Scrape& before, const Scrape& after, const std::string& when) {
    int joules = 0;
    for (const auto& [series, value] : before) {
        if (!is_counter(series)) continue;
        const auto found = after.find(series);
        ASSERT_NE(found, after.end()) << when << ": counter series vanished (a reset for Prometheus): " << series;
        EXPECT_GE(found->second, value) << when << ": counter went backwards: " << series;
        if (e2e::metric_name(series).ends_with("_joules_total")) ++joules;
    }
    EXPECT_GT(joules, 0) << when << ": no *_joules_total series compared";
}

TEST(CollectorSigkill, EstimatorReportsTheGapReattachesAndCountersStayMonotonic) {
    e2e::TempDir tmp;
    const std::string name = e2e::unique_name("sigkill");
    auto collector = std::make_unique<Child>(collector_argv(name, true), tmp / "collect-1.log");
    ASSERT_TRUE(e2e::wait_until([&] { return std::filesystem::exists("/dev/shm/" + name); }, 30s)) << collector->log();
    Child estimator({ESTIMATE_BINARY, "--shm-name", name, "--listen", e2e::kAnyLocalPort}, tmp / "estimate.log");
    const int port = e2e::metrics_port(estimator);
    ASSERT_GT(port, 0) << estimator.log();

    const Scrape before = scrape_after_frames(port, 5, 30s);
    ASSERT_GE(frames_read(before), 5) << estimator.log();

    collector->signal(SIGKILL);
    const e2e::Exit killed = *collector->wait(10s);
    ASSERT_EQ(killed.signal, SIGKILL);
    // Longer than the readers' heartbeat timeout (3 x 200 ms + 1 s): the estimator sees a dead writer.
    std::this_thread::sleep_for(3s);
    const Scrape during = *e2e::scrape(port);
    ASSERT_TRUE(estimator.running()) << "the estimator survives its collector: " << estimator.log();
    EXPECT_LE(frames_read(during), frames_read(before) + 2) << "no frames while the collector is dead";
    expect_monotonic(before, during, "during the outage");

    collector = std::make_unique<Child>(collector_argv(name, true), tmp / "collect-2.log");
    const Scrape after = scrape_after_frames(port, frames_read(during) + 5, 30s);
    ASSERT_GE(frames_read(after), frames_read(during) + 5)
        << "the estimator re-attaches to the new generation by itself\n" << estimator.log() << collector->log();
    ASSERT_TRUE(estimator.running());
    expect_monotonic(during, after, "after the restart");
    EXPECT_GT(sum_of(after, "kepler_node_package_joules_total"), sum_of(during, "kepler_node_package_joules_total"))
        << "estimation goes on with the new collector";
    EXPECT_EQ(collector->stop().code, 0) << collector->log();
    EXPECT_EQ(estimator.stop().code, 0) << estimator.log();

    // The outage must show in the estimator's health metrics (frames_missed_total, or a writer-loss /
    // re-attach counter). The new generation continues the frame numbering (PROTOCOL.md §1.1), so no
    // frame is "missed" by number; the gap is only in time.
    double gap_signal = 0;
    for (const auto& [series, value] : after) {
        const std::string metric = e2e::metric_name(series);
        if (metric.starts_with("kepler_estimator_") && metric.ends_with("_total") &&
            std::ranges::any_of(std::vector<std::string>{"missed", "attach", "writer", "gap", "restart", "generation",
                                                         "outage", "lost", "stale", "collector"},
                                [&](const std::string& word) { return metric.find(word) != std::string::npos; })) {
            gap_signal += value - std::max(0.0, e2e::value_of(before, series));
        }
    }
    EXPECT_GT(gap_signal, 0) << "the estimator's health metrics show the collector's outage and restart";
}

uint64_t generation_at(const std::string& name) {
    try {
        return keplershm::Reader::open(name).info().generation;
    } catch (const keplershm::Error&) {
        return 0;
    }
}

TEST(CollectorSigkill, RestartWithoutReplaceLiveWaitsForTheKilledWritersHeartbeatToGoStale) {
    // The split topology and systemd do not pass --replace-live: a collector restarted right after a crash
    // watches the dead writer's heartbeat stand still (3 x 200 ms + 1 s here), then takes the name.
    e2e::TempDir tmp;
    const std::string name = e2e::unique_name("stale-wait");
    uint64_t dead_generation = 0;
    {
        Child first(collector_argv(name, false), tmp / "collect-1.log");
        ASSERT_TRUE(e2e::wait_until([&] { return (dead_generation = generation_at(name)) != 0; }, 30s)) << first.log();
        first.signal(SIGKILL);
        ASSERT_EQ(first.wait(10s)->signal, SIGKILL);
    }
    const auto restarted_at = std::chrono::steady_clock::now();
    Child second(collector_argv(name, false), tmp / "collect-2.log");
    ASSERT_TRUE(e2e::wait_until([&] {
        const uint64_t g = generation_at(name);
        return g != 0 && g != dead_generation;
    }, 20s)) << second.log();
    EXPECT_LT(std::chrono::steady_clock::now() - restarted_at, 10s) << "stale after 1.6 s: no long outage";
    EXPECT_TRUE(second.running()) << second.log();
    EXPECT_NE(second.log().find("watching its heartbeat"), std::string::npos) << second.log();
    EXPECT_EQ(second.stop().code, 0) << second.log();
}

TEST(CollectorSigkill, ALiveCollectorIsNeverTakenOverWithoutReplaceLive) {
    // Two collector pods meeting on a node during a roll-out (split topology): the newcomer gives up with
    // a clear error and the running one keeps its segment.
    e2e::TempDir tmp;
    const std::string name = e2e::unique_name("live");
    Child first(collector_argv(name, false), tmp / "collect-1.log");
    uint64_t generation = 0;
    ASSERT_TRUE(e2e::wait_until([&] { return (generation = generation_at(name)) != 0; }, 30s)) << first.log();
    const e2e::Result second = e2e::run(collector_argv(name, false), 60s);
    EXPECT_EQ(second.exit.code, 1) << second.exit.describe() << "\n" << second.err;
    EXPECT_NE(second.err.find("belongs to a live writer"), std::string::npos) << second.err;
    EXPECT_EQ(generation_at(name), generation) << "the live collector keeps its segment";
    EXPECT_TRUE(first.running()) << first.log();
    EXPECT_EQ(first.stop().code, 0) << first.log();
}

}  // namespace
