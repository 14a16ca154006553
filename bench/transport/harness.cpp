#include "harness.hpp"

#include <csignal>
#include <cstdio>
#include <stdexcept>

namespace transport {

std::vector<keplershm_process> make_content(size_t processes, uint64_t interval) {
    std::vector<keplershm_process> records(processes);
    for (size_t i = 0; i < processes; ++i) {
        keplershm_process& p = records[i];
        p.pid = p.tgid = static_cast<uint32_t>(1000 + i);
        p.start_time_ticks = 500'000 + i;
        p.cgroup_id = 4000 + i % 64;
        p.workload_index = KEPLERSHM_NO_WORKLOAD;
        std::snprintf(p.comm, sizeof p.comm, "worker-%zu", i % 1000);
        p.cpu_time_ns = 1'000'000 * (interval + 1) + i;
        p.cycles = 3'000'000 * (interval + 1) + i;
        p.instructions = 2'000'000 * (interval + 1) + i;
        p.cache_misses = 10'000 * (interval + 1) + i;
        p.page_cache_hits = 100 * (interval + 1) + i;
        p.softirq[2] = interval + i;
        p.softirq[3] = 2 * interval + i;
        p.softirq[4] = 3 * interval + i;
    }
    return records;
}

void Channel::ready() const {
    const char go = 1;
    if (write(ready_fd, &go, 1) != 1) _exit(1);
}

void Channel::report(const ReaderReport& r) const {
    if (write(report_fd, &r, sizeof r) != sizeof r) _exit(1);
}

Result run_two_processes(const std::string& method, size_t processes, int iterations, double budget_s,
                         const std::function<void(int)>& writer_step, const std::function<void()>& after_publish,
                         const std::function<void(int, const Channel&)>& reader_loop) {
    int reports[2];
    int ready[2];
    if (pipe(reports) != 0 || pipe(ready) != 0) throw std::runtime_error("pipe");
    const pid_t child = fork();
    if (child == 0) {
        reader_loop(iterations, Channel{ready[1], reports[1]});
        _exit(0);
    }
    // Only the child writes these: with our copies closed, a dead child reads as end of file, not a hang.
    close(reports[1]);
    close(ready[1]);
    Result result{method, processes, {}};
    const uint64_t start = clock_ns(CLOCK_MONOTONIC);
    for (int i = 0; i < iterations; ++i) {
        char go = 0;
        if (read(ready[0], &go, 1) != 1) break;
        usleep(200);  // the reader is blocked in its wait by now
        const uint64_t cpu0 = clock_ns(CLOCK_PROCESS_CPUTIME_ID);
        const uint64_t t0 = clock_ns(CLOCK_MONOTONIC);
        writer_step(i);
        const uint64_t t1 = clock_ns(CLOCK_MONOTONIC);
        after_publish();
        ReaderReport r{};
        if (read(reports[0], &r, sizeof r) != sizeof r) break;
        const uint64_t cpu1 = clock_ns(CLOCK_PROCESS_CPUTIME_ID);  // includes exposer threads serving a scrape
        result.samples.push_back(Sample{(t1 - t0) / 1e3, (r.done_ns - r.started_ns) / 1e3, (r.done_ns - t0) / 1e3,
                                        (cpu1 - cpu0 + r.cpu_ns) / 1e3});
        if ((clock_ns(CLOCK_MONOTONIC) - start) / 1e9 > budget_s && result.samples.size() >= 3) break;
    }
    kill(child, SIGTERM);
    int status = 0;
    waitpid(child, &status, 0);
    close(reports[0]);
    close(ready[0]);
    if (result.samples.empty()) {
        throw std::runtime_error(method + ": the reader process failed (status " + std::to_string(status) + ")");
    }
    return result;
}

}  // namespace transport
