// The two-process harness shared by the transports: the parent is the writer, a forked child the reader.
// Per interval the child reports (done time, reader start time, its CPU time) over a pipe.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <functional>

#include "transport.hpp"

namespace transport {

struct ReaderReport {
    uint64_t started_ns;  // CLOCK_MONOTONIC when the reader woke with data
    uint64_t done_ns;     // when it had read every field
    uint64_t cpu_ns;      // reader process CPU time for this interval
};

/// The child's side of the harness: ready() right before it blocks waiting for data, report() after.
struct Channel {
    int ready_fd;
    int report_fd;
    void ready() const;
    void report(const ReaderReport& r) const;
};

/// Runs the writer side in this process and `reader_loop` in a child. `writer_step(i)` publishes interval
/// i; `after_publish()` may poke the reader (pull-based paths).
Result run_two_processes(const std::string& method, size_t processes, int iterations, double budget_s,
                         const std::function<void(int)>& writer_step, const std::function<void()>& after_publish,
                         const std::function<void(int iterations, const Channel& channel)>& reader_loop);

}  // namespace transport
