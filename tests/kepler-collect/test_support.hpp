// test_support.hpp — helpers shared by the kepler-collect tests: child processes with a known CPU
// pattern, reading a process's own accounting from /proc, temporary directories, fixtures, privilege checks.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <string>

#include "sources/process_source.hpp"

namespace kepler::collect::testing {

/// A child process that burns CPU pinned to one CPU: busy all the time (duty 1.0) or busy for
/// duty × 10 ms of its own CPU time, then sleeping (1 − duty) × 10 ms. With root it runs in a session
/// of its own at nice −20, task and autogroup, so other work on the machine (parallel builds) cannot
/// take its CPU. Killed and reaped on destruction.
class BusyChild {
public:
    BusyChild(int cpu, double duty);
    BusyChild(const BusyChild&) = delete;
    BusyChild& operator=(const BusyChild&) = delete;
    ~BusyChild();
    [[nodiscard]] pid_t pid() const noexcept { return pid_; }
    /// Stops the child and returns its total CPU time from wait4's rusage.
    uint64_t stop();

private:
    pid_t pid_ = -1;
};

/// /proc/<pid>/stat field 22 and utime+stime in ns (USER_HZ ticks converted).
struct ProcTimes {
    uint64_t start_ticks = 0;
    uint64_t cpu_ns = 0;
};
[[nodiscard]] ProcTimes proc_times(pid_t pid);

/// The scheduler's exact count of a process's CPU time, all threads, including the slice it is running
/// now (clock_getcpuclockid; /proc/<pid>/schedstat lags by up to a tick for a running task).
[[nodiscard]] uint64_t process_cpu_ns(pid_t pid);

/// A sample taken between two reads of a process's CPU clock: the sample's boundary lies between
/// them, so the scheduler's count over an interval is bracketed exactly even on a loaded machine.
struct Bracketed {
    SourceSample sample;
    uint64_t before_ns = 0;
    uint64_t after_ns = 0;
};
Bracketed sample_bracketed(ProcessSource& source, pid_t pid);

/// A fresh directory under $TMPDIR, removed on destruction.
class TempDir {
public:
    TempDir();
    ~TempDir();
    [[nodiscard]] const std::filesystem::path& path() const noexcept { return path_; }
    /// Writes `content` to `relative` (parents created), atomically replacing an existing file.
    void write(const std::string& relative, const std::string& content) const;

private:
    std::filesystem::path path_;
};

/// The bytes of tests/kepler-collect/fixtures/<name> (captured from real nodes); throws when it is missing.
[[nodiscard]] std::string fixture(const std::string& name);

/// A /proc/<pid>/stat line for a fake /proc tree, with the fields the collector reads.
[[nodiscard]] std::string proc_stat_line(uint32_t pid, const std::string& comm, uint64_t utime, uint64_t stime,
                                         uint64_t start, uint32_t ppid = 1, uint64_t children = 0);

/// Empty when eBPF tests can run here; else the reason to skip (not root, no BTF).
[[nodiscard]] std::string bpf_skip_reason();

/// A unique shared-memory segment name for this test process.
[[nodiscard]] std::string unique_segment_name(const std::string& stem);

/// The CPU a pinned child should use: the last online CPU (CPU 0 takes most interrupts).
[[nodiscard]] int test_cpu();

void sleep_ms(int ms);

}  // namespace kepler::collect::testing
