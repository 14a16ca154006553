// What every benchmarked consumer does with a process record: read every field once.
#pragma once

#include <cstdint>

#include "keplershm.h"

namespace bench {

inline uint64_t read_fields(const keplershm_process& p) {
    uint64_t sum = p.pid + p.tgid + p.start_time_ticks + p.cgroup_id + p.workload_index + p.flags +
                   static_cast<uint8_t>(p.comm[0]) + p.cpu_time_ns + p.cycles + p.instructions + p.cache_misses +
                   p.page_cache_hits + p.page_cache_misses;
    for (uint64_t v : p.softirq) sum += v;
    return sum;
}

}  // namespace bench
