#include "liveness.hpp"

#include <algorithm>
#include <ctime>

#include "seqlock.hpp"

namespace keplershm::detail {

namespace {
constexpr uint64_t kSecondNs = 1'000'000'000ull;
constexpr uint64_t kMaxHeartbeatPeriodNs = 3600 * kSecondNs;
}  // namespace

HeartbeatSample read_heartbeat(const keplershm_header& live) noexcept {
    // SYNC POINT (partner: beat() in writer.cpp). Relaxed: the heartbeat publishes nothing but itself, and
    // only equality with an earlier sample is used; a sample that mixes two beats still differs from
    // the one before them, which is all progress means.
    HeartbeatSample s;
    s.count = atomic_word(live.heartbeat_count).load(std::memory_order_relaxed);
    s.monotonic_ns = atomic_word(live.heartbeat_ns).load(std::memory_order_relaxed);
    s.realtime_ns = atomic_word(live.heartbeat_realtime_ns).load(std::memory_order_relaxed);
    return s;
}

uint64_t default_heartbeat_timeout_ns(uint64_t heartbeat_period_ns) noexcept {
    return 3 * std::min(heartbeat_period_ns, kMaxHeartbeatPeriodNs) + kSecondNs;
}

std::string wall_time_text(uint64_t realtime_ns) {
    const time_t seconds = static_cast<time_t>(realtime_ns / kSecondNs);
    tm utc{};
    char text[32] = "?";
    if (gmtime_r(&seconds, &utc) != nullptr) strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &utc);
    return text;
}

void HeartbeatWatch::start(const HeartbeatSample& first, uint64_t now_ns) noexcept {
    last_ = first;
    since_ns_ = now_ns;
    advanced_ = false;
}

void HeartbeatWatch::observe(const HeartbeatSample& sample, uint64_t now_ns) noexcept {
    if (!sample.differs_from(last_)) return;
    last_ = sample;
    since_ns_ = now_ns;
    advanced_ = true;
}

}  // namespace keplershm::detail
