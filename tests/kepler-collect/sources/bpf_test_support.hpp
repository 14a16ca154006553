// Helpers of the eBPF source's tests (bpf_source_test.cpp, bpf_cut_test.cpp): the skip for machines
// without eBPF, a process in a sample, what the frame's cut met (for failure messages), and a pair of
// processes switching ~10^5 times a second.
#pragma once

#include <sched.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <csignal>
#include <cstdint>
#include <stdexcept>
#include <string>

#include <gtest/gtest.h>

#include "sources/bpf_source.hpp"
#include "test_support.hpp"

namespace kepler::collect::bpf_testing {

inline constexpr uint64_t kRepairSlack = 25'000'000;  // 20 ms repair period + a 4 ms tick (HZ=250)

#define SKIP_WITHOUT_BPF()                                                    \
    do {                                                                      \
        if (const std::string why = testing::bpf_skip_reason(); !why.empty()) \
            GTEST_SKIP() << "eBPF tests skipped: " << why;                   \
    } while (0)

inline const ProcessActivity* find(const SourceSample& s, pid_t pid) {
    for (const ProcessActivity& p : s.processes) {
        if (p.key.pid == static_cast<uint32_t>(pid)) return &p;
    }
    return nullptr;
}

/// What the cut met so far, for failure messages: a frame over or under its bounds says why or why not.
inline std::string cut_report(const BpfSource& source, const SourceSample& now, const SourceSample& previous) {
    const CutStats& c = source.cut_stats();
    return " [cut: inexact " + std::to_string(previous.inexact_cuts) + " then " + std::to_string(now.inexact_cuts) +
           "; torn copies " + std::to_string(c.torn_copies) + ", writer waits " + std::to_string(c.writer_waits) +
           " (longest " + std::to_string(c.max_writer_wait_ns) + " ns), CPUs given up " +
           std::to_string(c.inexact_cpus) + ", marks lost " + std::to_string(c.lost_marks) + ", late charges " +
           std::to_string(c.late_charges) + ", boundary to read at most " + std::to_string(c.max_read_delay_ns) +
           " ns]";
}

/// A frame is held to exact bounds unless it or the frame before it said its cut was inexact (then one
/// slice may sit in the neighbouring frame; totals still hold).
inline bool cut_exact(const SourceSample& now, const SourceSample& previous) {
    return now.inexact_cuts == 0 && previous.inexact_cuts == 0;
}


/// Two processes on one CPU handing a byte back and forth through two pipes: ~10^5 context switches a
/// second, so slices end all the time, also while the source reads its maps, and a slice spans nearly
/// every boundary.
class PingPongPair {
public:
    explicit PingPongPair(int cpu) {
        int there[2], back[2];
        if (pipe(there) != 0 || pipe(back) != 0) throw std::runtime_error("pipe failed");
        pids_[0] = spawn(cpu, back[0], there[1], true);
        pids_[1] = spawn(cpu, there[0], back[1], false);
        for (int fd : {there[0], there[1], back[0], back[1]}) close(fd);
    }
    PingPongPair(const PingPongPair&) = delete;
    PingPongPair& operator=(const PingPongPair&) = delete;
    ~PingPongPair() {
        for (pid_t pid : pids_) {
            if (pid <= 0) continue;
            kill(pid, SIGKILL);
            waitpid(pid, nullptr, 0);
        }
    }
    [[nodiscard]] pid_t pid(size_t i) const { return pids_.at(i); }

private:
    static pid_t spawn(int cpu, int in, int out, bool serves_first) {
        const pid_t pid = fork();
        if (pid < 0) throw std::runtime_error("fork failed");
        if (pid > 0) return pid;
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(cpu, &set);
        sched_setaffinity(0, sizeof set, &set);
        char byte = 'x';
        if (serves_first && write(out, &byte, 1) != 1) _exit(1);
        while (read(in, &byte, 1) == 1 && write(out, &byte, 1) == 1) {
        }
        _exit(0);
    }
    std::array<pid_t, 2> pids_{-1, -1};
};

}  // namespace kepler::collect::bpf_testing
