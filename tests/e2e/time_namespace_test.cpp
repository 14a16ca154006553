// Fault: writer and readers in different clock domains (PROTOCOL.md §1.3). The collector runs in a time
// namespace whose CLOCK_MONOTONIC is near zero or ten days ahead, keplershm-probe, kepler-estimate and a
// library reader in the test's own (or the other way round): frames are read, the probe is healthy, and
// a SIGKILLed collector is called stale within twice the heartbeat timeout. Needs root (unshare --time).
#include <signal.h>

#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "keplershm/keplershm.hpp"
#include "support/metrics.hpp"
#include "support/process.hpp"

namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using e2e::Child;

constexpr auto kHeartbeatTimeout = 1600ms;  // the readers' default for a 200 ms interval: 3 x 200 ms + 1 s
constexpr int64_t kTenDays = 864'000;

int64_t monotonic_s() {
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec;
}

/// CLOCK_MONOTONIC offset of this process's time namespace from the initial one (unshare's offsets are
/// relative to the initial namespace, also when nested, e.g. in scripts/test.sh's time-namespace stage).
int64_t own_offset_s() {
    std::ifstream in("/proc/self/timens_offsets");
    std::string clock;
    int64_t seconds = 0;
    int64_t nanoseconds = 0;
    while (in >> clock >> seconds >> nanoseconds) {
        if (clock == "monotonic") return seconds;
    }
    return 0;
}

/// The argv prefix that runs a command whose CLOCK_MONOTONIC reads about `target_s` now.
std::vector<std::string> in_time_namespace(int64_t target_s) {
    const int64_t initial_now = monotonic_s() - own_offset_s();
    return {"unshare", "--time", "--fork", "--kill-child", "--monotonic=" + std::to_string(target_s - initial_now), "--"};
}

std::vector<std::string> operator+(std::vector<std::string> a, const std::vector<std::string>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
}

/// Why time namespaces cannot be used here, or "" when they can.
std::string time_namespaces_unavailable() {
    if (geteuid() != 0) return "needs root for a time namespace (unshare --time)";
    const e2e::Result r = e2e::run(in_time_namespace(monotonic_s() + 1) + std::vector<std::string>{"true"}, 10s);
    if (r.exit.code != 0) return "unshare --time does not work here: " + r.err;
    return "";
}

// Procfs: the per-process source plays no part in liveness, and it starts at once (no eBPF load).
std::vector<std::string> collector_argv(const std::string& name) {
    return {COLLECT_BINARY, "--shm-name", name, "--interval", "200ms", "--kube", "off", "--source", "procfs"};
}

/// Frames a short kepler-estimate run read (from its --prom-out exposition; no port to pick).
double frames_estimated(const std::vector<std::string>& prefix, const std::string& name, const e2e::TempDir& tmp) {
    const std::filesystem::path out = tmp / "estimate.prom";
    const e2e::Result r = e2e::run(prefix + std::vector<std::string>{ESTIMATE_BINARY, "--shm-name", name, "--listen",
                                                                      "none", "--duration", "3", "--prom-out", out},
                                   60s);
    EXPECT_EQ(r.exit.code, 0) << r.exit.describe() << "\n" << r.err;
    return e2e::value_of(e2e::parse_exposition(e2e::read_file(out)), "kepler_estimator_frames_read_total");
}

/// Starts a collector (in `collector_prefix`'s clock domain) and waits for its segment.
std::unique_ptr<Child> start_collector(const std::vector<std::string>& prefix, const std::string& name,
                                       const e2e::TempDir& tmp) {
    auto collector = std::make_unique<Child>(prefix + collector_argv(name), tmp / "collect.log");
    EXPECT_TRUE(e2e::wait_until([&] { return std::filesystem::exists("/dev/shm/" + name); }, 30s)) << collector->log();
    return collector;
}

