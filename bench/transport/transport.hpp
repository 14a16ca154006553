// Transport comparison: the same per-process content moved from a writer process to a reader process by
// (a) libkeplershm in place, (b) libkeplershm copy-out, (c) Prometheus (prometheus-cpp exposer → HTTP →
// text parse), (d) length-prefixed JSON over a unix stream socket (RapidJSON → simdjson), and (e) the
// floor: memcpy and a plain read in one process. Every path ends with the consumer having read every
// field of every record once.
#pragma once

#include <cstdint>
#include <ctime>
#include <string>
#include <vector>

#include "keplershm.h"
#include "read_fields.hpp"

namespace transport {

/// The content of one interval: identity plus the eight counters every path carries.
std::vector<keplershm_process> make_content(size_t processes, uint64_t interval);

using bench::read_fields;

inline uint64_t clock_ns(clockid_t clock) {
    timespec ts{};
    clock_gettime(clock, &ts);
    return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

/// One interval moved end to end, in microseconds.
struct Sample {
    double writer_us;      // writer: from "has the data" until it has handed it over
    double reader_us;      // reader: from waking up until every field was read
    double end_to_end_us;  // from "writer has the data" until "reader has read every field"
    double cpu_us;         // CPU time of both processes for this interval (includes server threads)
};

struct Result {
    std::string method;
    size_t processes;
    std::vector<Sample> samples;
};

/// Each method runs `iterations` intervals (fewer if it exceeds `budget_s` seconds).
Result run_shm(size_t processes, int iterations, double budget_s, bool copy_out);
Result run_json_socket(size_t processes, int iterations, double budget_s);
Result run_prometheus(size_t processes, int iterations, double budget_s);
Result run_floor(size_t processes, int iterations, double budget_s);

}  // namespace transport
