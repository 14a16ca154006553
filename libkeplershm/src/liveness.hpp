// A writer's liveness, judged from the progress of its heartbeat on the observer's own clock
// (PROTOCOL.md §1.3). Heartbeat values are compared with earlier values of the same segment only, never
// with the observer's clock: the writer may run in another time namespace, another boot (a restored
// checkpoint) or on another machine (a copied image), where CLOCK_MONOTONIC means something else.
#pragma once

#include <cstdint>
#include <string>

#include "keplershm.h"

namespace keplershm::detail {

/// The heartbeat line of a segment header, read once.
struct HeartbeatSample {
    uint64_t count = 0;         // heartbeat_count (0 from a writer of ABI 1.0)
    uint64_t monotonic_ns = 0;  // heartbeat_ns, in the writer's clock: an opaque token here
    uint64_t realtime_ns = 0;   // heartbeat_realtime_ns (0 from a writer of ABI 1.0)

    /// Progress: either token moved. A 1.0 writer only stores heartbeat_ns, a 1.1 writer both.
    [[nodiscard]] bool differs_from(const HeartbeatSample& earlier) const noexcept {
        return count != earlier.count || monotonic_ns != earlier.monotonic_ns;
    }
};

/// Reads the heartbeat line of a live (mapped, writer-owned) header.
HeartbeatSample read_heartbeat(const keplershm_header& live) noexcept;

/// Readers' default: 3 heartbeat periods + 1 s (the period capped at an hour against hostile headers).
uint64_t default_heartbeat_timeout_ns(uint64_t heartbeat_period_ns) noexcept;

/// A CLOCK_REALTIME value as people read it in logs: "2025-12-03T09:40:01Z" (UTC, whole seconds).
std::string wall_time_text(uint64_t realtime_ns);

/// What one observer has seen of one segment's heartbeat. All times are the observer's CLOCK_MONOTONIC.
class HeartbeatWatch {
public:
    /// Begins watching: nothing has advanced yet, and the stand-still counts from `now_ns`.
    void start(const HeartbeatSample& first, uint64_t now_ns) noexcept;
    /// Takes a new sample: if it moved, the writer was alive between the two looks.
    void observe(const HeartbeatSample& sample, uint64_t now_ns) noexcept;

    /// How long this observer has seen the heartbeat stand still.
    [[nodiscard]] uint64_t still_for_ns(uint64_t now_ns) const noexcept { return now_ns > since_ns_ ? now_ns - since_ns_ : 0; }
    [[nodiscard]] bool stale(uint64_t now_ns, uint64_t timeout_ns) const noexcept { return still_for_ns(now_ns) >= timeout_ns; }
    /// True once the heartbeat moved while watched: the writer is (or was, a moment ago) alive.
    [[nodiscard]] bool advanced() const noexcept { return advanced_; }
    [[nodiscard]] const HeartbeatSample& last() const noexcept { return last_; }

private:
    HeartbeatSample last_;
    uint64_t since_ns_ = 0;  // when the observer first saw last_
    bool advanced_ = false;
};

}  // namespace keplershm::detail
