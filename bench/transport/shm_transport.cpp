// (a) and (b): libkeplershm. The writer copies the interval's records into the slot and commits; the
// reader, blocked on the futex, reads every field in place and validates, or copies out first.
#include <cstring>

#include "harness.hpp"
#include "keplershm/keplershm.hpp"

namespace transport {

Result run_shm(size_t processes, int iterations, double budget_s, bool copy_out) {
    using namespace keplershm;
    const std::string name = "kshm-bench-transport-" + std::to_string(getpid());
    WriterOptions options;
    options.process_capacity = static_cast<uint32_t>(processes);
    options.max_segment_bytes = 1ull << 30;
    Writer writer(name, options);
    std::vector<std::vector<keplershm_process>> content;
    for (int i = 0; i < 4; ++i) content.push_back(make_content(processes, static_cast<uint64_t>(i)));

    auto writer_step = [&](int i) {
        const auto& records = content[static_cast<size_t>(i) % content.size()];
        Draft draft = writer.begin();
        std::memcpy(draft.raw().processes, records.data(), records.size() * sizeof(keplershm_process));
        draft.raw().process_count = static_cast<uint32_t>(records.size());
        writer.commit(draft);
    };
    auto reader_loop = [&](int n, const Channel& channel) {
        Reader reader = Reader::open(name);
        uint64_t seen = reader.latest();
        volatile uint64_t sink = 0;
        for (int i = 0; i < n; ++i) {
            channel.ready();
            if (reader.wait(seen, std::chrono::milliseconds(10'000)) != Status::ok) return;
            const uint64_t cpu0 = clock_ns(CLOCK_PROCESS_CPUTIME_ID);
            const uint64_t started = clock_ns(CLOCK_MONOTONIC);
            seen = reader.latest();
            FrameView view;
            const Status status = copy_out ? reader.copy(seen, view) : reader.acquire(seen, view);
            if (status != Status::ok) return;
            uint64_t sum = 0;
            for (const keplershm_process& p : view.processes()) sum += read_fields(p);
            if (!copy_out && !reader.validate(view)) return;
            sink = sink + sum;
            const uint64_t done = clock_ns(CLOCK_MONOTONIC);
            channel.report(ReaderReport{started, done, clock_ns(CLOCK_PROCESS_CPUTIME_ID) - cpu0});
        }
    };
    return run_two_processes(copy_out ? "shm_copy_out" : "shm_in_place", processes, iterations, budget_s, writer_step,
                             [] {}, reader_loop);
}

Result run_floor(size_t processes, int iterations, double budget_s) {
    // The same footprint as the other paths: four source intervals, four destinations (like the ring's
    // slots), and the same pause between intervals; only the process boundary is missing.
    std::vector<std::vector<keplershm_process>> content;
    std::vector<std::vector<keplershm_process>> copies(4, std::vector<keplershm_process>(processes));
    for (int i = 0; i < 4; ++i) content.push_back(make_content(processes, static_cast<uint64_t>(i)));
    Result result{"floor_memcpy_read", processes, {}};
    const uint64_t start = clock_ns(CLOCK_MONOTONIC);
    volatile uint64_t sink = 0;
    for (int i = 0; i < iterations; ++i) {
        usleep(200);
        const auto& records = content[static_cast<size_t>(i) % 4];
        auto& copy = copies[static_cast<size_t>(i) % 4];
        const uint64_t cpu0 = clock_ns(CLOCK_PROCESS_CPUTIME_ID);
        const uint64_t t0 = clock_ns(CLOCK_MONOTONIC);
        std::memcpy(copy.data(), records.data(), processes * sizeof(keplershm_process));
        const uint64_t t1 = clock_ns(CLOCK_MONOTONIC);
        uint64_t sum = 0;
        for (const keplershm_process& p : copy) sum += read_fields(p);
        sink = sink + sum;
        const uint64_t t2 = clock_ns(CLOCK_MONOTONIC);
        result.samples.push_back(Sample{(t1 - t0) / 1e3, (t2 - t1) / 1e3, (t2 - t0) / 1e3,
                                        (clock_ns(CLOCK_PROCESS_CPUTIME_ID) - cpu0) / 1e3});
        if ((clock_ns(CLOCK_MONOTONIC) - start) / 1e9 > budget_s && result.samples.size() >= 3) break;
    }
    return result;
}

}  // namespace transport
