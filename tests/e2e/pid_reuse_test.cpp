// Fault: a pid is reused between two frames. Processes are (pid, start time) (PROTOCOL.md §6): the second
// process must not inherit the first one's history, in the collector (a real pid reuse, forced in a new pid
// namespace through ns_last_pid) nor in the estimator (frames written with a test writer).
#include <unistd.h>

#include <map>
#include <regex>
#include <set>

#include <gtest/gtest.h>

#include "support/frames.hpp"
#include "support/metrics.hpp"
#include "support/process.hpp"

namespace {

using namespace std::chrono_literals;
using e2e::Child;

constexpr uint32_t kReusedPid = 300;

struct HelperProcess {
    uint64_t start = 0;
    uint64_t ticks = 0;          // utime+stime when its burn ended
    uint64_t ticks_at_exit = 0;  // and just before it exited
};

std::vector<HelperProcess> parse_helper_lines(const std::string& log) {
    std::vector<HelperProcess> out;
    const std::regex line(R"(process \d+ pid=(\d+) start=(\d+) ticks=(\d+) ticks_at_exit=(\d+))");
    for (auto it = std::sregex_iterator(log.begin(), log.end(), line); it != std::sregex_iterator(); ++it) {
        EXPECT_EQ(std::stoul((*it)[1]), kReusedPid);
        out.push_back({std::stoull((*it)[2]), std::stoull((*it)[3]), std::stoull((*it)[4])});
    }
    return out;
}

TEST(PidReuse, CollectorKeysProcessesByPidAndStartTime) {
    if (geteuid() != 0) GTEST_SKIP() << "needs root: a new pid namespace and its ns_last_pid";
    e2e::TempDir tmp;
    const std::string name = e2e::unique_name("pid-reuse");
    // pid 300 burns 305 ms and exits, then a new pid 300 burns 105 ms: by pid alone the second would look
    // like the first with its CPU time going backwards (and its 105 ms lost). Burns end mid-tick, so the
    // helper's own reads of its CPU time do not push it over a tick's edge.
    Child scenario({"unshare", "--pid", "--fork", "--mount-proc", "--kill-child", HELPER_BINARY, "pidreuse", "--pid",
                    std::to_string(kReusedPid), "--burn-ms", "305,105", "--hold-ms", "800", "--", COLLECT_BINARY,
                    "--shm-name", name, "--source", "procfs", "--interval", "250ms", "--kube", "off", "--slots", "64"},
                   tmp / "scenario.log");
    auto reader = e2e::open_when_present(name, 30s);
    ASSERT_TRUE(reader) << scenario.log();
    std::vector<e2e::FrameSummary> frames;
    e2e::read_frames(*reader, frames, [&] { return !scenario.running(); }, 60s);
    e2e::read_frames(*reader, frames, [] { return false; }, 500ms);  // what was published before the stop
    const auto exit = scenario.wait(10s);
    ASSERT_TRUE(exit && exit->code == 0) << (exit ? exit->describe() : "still running") << "\n" << scenario.log();

    const std::vector<HelperProcess> truth = parse_helper_lines(scenario.log());
    ASSERT_EQ(truth.size(), 2u) << scenario.log();
    ASSERT_NE(truth[0].start, truth[1].start);
    const uint64_t tick_ns = 1'000'000'000ull / static_cast<uint64_t>(sysconf(_SC_CLK_TCK));

    std::map<uint64_t, uint64_t> cpu_by_start;     // start time -> CPU time summed over frames
    std::map<uint64_t, uint32_t> first_flags;      // start time -> flags of its first record
    for (const e2e::FrameSummary& f : frames) {
        std::set<std::pair<uint32_t, uint64_t>> keys;
        for (const e2e::ProcessSample& p : f.processes) {
            EXPECT_TRUE(keys.insert({p.pid, p.start_time_ticks}).second) << "frame " << f.sequence << " lists a process twice";
            if (p.pid != kReusedPid) continue;
            cpu_by_start[p.start_time_ticks] += p.cpu_time_ns;
            first_flags.try_emplace(p.start_time_ticks, p.flags);
        }
    }
    ASSERT_EQ(cpu_by_start.size(), 2u) << "pid " << kReusedPid << " appears as exactly two processes";
    for (const HelperProcess& p : truth) {
        ASSERT_TRUE(cpu_by_start.contains(p.start)) << "start time " << p.start;
        // The collector's last scan of the process falls in its hold: between the helper's two readings.
        EXPECT_GE(cpu_by_start[p.start], p.ticks * tick_ns)
            << "each process's CPU time is its own /proc/<pid>/stat utime+stime, nothing of the other's";
        EXPECT_LE(cpu_by_start[p.start], p.ticks_at_exit * tick_ns)
            << "each process's CPU time is its own /proc/<pid>/stat utime+stime, nothing of the other's";
        EXPECT_TRUE(first_flags[p.start] & KEPLERSHM_PROC_NEW) << "first seen: NEW";
    }
    EXPECT_GT(truth[1].ticks, 0u) << "the second process burnt measurable CPU";
}

// --- the estimator, fed by a test writer -------------------------------------------------------------

keplershm_process process(uint32_t pid, uint64_t start, uint64_t cpu_ns, uint32_t flags) {
    keplershm_process p{};
    p.pid = p.tgid = pid;
    p.start_time_ticks = start;
    p.cpu_time_ns = cpu_ns;
    p.flags = flags;
    p.workload_index = KEPLERSHM_NO_WORKLOAD;
    keplershm::set_text(p.comm, "reused");
    return p;
}

void publish(keplershm::Writer& writer, uint64_t& clock_ns, const std::vector<keplershm_process>& processes, bool first) {
    constexpr uint64_t kInterval = 500'000'000;
    keplershm::Draft d = writer.begin();
    d.frame().interval_start_ns = clock_ns;
    d.frame().interval_end_ns = clock_ns + kInterval;
    d.frame().source = KEPLERSHM_SOURCE_SYNTHETIC;
    d.frame().metric_mask = KEPLERSHM_METRIC_CPU_TIME | KEPLERSHM_METRIC_NODE_CPU;
    d.frame().flags = first ? uint32_t{KEPLERSHM_FRAME_FIRST} : 0u;
    uint64_t busy = 0;
    for (const keplershm_process& p : processes) {
        d.add_process(p);
        busy += p.cpu_time_ns;
    }
    for (uint32_t cpu = 0; cpu < 2; ++cpu) {
        keplershm_cpu_sample c{};
        c.cpu = cpu;
        c.user_ns = busy / 2;
        c.idle_ns = kInterval - busy / 2;
        d.add_cpu(c);
    }
    writer.commit(d);
    clock_ns += kInterval;
}

/// kepler_process_joules_total of pid 300, summed over modes, by start_time label.
std::map<std::string, double> reused_pid_energy(const e2e::Scrape& s) {
    std::map<std::string, double> out;
    const std::regex labels(R"(pid="300".*start_time="(\d+)\")");
    for (const auto& [series, value] : s) {
        std::smatch m;
        if (e2e::metric_name(series) == "kepler_process_joules_total" && std::regex_search(series, m, labels)) {
            out[m[1]] += value;
        }
    }
    return out;
}

TEST(PidReuse, EstimatorKeepsSeparateSeriesForAReusedPid) {
    e2e::TempDir tmp;
    const std::string name = e2e::unique_name("pid-reuse-estimate");
    keplershm::WriterOptions options;
    options.slot_count = 8;
    options.process_capacity = 16;
    options.workload_capacity = 4;
    options.string_capacity = 256;
    options.cpu_count = 2;
    options.metric_mask = KEPLERSHM_METRIC_CPU_TIME | KEPLERSHM_METRIC_NODE_CPU;
    keplershm::Writer writer(name, options);
    Child estimator({ESTIMATE_BINARY, "--shm-name", name, "--listen", e2e::kAnyLocalPort, "--process-metrics"},
                    tmp / "estimate.log");
    const int port = e2e::metrics_port(estimator);
    ASSERT_GT(port, 0) << estimator.log();
    auto frames_read = [&](double n) {
        return e2e::wait_until([&] {
            const auto s = e2e::scrape(port, 1);
            return s && e2e::value_of(*s, "kepler_estimator_frames_read_total") >= n;
        }, 30s, 50ms);
    };
    uint64_t clock_ns = 1'000'000'000'000ull;
    ASSERT_TRUE(e2e::wait_until([&] { return e2e::scrape(port, 1).has_value(); }, 30s)) << estimator.log();
    publish(writer, clock_ns, {process(kReusedPid, 1000, 200'000'000, KEPLERSHM_PROC_NEW), process(7, 5, 100'000'000, 0)}, true);
    publish(writer, clock_ns, {process(kReusedPid, 1000, 200'000'000, KEPLERSHM_PROC_EXITED)}, false);
    ASSERT_TRUE(frames_read(2)) << estimator.log();
    const auto before = reused_pid_energy(*e2e::scrape(port));
    publish(writer, clock_ns, {process(kReusedPid, 2000, 50'000'000, KEPLERSHM_PROC_NEW), process(7, 5, 100'000'000, 0)}, false);
    publish(writer, clock_ns, {process(kReusedPid, 2000, 50'000'000, 0), process(7, 5, 100'000'000, 0)}, false);
    ASSERT_TRUE(frames_read(4)) << estimator.log();
    const auto after = reused_pid_energy(*e2e::scrape(port));

    ASSERT_EQ(before.size(), 1u);
    ASSERT_EQ(after.size(), 2u) << "two processes, two series";
    EXPECT_GT(before.at("1000"), 0);
    EXPECT_DOUBLE_EQ(after.at("1000"), before.at("1000")) << "the first process's energy is not topped up by the second";
    EXPECT_GT(after.at("2000"), 0);
    EXPECT_EQ(estimator.stop().code, 0) << estimator.log();
}

}  // namespace
