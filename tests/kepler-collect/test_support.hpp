// test_support.hpp — helpers shared by the kepler-collect tests: child processes with a known CPU
// pattern, reading a process's own accounting from /proc, temporary directories, fixtures, privilege checks.
#pragma once

#include <atomic>

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
    /// Its CPU time now, as the child reads its own thread clock (published at least every few µs while
    /// it runs; while it does not run, the clock does not move either). The truth the timing tests
    /// measure against: process_cpu_ns() lags a task running on another CPU by up to a tick.
    [[nodiscard]] uint64_t cpu_ns() const noexcept;
    /// Stops the child and returns its total CPU time from wait4's rusage.
    uint64_t stop();

private:
    pid_t pid_ = -1;
    std::atomic<uint64_t>* clock_ = nullptr;  // in a page shared with the child
};

/// /proc/<pid>/stat field 22 and utime+stime in ns (USER_HZ ticks converted).
struct ProcTimes {
    uint64_t start_ticks = 0;
    uint64_t cpu_ns = 0;
};
[[nodiscard]] ProcTimes proc_times(pid_t pid);

/// The scheduler's count of another process's CPU time, all threads (clock_getcpuclockid). Exact for
/// slices that ended; a slice running on another CPU shows only up to that CPU's last tick (4 ms at
/// HZ=250, longer while a vCPU is stopped): the kernel skips other tasks' pending time. For processes
/// that switch every few µs (a ping-pong pair) that is exact enough; a busy child reads its own clock
/// (BusyChild::cpu_ns()).
[[nodiscard]] uint64_t process_cpu_ns(pid_t pid);

/// A sample taken between two reads of a busy child's CPU clock: the sample's boundary lies between
/// them, so the scheduler's count over an interval is bracketed exactly even on a loaded machine.
struct Bracketed {
    SourceSample sample;
    uint64_t before_ns = 0;
    uint64_t after_ns = 0;
};
Bracketed sample_bracketed(ProcessSource& source, const BusyChild& child);

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
