// procfs source: per-interval truth for a busy and a half-duty child against the scheduler's own
// count, keying by (pid, start time) across pid reuse, and exits.
#include <unistd.h>

#include <memory>

#include <gtest/gtest.h>

#include "sources/procfs_source.hpp"
#include "test_support.hpp"

namespace kepler::collect {
namespace {

using testing::BusyChild;

const ProcessActivity* find(const SourceSample& s, pid_t pid) {
    for (const ProcessActivity& p : s.processes) {
        if (p.key.tgid == static_cast<uint32_t>(pid)) return &p;
    }
    return nullptr;
}

std::string stat_line(uint32_t pid, const std::string& comm, uint64_t utime, uint64_t stime, uint64_t start) {
    return std::to_string(pid) + " (" + comm + ") R 1 1 1 0 -1 4194304 0 0 0 0 " + std::to_string(utime) + " " +
           std::to_string(stime) + " 0 0 20 0 1 0 " + std::to_string(start) + " 1000 100 0\n";
}

TEST(ProcfsSource, ReusedPidIsANewProcessNotAContinuation) {
    testing::TempDir proc;
    proc.write("100/stat", stat_line(100, "first", 10, 5, 5000));
    proc.write("not-a-pid/stat", "ignored");
    ProcfsSource source(proc.path().string());
    proc.write("100/stat", stat_line(100, "first", 20, 5, 5000));
    SourceSample s = source.sample();
    ASSERT_EQ(s.processes.size(), 1u);
    EXPECT_EQ(s.processes[0].cpu_time_ns, 10 * ns_per_tick());
    EXPECT_FALSE(s.processes[0].flags & KEPLERSHM_PROC_NEW);

    // pid 100 exited and the kernel handed the number to a new process.
    proc.write("100/stat", stat_line(100, "second", 3, 0, 9000));
    s = source.sample();
    ASSERT_EQ(s.processes.size(), 1u);
    EXPECT_EQ(s.processes[0].key.start_ticks, 9000u);
    EXPECT_TRUE(s.processes[0].flags & KEPLERSHM_PROC_NEW);
    EXPECT_EQ(s.processes[0].cpu_time_ns, 3 * ns_per_tick()) << "never 3 − 20 ticks, never merged with the first";
    EXPECT_EQ(std::string(s.processes[0].comm.data()), "second");
    EXPECT_EQ(s.exited_processes, 1u);
}

TEST(ProcfsSource, IdleProcessesAreLeftOutAndKernelThreadsFlagged) {
    testing::TempDir proc;
    proc.write("2/stat", "2 (kthreadd) S 0 0 0 0 -1 2129984 0 0 0 0 7 1 0 0 20 0 1 0 2 0 0 0\n");
    proc.write("300/stat", stat_line(300, "sleeper", 1, 1, 700));
    ProcfsSource source(proc.path().string());
    proc.write("2/stat", "2 (kthreadd) S 0 0 0 0 -1 2129984 0 0 0 0 9 1 0 0 20 0 1 0 2 0 0 0\n");
    const SourceSample s = source.sample();
    ASSERT_EQ(s.processes.size(), 1u) << "the sleeper had no CPU time in the interval";
    EXPECT_TRUE(s.processes[0].flags & KEPLERSHM_PROC_KERNEL);
}

TEST(ProcfsSource, BusyChildEveryIntervalMatchesTheScheduler) {
    ProcfsSource source;
    BusyChild child(testing::test_cpu(), 1.0);
    testing::sleep_ms(200);
    testing::Bracketed previous = testing::sample_bracketed(source, child.pid());
    // utime and stime are each truncated to whole ticks (10 ms at USER_HZ=100).
    const uint64_t granularity = 2 * ns_per_tick();
    for (int frame = 0; frame < 3; ++frame) {
        testing::sleep_ms(1000);
        const testing::Bracketed now = testing::sample_bracketed(source, child.pid());
        const ProcessActivity* p = find(now.sample, child.pid());
        ASSERT_NE(p, nullptr);
        EXPECT_EQ(p->key.start_ticks, testing::proc_times(child.pid()).start_ticks);
        EXPECT_GE(p->cpu_time_ns + granularity, now.before_ns - previous.after_ns) << "frame " << frame;
        EXPECT_LE(p->cpu_time_ns, now.after_ns - previous.before_ns + granularity) << "frame " << frame;
        if (geteuid() == 0) {  // at nice −20 the child owns its CPU, so it must show ~the whole interval
            EXPECT_GE(p->cpu_time_ns, (now.sample.read_time_ns - previous.sample.read_time_ns) * 85 / 100)
                << "frame " << frame;
        }
        previous = now;
    }
}

TEST(ProcfsSource, HalfDutyChildShowsAboutHalf) {
    if (geteuid() != 0) GTEST_SKIP() << "needs root to run the child at nice -20, away from other load";
    ProcfsSource source;
    BusyChild child(testing::test_cpu(), 0.5);
    testing::sleep_ms(300);
    uint64_t begin = source.sample().read_time_ns;
    for (int frame = 0; frame < 2; ++frame) {
        testing::sleep_ms(1000);
        const SourceSample s = source.sample();
        const ProcessActivity* p = find(s, child.pid());
        ASSERT_NE(p, nullptr);
        const double share = static_cast<double>(p->cpu_time_ns) / static_cast<double>(s.read_time_ns - begin);
        EXPECT_GT(share, 0.35);
        EXPECT_LT(share, 0.65);
        begin = s.read_time_ns;
    }
}

TEST(ProcfsSource, ExitedChildIsCounted) {
    ProcfsSource source;
    auto child = std::make_unique<BusyChild>(testing::test_cpu(), 1.0);
    testing::sleep_ms(100);
    source.sample();
    child.reset();
    const SourceSample s = source.sample();
    EXPECT_GE(s.exited_processes, 1u);
}

}  // namespace
}  // namespace kepler::collect
