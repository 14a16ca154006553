// Whole-process overhead of kepler-estimate: a writer publishes frames of N processes (default 1000,
// in 100 containers) at 1 Hz; the estimator binary reads them and serves /metrics (with
// --process-metrics), scraped every SCRAPE seconds; after the run its CPU time and RSS are read from /proc.
//   estimate_load [seconds=60] [processes=1000] [scrape=15] [gzip=0] [estimator binary]
#include <fmt/format.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>

#include "keplershm/keplershm.hpp"

namespace {

uint64_t now_ns() {
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

/// The child's CPU time over all its threads, from wait4()'s rusage: the kernel scales it to the
/// scheduler's nanosecond run time (microseconds here), where /proc/<pid>/stat's 10 ms ticks were
/// +-4 % of a 60 s run's 0.25 s. Includes the estimator's exit after SIGTERM (freeing its heap).
double reap_cpu_seconds(pid_t pid) {
    rusage usage{};
    if (wait4(pid, nullptr, 0, &usage) != pid) return -1;
    const auto seconds = [](const timeval& t) { return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6; };
    return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

long rss_kib(pid_t pid) {
    std::ifstream status("/proc/" + std::to_string(pid) + "/status");
    std::string line;
    while (std::getline(status, line)) {
        if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
    }
    return -1;
}

}  // namespace

int main(int argc, char** argv) {
    const int seconds = argc > 1 ? std::atoi(argv[1]) : 60;
    const uint32_t processes = argc > 2 ? static_cast<uint32_t>(std::atoi(argv[2])) : 1000;
    const int scrape_period = argc > 3 ? std::max(1, std::atoi(argv[3])) : 15;
    const bool gzip = argc > 4 && std::atoi(argv[4]) != 0;       // scrape as Prometheus does: Accept-Encoding gzip
    const char* binary = argc > 5 ? argv[5] : ESTIMATE_BINARY;  // another build's, to compare side by side
    const uint32_t containers = 100;
    const std::string name = fmt::format("kepest-load-{}", getpid());
    keplershm::WriterOptions o;
    o.process_capacity = processes;
    o.workload_capacity = containers;
    o.metric_mask = KEPLERSHM_METRIC_CPU_TIME | KEPLERSHM_METRIC_NODE_CPU;
    o.cpu_model = "Load CPU";
    keplershm::Writer writer(name, o);
    const int port = 19000 + getpid() % 1000;

    const pid_t estimator = fork();
    if (estimator == 0) {
        const std::string listen = fmt::format("127.0.0.1:{}", port);
        execl(binary, binary, "--shm-name", name.c_str(), "--listen", listen.c_str(), "--process-metrics",
              static_cast<char*>(nullptr));
        _exit(127);
    }
    uint64_t last = now_ns();
    for (int s = 0; s < seconds; ++s) {
        std::this_thread::sleep_for(std::chrono::seconds(1));
        keplershm::Draft d = writer.begin();
        const uint64_t t = now_ns();
        d.frame().interval_start_ns = last;
        d.frame().interval_end_ns = t;
        d.frame().metric_mask = o.metric_mask;
        last = t;
        for (uint32_t c = 0; c < containers; ++c) {
            keplershm_workload w{};
            w.kind = KEPLERSHM_WORKLOAD_POD;
            keplershm::set_text(w.container_id, fmt::format("{:064x}", c + 1));
            keplershm::set_text(w.pod_name, fmt::format("pod-{}", c));
            keplershm::set_text(w.pod_namespace, "load");
            d.add_workload(w);
        }
        for (uint32_t i = 0; i < processes; ++i) {
            keplershm_process p{};
            p.pid = i + 1;
            p.start_time_ticks = 1;
            p.cpu_time_ns = (i * 7919ull + static_cast<uint64_t>(s) * 104729ull) % 10'000'000ull;
            p.workload_index = i % containers;
            d.add_process(p);
        }
        writer.commit(d);
        if (s % scrape_period == scrape_period - 1) {
            std::system(fmt::format("curl -s {}-o /dev/null http://127.0.0.1:{}/metrics", gzip ? "--compressed " : "", port).c_str());
        }
    }
    const long rss = rss_kib(estimator);
    kill(estimator, SIGTERM);
    const double cpu = reap_cpu_seconds(estimator);
    fmt::print("{} processes at 1 Hz, a scrape every {} s{}, for {} s: estimator CPU {:.3f} s = {:.3f}% of a core, RSS {:.1f} MiB\n",
               processes, scrape_period, gzip ? " (gzip)" : "", seconds, cpu, 100.0 * cpu / seconds, static_cast<double>(rss) / 1024);
    return 0;
}
