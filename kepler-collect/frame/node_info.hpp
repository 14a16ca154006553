// node_info.hpp — facts about this node for the segment header, and the collector's own overhead.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace kepler::collect {

/// The CPU model string of /proc/cpuinfo ("model name"; arm64: "Hardware" or implementer/part).
[[nodiscard]] std::string cpu_model_from_cpuinfo(std::string_view cpuinfo);

/// --node-name, else $NODE_NAME (the Downward API's spec.nodeName), else uname's nodename.
[[nodiscard]] std::string node_name(const std::string& flag);

/// Online CPUs.
[[nodiscard]] uint32_t online_cpus() noexcept;

/// This process's CPU time (user + system, all threads) and resident set size.
struct SelfUsage {
    uint64_t cpu_time_ns = 0;
    uint64_t rss_bytes = 0;
};
[[nodiscard]] SelfUsage self_usage(const std::string& proc_root);

}  // namespace kepler::collect
