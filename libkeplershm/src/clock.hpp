// Clocks used by the protocol: CLOCK_MONOTONIC for intervals and heartbeats (shared by all processes of
// a host, unlike pids), CLOCK_REALTIME for wall time.
#pragma once

#include <cstdint>
#include <ctime>

namespace keplershm::detail {

inline uint64_t clock_ns(clockid_t clock) noexcept {
    timespec ts{};
    clock_gettime(clock, &ts);
    return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}
inline uint64_t monotonic_ns() noexcept { return clock_ns(CLOCK_MONOTONIC); }
inline uint64_t realtime_ns() noexcept { return clock_ns(CLOCK_REALTIME); }

}  // namespace keplershm::detail
