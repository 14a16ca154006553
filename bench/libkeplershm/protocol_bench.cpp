// Costs of the protocol against the floor of moving the same bytes in one process. Each pair of
// benchmarks below runs on identical record arrays; bench/run.py turns them into ratios.
//   publish    vs memcpy of the records into a buffer of the slot's size
//   acquire+validate (should be flat in the frame size)
//   copy-out   vs memcpy of the same bytes
//   read every field in place + validate vs reading every field of a private array
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <cstring>
#include <vector>

#include "keplershm/keplershm.hpp"
#include "read_fields.hpp"

namespace {

using namespace keplershm;

std::string bench_name(const char* tag) { return std::string("kshm-bench-") + tag + "-" + std::to_string(getpid()); }

std::vector<keplershm_process> make_records(size_t n) {
    std::vector<keplershm_process> records(n);
    for (size_t i = 0; i < n; ++i) {
        records[i].pid = records[i].tgid = static_cast<uint32_t>(1000 + i);
        records[i].start_time_ticks = 42 + i;
        records[i].cpu_time_ns = 1'000'000 + i;
        records[i].workload_index = KEPLERSHM_NO_WORKLOAD;
        std::memcpy(records[i].comm, "bench-process", 14);
    }
    return records;
}

WriterOptions options_for(size_t n) {
    WriterOptions o;
    o.slot_count = 4;
    o.process_capacity = static_cast<uint32_t>(n);
    o.workload_capacity = 1;
    o.max_segment_bytes = 1ull << 30;
    return o;
}

using bench::read_fields;

void BM_Publish(benchmark::State& state) {
    const size_t n = static_cast<size_t>(state.range(0));
    const auto records = make_records(n);
    const std::string name = bench_name("publish");
    Writer writer(name, options_for(n));
    for (auto _ : state) {
        Draft draft = writer.begin();
        std::memcpy(draft.raw().processes, records.data(), n * sizeof(keplershm_process));
        draft.raw().process_count = static_cast<uint32_t>(n);
        writer.commit(draft);
    }
    state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * n * sizeof(keplershm_process)));
}

void BM_PublishBaselineMemcpy(benchmark::State& state) {
    const size_t n = static_cast<size_t>(state.range(0));
    const auto records = make_records(n);
    // Four buffers, like the ring's four slots, so caches see the same footprint.
    std::vector<std::vector<keplershm_process>> slots(4, std::vector<keplershm_process>(n));
    size_t i = 0;
    for (auto _ : state) {
        std::memcpy(slots[i++ % 4].data(), records.data(), n * sizeof(keplershm_process));
        benchmark::ClobberMemory();
    }
    state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * n * sizeof(keplershm_process)));
}

struct Published {
    explicit Published(size_t n, const char* tag) : name(bench_name(tag)), writer(name, options_for(n)) {
        const auto records = make_records(n);
        Draft draft = writer.begin();
        std::memcpy(draft.raw().processes, records.data(), n * sizeof(keplershm_process));
        draft.raw().process_count = static_cast<uint32_t>(n);
        writer.commit(draft);
    }
    std::string name;
    Writer writer;
};

void BM_AcquireValidate(benchmark::State& state) {
    Published segment(static_cast<size_t>(state.range(0)), "acquire");
    Reader reader = Reader::open(segment.name);
    FrameView view;
    for (auto _ : state) {
        if (reader.acquire(1, view) != Status::ok || !reader.validate(view)) state.SkipWithError("lapped");
        benchmark::DoNotOptimize(view.raw().sections[0].count);
    }
}

void BM_CopyOut(benchmark::State& state) {
    const size_t n = static_cast<size_t>(state.range(0));
    Published segment(n, "copy");
    Reader reader = Reader::open(segment.name);
    FrameView view;
    for (auto _ : state) {
        if (reader.copy(1, view) != Status::ok) state.SkipWithError("lapped");
        benchmark::DoNotOptimize(view.raw().base);
    }
    state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * n * sizeof(keplershm_process)));
}

void BM_CopyOutBaselineMemcpy(benchmark::State& state) {
    const size_t n = static_cast<size_t>(state.range(0));
    const auto records = make_records(n);
    std::vector<keplershm_process> copy(n);
    for (auto _ : state) {
        std::memcpy(copy.data(), records.data(), n * sizeof(keplershm_process));
        benchmark::ClobberMemory();
    }
    state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * n * sizeof(keplershm_process)));
}

void BM_ReadInPlace(benchmark::State& state) {
    Published segment(static_cast<size_t>(state.range(0)), "inplace");
    Reader reader = Reader::open(segment.name);
    FrameView view;
    for (auto _ : state) {
        if (reader.acquire(1, view) != Status::ok) state.SkipWithError("lapped");
        uint64_t sum = 0;
        for (const keplershm_process& p : view.processes()) sum += read_fields(p);
        if (!reader.validate(view)) state.SkipWithError("lapped");
        benchmark::DoNotOptimize(sum);
    }
}

void BM_ReadBaselinePlain(benchmark::State& state) {
    const auto records = make_records(static_cast<size_t>(state.range(0)));
    for (auto _ : state) {
        uint64_t sum = 0;
        for (const keplershm_process& p : records) sum += read_fields(p);
        benchmark::DoNotOptimize(sum);
    }
}

constexpr int64_t kSizes[] = {100, 1000, 10000};

void sizes(benchmark::internal::Benchmark* b) {
    for (int64_t n : kSizes) b->Arg(n);
}

BENCHMARK(BM_Publish)->Apply(sizes);
BENCHMARK(BM_PublishBaselineMemcpy)->Apply(sizes);
BENCHMARK(BM_AcquireValidate)->Apply(sizes);
BENCHMARK(BM_CopyOut)->Apply(sizes);
BENCHMARK(BM_CopyOutBaselineMemcpy)->Apply(sizes);
BENCHMARK(BM_ReadInPlace)->Apply(sizes);
BENCHMARK(BM_ReadBaselinePlain)->Apply(sizes);

}  // namespace

BENCHMARK_MAIN();
