// Cross-process wake-up latency: the writer stamps CLOCK_MONOTONIC into a frame just before commit; a
// reader process blocked in Reader::wait (futex) stamps the time it runs again. Prints p50/p99/max in µs
// as JSON on stdout. usage: keplershm-bench-wake [samples]
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <vector>

#include "keplershm/keplershm.hpp"

namespace {
uint64_t now_ns() {
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}
}  // namespace

int main(int argc, char** argv) {
    using namespace keplershm;
    const int samples = argc > 1 ? std::atoi(argv[1]) : 2000;
    const std::string name = "kshm-bench-wake-" + std::to_string(getpid());
    WriterOptions options;
    options.process_capacity = 16;
    Writer writer(name, options);
    int to_parent[2];
    int ready[2];
    if (pipe(to_parent) != 0 || pipe(ready) != 0) return 1;
    const pid_t child = fork();
    if (child == 0) {
        Reader reader = Reader::open(name);
        std::vector<uint64_t> latencies;
        uint64_t seen = 0;
        for (int i = 0; i < samples; ++i) {
            const char go = 1;
            (void)write(ready[1], &go, 1);  // blocked in wait() from here on
            if (reader.wait(seen, std::chrono::milliseconds(2000)) != Status::ok) break;
            const uint64_t woke = now_ns();
            seen = reader.latest();
            FrameView view;
            if (reader.acquire(seen, view) != Status::ok) continue;
            latencies.push_back(woke - view.interval_start_ns());
        }
        const size_t n = latencies.size();
        (void)write(to_parent[1], &n, sizeof n);
        (void)write(to_parent[1], latencies.data(), n * sizeof(uint64_t));
        _exit(0);
    }
    for (int i = 0; i < samples; ++i) {
        char go = 0;
        if (read(ready[0], &go, 1) != 1) break;
        usleep(200);  // let the reader reach FUTEX_WAIT
        Draft draft = writer.begin();
        draft.frame().interval_start_ns = now_ns();
        writer.commit(draft);
    }
    size_t n = 0;
    if (read(to_parent[0], &n, sizeof n) != sizeof n) return 1;
    std::vector<uint64_t> latencies(n);
    size_t got = 0;
    while (got < n * sizeof(uint64_t)) {
        const ssize_t r = read(to_parent[0], reinterpret_cast<char*>(latencies.data()) + got, n * sizeof(uint64_t) - got);
        if (r <= 0) break;
        got += static_cast<size_t>(r);
    }
    waitpid(child, nullptr, 0);
    if (latencies.empty()) return 1;
    std::sort(latencies.begin(), latencies.end());
    auto pct = [&](double p) { return latencies[std::min(latencies.size() - 1, static_cast<size_t>(p * latencies.size()))] / 1000.0; };
    std::printf("{\"samples\": %zu, \"p50_us\": %.2f, \"p99_us\": %.2f, \"max_us\": %.2f}\n", latencies.size(), pct(0.5),
                pct(0.99), latencies.back() / 1000.0);
    return 0;
}