/// The collector's CLOCK_MONOTONIC at its start, in seconds, as its segment header says.
int64_t collector_start_s(const std::string& name) {
    keplershm::Reader reader = keplershm::Reader::open(name);
    return static_cast<int64_t>(reader.info().header->writer_start_monotonic_ns / 1'000'000'000ull);
}

/// The collector's CLOCK_MONOTONIC reads about `target` s; the library, the probe and the estimator read
/// ours: frames flow, the probe is healthy, and a SIGKILL is noticed within twice the heartbeat timeout.
void collector_on_another_clock(int64_t target) {
    e2e::TempDir tmp;
    const std::string name = e2e::unique_name("timens");
    auto collector = start_collector(in_time_namespace(target), name, tmp);
    ASSERT_TRUE(collector->running()) << collector->log();
    EXPECT_NEAR(collector_start_s(name), target, 60) << "the collector runs on the other clock";

    keplershm::Reader reader = keplershm::Reader::open(name);  // the default timeout, 1.6 s
    keplershm::FrameView view;
    for (int i = 0; i < 3; ++i) ASSERT_EQ(reader.next(5s, view), keplershm::Status::ok) << collector->log();
    EXPECT_EQ(reader.info().writer_stale, 0u);
    const e2e::Result probe = e2e::run({PROBE_BINARY, "--shm-name", name}, 30s);
    EXPECT_EQ(probe.exit.code, 0) << probe.err;
    EXPECT_NE(probe.out.find("OK"), std::string::npos) << probe.out;
    EXPECT_GE(frames_estimated({}, name, tmp), 5) << "3 s at 200 ms";

    collector->signal_group(SIGKILL);
    const auto killed = Clock::now();
    keplershm::Status status = keplershm::Status::ok;
    while (status == keplershm::Status::ok) status = reader.next(10s, view);  // frames published before the kill
    EXPECT_EQ(status, keplershm::Status::writer_gone);
    EXPECT_LT(Clock::now() - killed, 2 * kHeartbeatTimeout);
    const e2e::Result after = e2e::run({PROBE_BINARY, "--shm-name", name}, 30s);
    EXPECT_EQ(after.exit.code, 1) << after.out;
    EXPECT_NE(after.err.find("writer stale since"), std::string::npos) << after.err;
    std::filesystem::remove("/dev/shm/" + name);  // a killed collector leaves its segment behind
}

TEST(CollectorInATimeNamespace, NearZeroFramesAreReadTheProbeIsHealthyAndASigkillIsSeenInTime) {
    if (const std::string why = time_namespaces_unavailable(); !why.empty()) GTEST_SKIP() << why;
    collector_on_another_clock(5);  // a machine booted 5 s ago, seen from one up for hours
}

TEST(CollectorInATimeNamespace, TenDaysAheadFramesAreReadTheProbeIsHealthyAndASigkillIsSeenInTime) {
    if (const std::string why = time_namespaces_unavailable(); !why.empty()) GTEST_SKIP() << why;
    collector_on_another_clock(monotonic_s() + kTenDays);
}

size_t count_of(const std::string& text, const std::string& what) {
    size_t n = 0;
    for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
}

TEST(ReadersInATimeNamespace, TheProbeAndTheEstimatorJudgeAHostCollectorAndSayWhatTheyWaitFor) {
    if (const std::string why = time_namespaces_unavailable(); !why.empty()) GTEST_SKIP() << why;
    e2e::TempDir tmp;
    const std::string name = e2e::unique_name("timens-readers");
    const std::vector<std::string> near_zero = in_time_namespace(5);
    auto collector = start_collector({}, name, tmp);
    const e2e::Result probe = e2e::run(near_zero + std::vector<std::string>{PROBE_BINARY, "--shm-name", name}, 30s);
    EXPECT_EQ(probe.exit.code, 0) << probe.err;
    EXPECT_GE(frames_estimated(near_zero, name, tmp), 5) << "3 s at 200 ms";

    Child estimator(near_zero + std::vector<std::string>{ESTIMATE_BINARY, "--shm-name", name, "--listen", "none"},
                    tmp / "estimate.log");
    ASSERT_TRUE(e2e::wait_until([&] { return estimator.log().find("reading segment") != std::string::npos; }, 30s))
        << estimator.log();
    std::this_thread::sleep_for(1s);  // reading frames
    collector->signal_group(SIGKILL);
    const auto killed = Clock::now();
    EXPECT_TRUE(e2e::wait_until([&] { return estimator.log().find("stale since") != std::string::npos; },
                                2 * kHeartbeatTimeout, 10ms))
        << "the estimator says what it waits for within 2 x the heartbeat timeout\n" << estimator.log();
    std::this_thread::sleep_for(2 * kHeartbeatTimeout);  // still dead: nothing new to say
    const std::string log = estimator.log();
    EXPECT_EQ(count_of(log, "stale since"), 1u) << "said once, not every poll\n" << log;
    EXPECT_NE(log.find("waiting for a successor"), std::string::npos) << log;
    EXPECT_LT(Clock::now() - killed, 10s);

    const auto probe_start = Clock::now();
    const e2e::Result after = e2e::run(near_zero + std::vector<std::string>{PROBE_BINARY, "--shm-name", name}, 30s);
    EXPECT_EQ(after.exit.code, 1) << after.out;
    EXPECT_NE(after.err.find("stale"), std::string::npos) << after.err;
    EXPECT_LT(Clock::now() - probe_start, 2 * kHeartbeatTimeout);

    auto successor = start_collector({}, name, tmp);  // takes the dead name after watching it
    EXPECT_TRUE(e2e::wait_until([&] { return estimator.log().find("new generation") != std::string::npos; }, 30s))
        << estimator.log() << successor->log();
    estimator.signal_group(SIGTERM);
    EXPECT_EQ(estimator.wait(10s).value_or(e2e::Exit{}).code, 0) << estimator.log();
    EXPECT_EQ(successor->stop().code, 0) << successor->log();
}

}  // namespace
