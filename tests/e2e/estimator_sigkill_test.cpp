// Fault: the estimator is SIGKILLed while the collector runs. Readers never block or slow the writer
// (DESIGN.md, protocol contract 1): the collector's frame rate, measured from the segment by an
// independent reader, must not change, and the killed reader leaves nothing behind.
#include <signal.h>

#include <algorithm>
#include <filesystem>

#include <gtest/gtest.h>

#include "support/frames.hpp"
#include "support/metrics.hpp"
#include "support/process.hpp"

namespace {

using namespace std::chrono_literals;
using e2e::Child;
using e2e::FrameSummary;

constexpr double kIntervalS = 0.1;

struct Rate {
    double frames_per_s = 0;
    double longest_gap_s = 0;
    uint64_t missed = 0;
    size_t frames = 0;
};

/// Frames per second of the collector over `window`, from the frames' own interval ends.
Rate measure(keplershm::Reader& reader, std::chrono::milliseconds window) {
    std::vector<FrameSummary> frames;
    const auto until = std::chrono::steady_clock::now() + window;
    e2e::read_frames(reader, frames, [&] { return std::chrono::steady_clock::now() >= until; }, window + 1s);
    Rate r;
    r.frames = frames.size();
    if (frames.size() < 2) return r;
    for (size_t i = 1; i < frames.size(); ++i) {
        r.longest_gap_s = std::max(r.longest_gap_s, (frames[i].interval_end_ns - frames[i - 1].interval_end_ns) / 1e9);
        r.missed += frames[i].missed;
        EXPECT_EQ(frames[i].sequence, frames[i - 1].sequence + 1) << "contiguous frames";
        EXPECT_EQ(frames[i].generation, frames[0].generation) << "the collector was never replaced";
    }
    r.frames_per_s = (frames.size() - 1) / ((frames.back().interval_end_ns - frames.front().interval_end_ns) / 1e9);
    return r;
}

std::vector<std::string> shm_entries_named(const std::string& name) {
    std::vector<std::string> out;
    for (const auto& entry : std::filesystem::directory_iterator("/dev/shm")) {
        const std::string file = entry.path().filename().string();
        if (file.find(name) != std::string::npos) out.push_back(file);
    }
    return out;
}

TEST(EstimatorSigkill, CollectorFrameRateIsUnaffected) {
    e2e::TempDir tmp;
    const std::string name = e2e::unique_name("estimator-kill");
    Child collector({COLLECT_BINARY, "--shm-name", name, "--interval", "100ms", "--kube", "off"}, tmp / "collect.log");
    auto reader = e2e::open_when_present(name, 30s);
    ASSERT_TRUE(reader) << collector.log();
    auto estimator = std::make_unique<Child>(
        std::vector<std::string>{ESTIMATE_BINARY, "--shm-name", name, "--listen", e2e::kAnyLocalPort}, tmp / "estimate.log");
    int port = e2e::metrics_port(*estimator);
    ASSERT_GT(port, 0) << estimator->log();
    ASSERT_TRUE(e2e::wait_until([&] {
        const auto s = e2e::scrape(port, 1);
        return s && e2e::value_of(*s, "kepler_estimator_frames_read_total") >= 5;
    }, 30s, 100ms)) << estimator->log();

    const Rate with_estimator = measure(*reader, 3s);
    estimator->signal(SIGKILL);
    ASSERT_EQ(estimator->wait(10s)->signal, SIGKILL);
    const Rate after_kill = measure(*reader, 3s);

    for (const Rate& r : {with_estimator, after_kill}) {
        EXPECT_GE(r.frames, 20u);
        EXPECT_NEAR(r.frames_per_s, 1 / kIntervalS, 0.15 / kIntervalS) << "the configured rate";
        EXPECT_LT(r.longest_gap_s, 3 * kIntervalS) << "no stall";
        EXPECT_EQ(r.missed, 0u) << "this reader kept up";
    }
    EXPECT_NEAR(after_kill.frames_per_s, with_estimator.frames_per_s, 0.1 * with_estimator.frames_per_s);
    EXPECT_TRUE(collector.running()) << collector.log();
    EXPECT_EQ(shm_entries_named(name), std::vector<std::string>{name}) << "a killed reader leaves nothing behind";
    EXPECT_EQ(collector.log().find(": error:"), std::string::npos) << collector.log();

    // A new estimator instance reads the same segment at once.
    estimator = std::make_unique<Child>(
        std::vector<std::string>{ESTIMATE_BINARY, "--shm-name", name, "--listen", e2e::kAnyLocalPort},
        tmp / "estimate-2.log");
    port = e2e::metrics_port(*estimator);
    EXPECT_TRUE(e2e::wait_until([&] {
        const auto s = e2e::scrape(port, 1);
        return s && e2e::value_of(*s, "kepler_estimator_frames_read_total") >= 3;
    }, 30s, 100ms)) << estimator->log();
    EXPECT_EQ(estimator->stop().code, 0);
    EXPECT_EQ(collector.stop().code, 0) << collector.log();
}

}  // namespace
