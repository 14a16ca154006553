// cut_probe — measures the eBPF source's frame cut on this machine (bench/kepler-collect/README.md, "The
// frame's cut"): how late after each boundary the per-CPU states are read, how often a CPU's state is
// being written then and for how long, cut marks lost or taken late, and, in a build with
// -DKEPLERSHM_BPF_CUT_STATS=ON, how far each switch stamped with the translated scheduler clock lies from
// the precise clock. A busy child pinned to the last CPU runs throughout (with --competitor, a second
// process on the same CPU that spins 3 ms and sleeps 2 ms, so slices span the boundaries); each frame
// checks the child against its own CPU clock and against the frame's wall interval.
//
//   cut_probe [--frames N] [--interval-ms MS] [--competitor] [--attach MODE]   (root: loads the eBPF program)
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <new>
#include <stdexcept>
#include <cstdio>
#include <cstring>
#include <string>
#include <optional>
#include <thread>

#include <bpf/bpf.h>

#include "sources/bpf_source.hpp"

namespace {

using kepler::collect::BpfOptions;
using kepler::collect::BpfSource;
using kepler::collect::CutStats;
using kepler::collect::SourceSample;

uint64_t thread_cpu_ns() {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

/// A child pinned to `cpu`: spins `busy_us`, then sleeps `idle_us` (0: spins for ever). It publishes its
/// own thread clock in `clock` (shared): another process's CPU clock lags a running task by up to a tick.
pid_t spawn_pinned(int cpu, long busy_us, long idle_us, std::atomic<uint64_t>* clock) {
    const pid_t pid = fork();
    if (pid != 0) return pid;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    sched_setaffinity(0, sizeof set, &set);
    for (;;) {
        timespec start{}, now{};
        clock_gettime(CLOCK_MONOTONIC, &start);
        do {
            clock_gettime(CLOCK_MONOTONIC, &now);
            clock->store(thread_cpu_ns(), std::memory_order_relaxed);
        } while (idle_us == 0 || (now.tv_sec - start.tv_sec) * 1'000'000 + (now.tv_nsec - start.tv_nsec) / 1000 < busy_us);
        const timespec pause{0, idle_us * 1000};
        nanosleep(&pause, nullptr);
    }
}

uint64_t child_ns(const SourceSample& s, pid_t pid) {
    for (const auto& p : s.processes) {
        if (p.key.pid == static_cast<uint32_t>(pid)) return p.cpu_time_ns;
    }
    return 0;
}

template <class Count>
void print_histogram(const char* title, const Count* buckets, size_t count, const char* unit) {
    std::printf("%s\n", title);
    for (size_t i = 0; i < count; ++i) {
        if (buckets[i] == 0) continue;
        const unsigned long long low = i == 0 ? 0ull : 1ull << (i - 1);
        std::printf("  [%llu, %llu) %s: %llu\n", low, 1ull << i, unit, static_cast<unsigned long long>(buckets[i]));
    }
}

#ifdef KEPLER_CUT_STATS
void print_translation_lag(const BpfSource& source) {
    const uint32_t cpus = source.program().possible_cpus();
    std::vector<kepler_cut_stats> per_cpu(cpus);
    const uint32_t zero = 0;
    if (bpf_map_lookup_elem(source.program().cut_stats_fd(), &zero, per_cpu.data()) != 0) return;
    kepler_cut_stats sum{};
    for (const kepler_cut_stats& c : per_cpu) {
        sum.translated += c.translated;
        for (size_t i = 0; i < KEPLER_LAG_BUCKETS; ++i) {
            sum.early[i] += c.early[i];
            sum.late[i] += c.late[i];
        }
        sum.max_early_ns = std::max(sum.max_early_ns, c.max_early_ns);
        sum.max_late_ns = std::max(sum.max_late_ns, c.max_late_ns);
    }
    std::printf("translated switch stamps: %llu; latest-early %llu ns, most late %llu ns\n",
                static_cast<unsigned long long>(sum.translated), static_cast<unsigned long long>(sum.max_early_ns),
                static_cast<unsigned long long>(sum.max_late_ns));
    print_histogram("  stamp before the precise clock by", sum.early, KEPLER_LAG_BUCKETS, "ns");
    print_histogram("  stamp after the precise clock by", sum.late, KEPLER_LAG_BUCKETS, "ns");
}
#else
void print_translation_lag(const BpfSource&) {
    std::printf("translated switch stamps: not measured (build with -DKEPLERSHM_BPF_CUT_STATS=ON)\n");
}
#endif

}  // namespace

int main(int argc, char** argv) {
    int frames = 60;
    int interval_ms = 500;
    bool competitor = false;
    std::optional<kepler::collect::AttachMode> attach;
    for (int i = 1; i < argc; ++i) {
        const std::string arg = argv[i];
        if (arg == "--frames" && i + 1 < argc) frames = std::stoi(argv[++i]);
        else if (arg == "--interval-ms" && i + 1 < argc) interval_ms = std::stoi(argv[++i]);
        else if (arg == "--competitor") competitor = true;
        else if (arg == "--attach" && i + 1 < argc) attach = kepler::collect::parse_attach_mode(argv[++i]);
        else {
            std::fprintf(stderr, "usage: %s [--frames N] [--interval-ms MS] [--competitor] [--attach tp_btf|raw_tp|tracepoint]\n",
                         argv[0]);
            return 2;
        }
    }
    try {
        BpfOptions options;
        options.attach = attach;
        BpfSource source(options);
        const int cpu = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN)) - 1;
        void* page = mmap(nullptr, 2 * sizeof(std::atomic<uint64_t>), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        if (page == MAP_FAILED) throw std::runtime_error("mmap failed");
        auto* clocks = new (page) std::atomic<uint64_t>[2]{};
        const pid_t busy = spawn_pinned(cpu, 0, 0, &clocks[0]);
        const pid_t rival = competitor ? spawn_pinned(cpu, 3000, 2000, &clocks[1]) : -1;
        const auto cpu_clock_ns = [&](pid_t) { return clocks[0].load(std::memory_order_relaxed); };
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        uint64_t clock_before = cpu_clock_ns(busy);
        SourceSample previous = source.sample();
        uint64_t clock_after = cpu_clock_ns(busy);
        uint64_t over_wall = 0, over_clock = 0, under_clock = 0, inexact = 0, max_over_wall = 0, max_over_clock = 0;
        for (int f = 0; f < frames; ++f) {
            std::this_thread::sleep_for(std::chrono::milliseconds(interval_ms));
            const uint64_t now_before = cpu_clock_ns(busy);
            const SourceSample now = source.sample();
            const uint64_t now_after = cpu_clock_ns(busy);
            const uint64_t got = child_ns(now, busy);
            const uint64_t wall = now.read_time_ns - previous.read_time_ns;
            if (now.inexact_cuts != 0) ++inexact;
            if (got > wall) ++over_wall, max_over_wall = std::max(max_over_wall, got - wall);
            if (got > now_after - clock_before) ++over_clock, max_over_clock = std::max(max_over_clock, got - (now_after - clock_before));
            if (got + 25'000'000 < now_before - clock_after) ++under_clock;
            // Frames more than 1 ms off their bracket, with the truth around them, for a closer look.
            const uint64_t lower = now_before - clock_after, upper = now_after - clock_before;
            if (got > upper + 1'000'000 || got + 1'000'000 < lower) {
                std::printf("frame %d: child %.3f ms, its clock advanced %.3f..%.3f ms, wall %.3f ms, inexact %llu\n", f,
                            got / 1e6, lower / 1e6, upper / 1e6, wall / 1e6,
                            static_cast<unsigned long long>(now.inexact_cuts));
            }
            previous = now;
            clock_before = now_before;
            clock_after = now_after;
        }
        kill(busy, SIGKILL);
        waitpid(busy, nullptr, 0);
        if (rival > 0) kill(rival, SIGKILL), waitpid(rival, nullptr, 0);

        const CutStats& c = source.cut_stats();
        std::printf("frames: %d of %d ms%s, busy child on CPU %d\n", frames, interval_ms,
                    competitor ? " with a competitor on its CPU" : "", cpu);
        std::printf("child over the frame's wall interval: %llu frames (most %llu ns); over its own CPU clock: %llu "
                    "(most %llu ns); under its CPU clock by > 25 ms: %llu; frames flagged inexact: %llu\n",
                    static_cast<unsigned long long>(over_wall), static_cast<unsigned long long>(max_over_wall),
                    static_cast<unsigned long long>(over_clock), static_cast<unsigned long long>(max_over_clock),
                    static_cast<unsigned long long>(under_clock), static_cast<unsigned long long>(inexact));
        std::printf("per-CPU state copies torn: %llu; frames that waited for a writer: %llu (longest %llu ns); "
                    "CPUs given up: %llu; cut marks lost: %llu; late charges: %llu\n",
                    static_cast<unsigned long long>(c.torn_copies), static_cast<unsigned long long>(c.writer_waits),
                    static_cast<unsigned long long>(c.max_writer_wait_ns), static_cast<unsigned long long>(c.inexact_cpus),
                    static_cast<unsigned long long>(c.lost_marks), static_cast<unsigned long long>(c.late_charges));
        std::printf("boundary to the per-CPU read: most %llu ns\n", static_cast<unsigned long long>(c.max_read_delay_ns));
        print_histogram("  distribution", c.read_delay_us.data(), c.read_delay_us.size(), "us");
        print_translation_lag(source);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "cut_probe: %s\n", e.what());
        return 1;
    }
    return 0;
}
