// Step 2 of the estimator: node energy of each zone split over the frame's processes, exactly.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "keplershm/keplershm.hpp"
#include "core/gpu_allocations.hpp"
#include "core/node_energy.hpp"

namespace kepler::estimate {

/// Who gets idle energy: `cpu_share` (default: by CPU time, like dynamic energy), `even` (Kepler 0.7:
/// the same for every process) or `none` (Kepler >= 0.10: idle stays on the node).
enum class IdlePolicy { cpu_share, even, none };
[[nodiscard]] std::optional<IdlePolicy> idle_policy_from_string(std::string_view text) noexcept;
[[nodiscard]] std::string_view to_string(IdlePolicy policy) noexcept;

/// One zone's energy, split. Per zone: sum(dynamic_uj) + unaccounted_dynamic_uj + kernel_dynamic_uj ==
/// dynamic energy and sum(idle_uj) + unaccounted_idle_uj + kernel_idle_uj + node_idle_uj == idle energy,
/// exactly. The kernel parts are the share of the node's busy time that no task's clock covers
/// (interrupts, softirqs, steal, switching: the CPU samples' irq, softirq and steal time); the
/// unaccounted parts what is left of the unaccounted record (processes left out or lost). Plain value.
struct ZoneShares {
    ZoneEnergy node;
    std::vector<uint64_t> dynamic_uj;  // per process record, in frame order
    std::vector<uint64_t> idle_uj;
    uint64_t unaccounted_dynamic_uj = 0;
    uint64_t unaccounted_idle_uj = 0;
    uint64_t kernel_dynamic_uj = 0;
    uint64_t kernel_idle_uj = 0;
    uint64_t node_idle_uj = 0;  // idle energy kept on the node (policy none)
    bool by_cache_misses = false;
};

/// The split of one frame. Reused across frames to keep its buffers. Not thread-safe.
struct Attribution {
    std::vector<ZoneShares> zones;
    uint64_t kernel_cpu_ns = 0;  // the frame's kernel_cpu_time_ns(), the weight of the kernel parts
};

/// Splits `energy` in proportion to `weights` (plus the unaccounted record's weight) in integers:
/// each part is floor(energy * w / sum); the few microjoules of rounding go to the heaviest holder.
/// With no weight at all, everything goes to the unaccounted record. Exactly conserving.
void split_energy(uint64_t energy, std::span<const uint64_t> weights, uint64_t unaccounted_weight,
                  std::span<uint64_t> parts, uint64_t& unaccounted_part);

/// The part of the frame's unaccounted CPU time that is kernel time (interrupts, softirqs, steal,
/// switching): its CPU samples' irq + softirq + steal ns, at most the unaccounted record's remainder
/// after the processes left out for capacity.
[[nodiscard]] uint64_t kernel_cpu_time_ns(const keplershm::FrameView& frame) noexcept;

/// Attributes each zone of `node` over `frame`'s processes: dynamic energy by the zone's usage metric
/// (CPU time; cache misses for DRAM when the frame has them; for a GPU, its users' busy time from the
/// frame's GPU_USAGE, or equal shares of its users when none was sampled busy, and nobody's when the frame
/// names no user), idle energy by `policy` (cpu-share weighs a GPU's idle by GPU use as well). A GPU's
/// energy that no process record of a user explains goes to the processes of the containers
/// `allocations` names as its holders, where any is in the frame (each container the same, within one by
/// CPU time).
void attribute(const keplershm::FrameView& frame, const NodeEnergy& node, IdlePolicy policy, Attribution& out,
               const GpuAllocations* allocations = nullptr);

}  // namespace kepler::estimate
