// eBPF source against the real kernel: CPU time per interval and in total, boundary truth, start time,
// exits, softirqs and page cache. Needs root and BTF; skips with the reason otherwise.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <csignal>
#include <functional>
#include <cstring>
#include <memory>
#include <optional>
#include <stdexcept>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "common/text_io.hpp"
#include "sources/bpf_source.hpp"
#include "sources/proc_stat.hpp"
#include "sources/bpf_test_support.hpp"
#include "test_support.hpp"

namespace kepler::collect {
namespace {

using testing::BusyChild;
using namespace bpf_testing;

TEST(BpfSource, AttachTypeIsOneOfTheChain) {
    SKIP_WITHOUT_BPF();
    BpfSource source(BpfOptions{});
    const AttachMode mode = source.program().mode();
    EXPECT_TRUE(mode == AttachMode::tp_btf || mode == AttachMode::raw_tp || mode == AttachMode::tracepoint);
    EXPECT_NE(source.describe().find(to_string(mode)), std::string::npos) << source.describe();
    EXPECT_TRUE(source.metric_mask() & KEPLERSHM_METRIC_CPU_TIME);
    EXPECT_FALSE(source.program().program_ids().empty());
}

TEST(BpfSource, BusyChildGetsWhatItsClockSaysEveryFrameAndMatchesProcStat) {
    SKIP_WITHOUT_BPF();
    BpfSource source(BpfOptions{});
    BusyChild child(testing::test_cpu(), 1.0);
    testing::sleep_ms(200);
    // The child started mid-interval: this first interval only counts towards the total.
    testing::Bracketed previous = testing::sample_bracketed(source, child);
    const ProcessActivity* first = find(previous.sample, child.pid());
    uint64_t total = first != nullptr ? first->cpu_time_ns : 0;
    for (int frame = 0; frame < 4; ++frame) {
        testing::sleep_ms(1000);
        const testing::Bracketed now = testing::sample_bracketed(source, child);
        const ProcessActivity* p = find(now.sample, child.pid());
        ASSERT_NE(p, nullptr) << "frame " << frame << ": the busy child is missing";
        total += p->cpu_time_ns;
        const uint64_t interval = now.sample.read_time_ns - previous.sample.read_time_ns;
        const std::string why = cut_report(source, now.sample, previous.sample);
        if (!cut_exact(now.sample, previous.sample)) {
            RecordProperty("inexact_frame", frame);
            previous = now;
            continue;
        }
        // Never more than wall time. How much of the interval the child got is the host's business (a
        // pinned child at nice -20 owns its CPU only while no other test pins one there): what it got
        // is its own clock, checked next.
        EXPECT_LE(p->cpu_time_ns, interval + 1'000'000) << "frame " << frame << ": more than the interval" << why;
        // The scheduler's own count between the same boundaries, whatever delays the machine adds.
        // Below: a switch the kernel does not report is repaired within 20 ms (kepler_repair), plus
        // one scheduler tick. Above: time still running at a boundary is wall time, which also holds
        // the interrupts and hypervisor steal the scheduler leaves out: allow 1%.
        EXPECT_GE(p->cpu_time_ns + kRepairSlack, now.before_ns - previous.after_ns) << "frame " << frame << why;
        EXPECT_LE(p->cpu_time_ns, now.after_ns - previous.before_ns + interval / 100 + 1'000'000)
            << "frame " << frame << why;
        previous = now;
    }
    const testing::ProcTimes proc = testing::proc_times(child.pid());
    const ProcessActivity* p = find(previous.sample, child.pid());
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(p->key.start_time_ticks, proc.start_ticks) << "start time must equal /proc/<pid>/stat field 22";
    EXPECT_NEAR(static_cast<double>(total), static_cast<double>(proc.cpu_ns), 0.05 * proc.cpu_ns)
        << "total over all frames vs /proc/<pid>/stat utime+stime";
    EXPECT_GE(total + kRepairSlack, previous.before_ns) << "nothing lost since the child started";
    EXPECT_LE(total, previous.after_ns + previous.after_ns / 100 + 1'000'000) << "nothing counted twice";
}

/// The context switches of `pid` so far (voluntary and not), from /proc/<pid>/status.
uint64_t context_switches(pid_t pid) {
    const std::string status = read_text_file_or_throw("/proc/" + std::to_string(pid) + "/status");
    uint64_t total = 0;
    for (const char* field : {"\nvoluntary_ctxt_switches:", "\nnonvoluntary_ctxt_switches:"}) {
        const size_t at = status.find(field);
        if (at == std::string::npos) throw std::runtime_error(std::string("no ") + (field + 1) + " in /proc/<pid>/status");
        total += std::stoull(status.substr(at + std::strlen(field)));
    }
    return total;
}

// tp_btf stamps switches with the CPU's scheduler clock, translated to the boundaries' clock, instead of
// a ~60 ns call to it (bench/kepler-collect/README.md: 212 -> 140 ns per run). Nothing else shows whether
// it engages: the stamps are right either way. Between two agreeing samples (one per 10 ms), at least half
// of a ping-pong pair's switches must be translated; the rest read the precise clock (the samples, the
// switches to idle, the switches while a boundary is pending, and any while a vCPU stall makes two samples
// disagree).
TEST(BpfSource, SwitchesAreStampedWithTheTranslatedSchedulerClock) {
    SKIP_WITHOUT_BPF();
    BpfSource source(BpfOptions{});
    if (source.program().mode() != AttachMode::tp_btf) {
        GTEST_SKIP() << "only tp_btf reads the scheduler clock; attached as " << to_string(source.program().mode());
    }
    const auto cpu = static_cast<size_t>(testing::test_cpu());
    PingPongPair pair(static_cast<int>(cpu));
    testing::sleep_ms(100);
    const auto translated = [&] {
        for (int attempt = 0; attempt < 100; ++attempt) {  // a copy torn by a switch: read again
            if (const std::optional<kepler_cpu_state> s = source.read_cpu_states().at(cpu)) return s->clock_translated;
        }
        throw std::runtime_error("every copy of the CPU's state was torn");
    };
    const uint64_t switches_before = context_switches(pair.pid(0)) + context_switches(pair.pid(1));
    const uint32_t translated_before = translated();
    testing::sleep_ms(500);
    const uint32_t translated_switches = translated() - translated_before;  // mod 2^32
    const uint64_t pair_switches = context_switches(pair.pid(0)) + context_switches(pair.pid(1)) - switches_before;
    RecordProperty("translated_switches", std::to_string(translated_switches));
    RecordProperty("pair_switches", std::to_string(pair_switches));
    ASSERT_GT(pair_switches, 1000u) << "the pair should switch thousands of times in 500 ms";
    EXPECT_GE(translated_switches, pair_switches / 2)
        << translated_switches << " translated of at least " << pair_switches << " switches on CPU " << cpu;
}

// The program stamps each switch-in on the boundaries' clock (bpf_ktime_get_ns()), which user space uses
// for the part of a running slice before a boundary. This thread's switch-in at each wake-up must lie
// between a reading of that clock before it went to sleep and one after its state was read (2 ms
// allowed: a hypervisor stalling the vCPU between the two readings and the switch).
TEST(BpfSource, SwitchInTimesAreOnTheBoundaryClock) {
    SKIP_WITHOUT_BPF();
    BpfSource source(BpfOptions{});
    const int cpu = testing::test_cpu();
    cpu_set_t previous_set, set;
    ASSERT_EQ(sched_getaffinity(0, sizeof previous_set, &previous_set), 0);
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    ASSERT_EQ(sched_setaffinity(0, sizeof set, &set), 0);
    (void)source.sample();  // a boundary published and passed, as in service
    int checked = 0;
    for (int i = 0; i < 200; ++i) {
        const uint64_t before = source.kernel_now_ns();
        usleep(500);  // switched out, and back in at the wake-up
        const std::optional<kepler_cpu_state> s = source.read_cpu_states().at(static_cast<size_t>(cpu));
        const uint64_t after = source.kernel_now_ns();
        if (!s || s->tid != static_cast<uint32_t>(gettid())) continue;  // torn, or not the latest switch-in
        EXPECT_GE(s->running_since_ns + 2'000'000, before) << "wake-up " << i;
        EXPECT_LE(s->running_since_ns, after + 2'000'000) << "wake-up " << i;
        ++checked;
    }
    sched_setaffinity(0, sizeof previous_set, &previous_set);
    EXPECT_GE(checked, 100) << "this thread was the last one switched in on its CPU after most wake-ups";
}

TEST(BpfSource, HalfDutyChildShowsAboutHalf) {
    SKIP_WITHOUT_BPF();
    BpfSource source(BpfOptions{});
    BusyChild child(testing::test_cpu(), 0.5);
    testing::sleep_ms(300);
    source.sample();
    uint64_t begin = 0;
    for (int frame = 0; frame < 3; ++frame) {
        testing::sleep_ms(1000);
        const SourceSample s = source.sample();
        const ProcessActivity* p = find(s, child.pid());
        ASSERT_NE(p, nullptr);
        if (begin != 0) {
            const double share = static_cast<double>(p->cpu_time_ns) / static_cast<double>(s.read_time_ns - begin);
            EXPECT_GT(share, 0.35) << "frame " << frame;
            EXPECT_LT(share, 0.65) << "frame " << frame;
        }
        begin = s.read_time_ns;
    }
}

TEST(BpfSource, ExitedChildIsReportedOnceWithItsTime) {
    SKIP_WITHOUT_BPF();
    BpfSource source(BpfOptions{});
    auto child = std::make_unique<BusyChild>(testing::test_cpu(), 1.0);
    const pid_t pid = child->pid();
    const uint64_t start_ticks = testing::proc_times(pid).start_ticks;
    testing::sleep_ms(700);
    uint64_t seen = 0;
    for (const ProcessActivity& p : source.sample().processes) {
        if (p.key.pid == static_cast<uint32_t>(pid)) seen += p.cpu_time_ns;
    }
    testing::sleep_ms(300);
    const uint64_t rusage_ns = child->stop();
    testing::sleep_ms(100);
    const SourceSample s = source.sample();
    const ProcessActivity* p = find(s, pid);
    ASSERT_NE(p, nullptr) << "the exit interval must carry the process";
    EXPECT_TRUE(p->flags & KEPLERSHM_PROC_EXITED);
    EXPECT_EQ(p->key.start_time_ticks, start_ticks);
    EXPECT_GE(s.exited_processes, 1u);
    seen += p->cpu_time_ns;
    EXPECT_NEAR(static_cast<double>(seen), static_cast<double>(rusage_ns), 0.05 * rusage_ns + 5e6);
    testing::sleep_ms(100);
    const SourceSample after = source.sample();  // the entry is deleted now, not reported again
    const ProcessActivity* again = find(after, pid);
    EXPECT_TRUE(again == nullptr || !(again->flags & KEPLERSHM_PROC_EXITED));
}

TEST(BpfSource, SoftirqCountersMoveUnderLoopbackTraffic) {
    SKIP_WITHOUT_BPF();
    BpfSource source(BpfOptions{});
    source.sample();
    // TCP over loopback: transmitting raises NET_RX, which runs in the sender's context.
    const int listener = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
    ASSERT_EQ(listen(listener, 1), 0);
    socklen_t length = sizeof address;
    getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length);
    const int sender = socket(AF_INET, SOCK_STREAM, 0);
    ASSERT_EQ(connect(sender, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
    const int receiver = accept(listener, nullptr, nullptr);
    std::thread drain([receiver] {
        std::vector<char> buffer(1 << 16);
        while (read(receiver, buffer.data(), buffer.size()) > 0) {
        }
    });
    std::vector<char> payload(1 << 16, 'x');
    for (int i = 0; i < 2000; ++i) ASSERT_GT(write(sender, payload.data(), payload.size()), 0);
    close(sender);
    drain.join();
    close(receiver);
    close(listener);

    const SourceSample s = source.sample();
    EXPECT_TRUE(s.metric_mask & KEPLERSHM_METRIC_SOFTIRQ);
    const ProcessActivity* self = find(s, getpid());
    ASSERT_NE(self, nullptr);
    EXPECT_TRUE(self->flags & KEPLERSHM_PROC_SOFTIRQ_VALID);
    EXPECT_GT(self->softirq[3], 0u) << "NET_RX softirqs of our own loopback traffic";
}

TEST(BpfSource, PageCacheCountersMoveUnderFileActivity) {
    SKIP_WITHOUT_BPF();
    BpfSource source(BpfOptions{});
    if (!source.program().page_cache_attached()) GTEST_SKIP() << "this kernel has no filemap tracepoints";
    testing::TempDir dir;
    const std::string file = (dir.path() / "data").string();
    const std::vector<char> block(1 << 20, 'k');
    source.sample();
    {
        const int fd = open(file.c_str(), O_CREAT | O_WRONLY | O_TRUNC, 0600);
        ASSERT_GE(fd, 0);
        for (int i = 0; i < 16; ++i) ASSERT_EQ(write(fd, block.data(), block.size()), static_cast<ssize_t>(block.size()));
        fsync(fd);
        posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);  // evict: the first read below must insert again
        close(fd);
    }
    std::vector<char> buffer(1 << 20);
    auto read_all = [&] {
        const int fd = open(file.c_str(), O_RDONLY);
        while (read(fd, buffer.data(), buffer.size()) > 0) {
        }
        close(fd);
    };
    read_all();
    const SourceSample miss = source.sample();
    const ProcessActivity* self = find(miss, getpid());
    ASSERT_NE(self, nullptr);
    EXPECT_TRUE(self->flags & KEPLERSHM_PROC_PAGE_CACHE_VALID);
    EXPECT_GT(self->page_cache_misses, 0u) << "pages inserted by writing and re-reading an evicted file";

    for (int i = 0; i < 5; ++i) read_all();  // now cached: requested, nothing inserted
    const SourceSample hit = source.sample();
    self = find(hit, getpid());
    ASSERT_NE(self, nullptr);
    EXPECT_GE(self->page_cache_hits, 4u * 16u * 256u) << "5 reads of 16 MiB from the cache";
}

/// Σ idle + iowait over the CPUs of /proc/stat, in ns: the kernel's own idle clock (with NO_HZ it is
/// the exact time in the idle loop, truncated to USER_HZ ticks when printed), independent of the program.
uint64_t proc_stat_idle_ns() {
    uint64_t ticks = 0;
    const std::string text = read_text_file_or_throw("/proc/stat", 1 << 20);
    for (std::string_view line : split_lines(text)) {
        if (!starts_with(line, "cpu") || line.size() < 4 || line[3] == ' ') continue;  // "cpuN" lines only
        const std::vector<std::string_view> f = split_fields(line);  // cpuN user nice system idle iowait ...
        if (f.size() < 6) throw CollectError("/proc/stat: short cpu line");
        ticks += parse_u64_or_throw(f[4], "/proc/stat idle") + parse_u64_or_throw(f[5], "/proc/stat iowait");
    }
    return ticks * ns_per_tick();
}

/// Each child's scheduler clock, read just before and just after a sample: the sample's boundary lies
/// between the two, so a child's true time over an interval is bracketed.
struct ChildClocks {
    std::vector<uint64_t> before, after;
};

ChildClocks sample_with_clocks(BpfSource& source, const std::vector<std::unique_ptr<BusyChild>>& children, SourceSample& out) {
    ChildClocks c;
    for (const auto& child : children) c.before.push_back(child->cpu_ns());
    out = source.sample();
    for (const auto& child : children) c.after.push_back(child->cpu_ns());
    return c;
}

// Periodic 10 ms busy/sleep loops wake on the tick, which /proc/stat's tick sampling overcounts (issue 18:
// by 73 %). The program's node CPU time is on the processes' clock and cut at their boundary, so the
// processes explain it (nothing is left unaccounted), its idle time agrees with the kernel's own idle
// clock, and each child's share of the node's busy time is its true share, every interval.
void expect_node_time_on_the_process_clock(const std::vector<double>& duties) {
    BpfSource source(BpfOptions{});
    std::vector<std::unique_ptr<BusyChild>> children;
    for (double duty : duties) children.push_back(std::make_unique<BusyChild>(testing::test_cpu(), duty));
    testing::sleep_ms(300);
    const uint64_t idle_outer_begin = proc_stat_idle_ns();
    SourceSample previous;  // CPUs first seen in this interval: a baseline only
    ChildClocks previous_clocks = sample_with_clocks(source, children, previous);
    const uint64_t idle_inner_begin = proc_stat_idle_ns();
    const uint64_t first_read_ns = previous.read_time_ns;
    uint64_t busy = 0, task = 0, kernel = 0, idle = 0, processes = 0;
    uint64_t idle_inner_end = 0;
    for (int frame = 0; frame < 5; ++frame) {
        testing::sleep_ms(1000);
        idle_inner_end = proc_stat_idle_ns();
        SourceSample s;
        const ChildClocks clocks = sample_with_clocks(source, children, s);
        ASSERT_TRUE(s.node_cpu.has_value()) << "the eBPF source measures node CPU time itself";
        const uint64_t wall = s.read_time_ns - previous.read_time_ns;
        EXPECT_EQ(s.node_cpu->cpus.size(), static_cast<size_t>(sysconf(_SC_NPROCESSORS_ONLN))) << "frame " << frame;
        for (const keplershm_cpu_sample& c : s.node_cpu->cpus) {
            // Task time is part of the interval on one CPU, cut at the same boundaries — but on the task
            // clock, which starts a slice at the runqueue clock update a little before the switch
            // tracepoint that starts the program's wall time: a slice spanning a boundary can put those
            // nanoseconds on either side (seen: 281 ns over a 1 s interval, once in a soak). Allowed: 1 ms,
            // as the process tests allow for a boundary's wall time.
            EXPECT_LE(c.idle_ns, wall) << "frame " << frame << " cpu " << c.cpu;
            EXPECT_LE(c.user_ns, wall + 1'000'000) << "frame " << frame << " cpu " << c.cpu;
            EXPECT_EQ(c.user_ns + c.idle_ns, std::max(wall, c.user_ns)) << "busy is task time, the rest idle";
            EXPECT_EQ(c.system_ns + c.nice_ns + c.irq_ns + c.softirq_ns + c.steal_ns + c.iowait_ns, 0u)
                << "not split by the program";
            task += c.user_ns;
            kernel += c.irq_ns;
            idle += c.idle_ns;
        }
        const uint64_t frame_busy = s.node_cpu->busy_ns;
        busy += frame_busy;
        for (const ProcessActivity& p : s.processes) processes += p.cpu_time_ns;
        for (size_t i = 0; i < children.size(); ++i) {
            const ProcessActivity* p = find(s, children[i]->pid());
            ASSERT_NE(p, nullptr) << "frame " << frame << ": the child at duty " << duties[i] << " is missing";
            // Its true time lies between the clocks' inner and outer differences around the two samples;
            // its share of busy time must be within 2 points of a share in that range (issue 18's goal).
            const uint64_t lo = clocks.before[i] - previous_clocks.after[i];
            const uint64_t hi = clocks.after[i] - previous_clocks.before[i];
            const uint64_t off = p->cpu_time_ns < lo ? lo - p->cpu_time_ns : p->cpu_time_ns > hi ? p->cpu_time_ns - hi : 0;
            EXPECT_LE(off, frame_busy / 50) << "frame " << frame << ", duty " << duties[i] << ": " << p->cpu_time_ns
                                            << " ns vs its clock's " << lo << "–" << hi << " ns, node busy " << frame_busy;
        }
        previous = s;
        previous_clocks = clocks;
    }
    const uint64_t idle_outer_end = proc_stat_idle_ns();
    const std::string run = " over 5 s: busy " + std::to_string(busy) + " ns, tasks " + std::to_string(task) +
                            ", processes " + std::to_string(processes) + ", kernel " + std::to_string(kernel) +
                            ", idle " + std::to_string(idle);
    EXPECT_EQ(busy, task + kernel) << run;
    // Issue 18's goal: what no process explains is at most 2 % of node CPU time (it was 50 % on ticks).
    EXPECT_LE(task > processes ? task - processes : 0, busy / 50) << run;
    EXPECT_LE(processes > task ? processes - task : 0, busy / 50) << run;
    // The kernel's idle clock between readings just inside and just outside the same boundaries, each
    // truncated to a tick per CPU. Idle here is the interval less task time, so it also holds what the
    // kernel's idle clock leaves out: interrupts on an idle CPU, the idle loop's entry and exit. Measured
    // with the idle task's wall time instead: +89 ms over 9 s of 10 ms wake-ups, −62 ms over 5 s beside a
    // compiler (0.6–1 % of the CPU time). Allowed: issue 18's 2 % of the CPU time — ticks were off by 73 %.
    const uint64_t cpus = static_cast<uint64_t>(sysconf(_SC_NPROCESSORS_ONLN));
    const uint64_t allowed = cpus * ns_per_tick() + cpus * (previous.read_time_ns - first_read_ns) / 50;
    EXPECT_GE(idle + allowed, idle_inner_end - idle_inner_begin) << run;
    EXPECT_LE(idle, idle_outer_end - idle_outer_begin + allowed) << run;
}

TEST(BpfSource, NodeTimeIsOnTheProcessClockUnderTickAlignedLoad) {
    SKIP_WITHOUT_BPF();
    expect_node_time_on_the_process_clock({0.6, 0.3, 0.1});
}

TEST(BpfSource, NodeTimeIsOnTheProcessClockOnANearlyQuietNode) {
    SKIP_WITHOUT_BPF();
    expect_node_time_on_the_process_clock({0.05, 0.02, 0.01});
}

}  // namespace

// Readable parameter names in test output and CTest names.
void PrintTo(AttachMode mode, std::ostream* out) { *out << to_string(mode); }

namespace {

class BpfAttachFlavour : public ::testing::TestWithParam<AttachMode> {};

TEST_P(BpfAttachFlavour, CountsABusyChild) {
    SKIP_WITHOUT_BPF();
    if (GetParam() == AttachMode::tracepoint && access("/sys/kernel/tracing/events", F_OK) != 0 &&
        access("/sys/kernel/debug/tracing/events", F_OK) != 0) {
        GTEST_SKIP() << "classic tracepoints need tracefs, which is not mounted here";
    }
    BpfOptions options;
    options.attach = GetParam();
    BpfSource source(options);
    EXPECT_EQ(source.program().mode(), GetParam());
    BusyChild child(testing::test_cpu(), 1.0);
    testing::sleep_ms(200);
    const testing::Bracketed first = testing::sample_bracketed(source, child);
    testing::sleep_ms(1000);
    const testing::Bracketed second = testing::sample_bracketed(source, child);
    const ProcessActivity* p = find(second.sample, child.pid());
    ASSERT_NE(p, nullptr);
    // What the child's own clock says it ran between the two samples (a repaired switch aside).
    EXPECT_GE(p->cpu_time_ns + kRepairSlack, second.before_ns - first.after_ns) << to_string(GetParam());
    EXPECT_LE(p->cpu_time_ns, second.sample.read_time_ns - first.sample.read_time_ns + 1'000'000) << to_string(GetParam());
    EXPECT_EQ(p->key.start_time_ticks, testing::proc_times(child.pid()).start_ticks);
}

INSTANTIATE_TEST_SUITE_P(Chain, BpfAttachFlavour,
                         ::testing::Values(AttachMode::tp_btf, AttachMode::raw_tp, AttachMode::tracepoint),
                         [](const auto& info) { return std::string(to_string(info.param)); });

TEST(BpfSource, MapFullIsCountedNotSilent) {
    SKIP_WITHOUT_BPF();
    BpfOptions options;
    options.max_processes = 64;  // far fewer than the processes that run on any machine
    BpfSource source(options);
    std::vector<std::unique_ptr<BusyChild>> children;
    for (int i = 0; i < 80; ++i) children.push_back(std::make_unique<BusyChild>(testing::test_cpu(), 0.1));
    testing::sleep_ms(500);
    const SourceSample s = source.sample();
    children.clear();
    EXPECT_GT(s.dropped_entries, 0u) << "processes that did not fit must be counted";
}

}  // namespace
}  // namespace kepler::collect
