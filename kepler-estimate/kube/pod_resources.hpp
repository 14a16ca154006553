// kube: which container the kubelet allocated each GPU to, from its pod-resources API (gRPC on a unix
// socket, /var/lib/kubelet/pod-resources/kubelet.sock), read on a thread of its own: the pipeline takes the
// latest answer and never waits for the kubelet.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>

#include "core/gpu_allocations.hpp"

namespace kepler::estimate {

struct PodResourcesOptions {
    std::string socket = "/var/lib/kubelet/pod-resources/kubelet.sock";
    std::chrono::milliseconds refresh{10'000};  // between List calls
    std::chrono::milliseconds timeout{5'000};   // of one List call
    // How long the last answer is believed while List calls fail: after it the allocations are dropped
    // (a GPU freed meanwhile would otherwise stay charged to its old holder for ever).
    std::chrono::milliseconds expiry{60'000};
    // A node's answer is tens of kB; a larger one is refused (the kubelet's socket is root's, but its
    // answer is still input: it names every pod of the node).
    int max_response_bytes = 16 << 20;
};

inline constexpr size_t kMaxAllocatedDevices = 65536;  // (device, container) pairs kept of one answer

/// A List call that failed, in one sentence (the socket, the gRPC status).
class PodResourcesError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

/// Whether a device plugin's resource name is a GPU's: nvidia.com/gpu, nvidia.com/mig-<profile> (MIG
/// instances, the plugin's mixed strategy), amd.com/gpu, gpu.intel.com/i915 and gpu.intel.com/xe.
[[nodiscard]] bool is_gpu_resource(std::string_view resource_name) noexcept;

/// The kubelet's pod-resources client: one channel, kept across calls. Thread-compatible.
class PodResourcesClient {
public:
    explicit PodResourcesClient(PodResourcesOptions options);
    ~PodResourcesClient();
    PodResourcesClient(const PodResourcesClient&) = delete;
    PodResourcesClient& operator=(const PodResourcesClient&) = delete;

    /// One List call: the GPU devices and the containers holding them (other resources left out; at most
    /// kMaxAllocatedDevices pairs, `dropped` counts the rest and names longer than a frame holds).
    /// Throws PodResourcesError.
    [[nodiscard]] GpuAllocations list(size_t& dropped);

private:
    struct Channel;
    PodResourcesOptions options_;
    std::unique_ptr<Channel> channel_;
};

/// Calls List every `refresh` on its own thread. Each change of state is logged once: the first answer,
/// a failure (with the kubelet's reason), the answer after a failure, the allocations dropped. A failed
/// call keeps the last answer for `expiry` after it arrived (allocations outlive a kubelet restart), then
/// drops it until the kubelet answers again.
class PodResourcesWatch {
public:
    explicit PodResourcesWatch(PodResourcesOptions options);
    ~PodResourcesWatch();
    PodResourcesWatch(const PodResourcesWatch&) = delete;
    PodResourcesWatch& operator=(const PodResourcesWatch&) = delete;

    /// The latest answer (empty before the first). Any thread.
    [[nodiscard]] std::shared_ptr<const GpuAllocations> current() const;
    /// List calls answered and failed so far. Any thread.
    [[nodiscard]] uint64_t answers() const noexcept { return answers_.load(std::memory_order_relaxed); }
    [[nodiscard]] uint64_t failures() const noexcept { return failures_.load(std::memory_order_relaxed); }

private:
    void run();
    void refresh(std::string& last_error);
    /// Drops the allocations once the last answer is older than `expiry`.
    void expire_if_old();

    PodResourcesOptions options_;
    PodResourcesClient client_;
    mutable std::mutex mutex_;
    std::condition_variable wake_;
    bool stop_ = false;
    std::shared_ptr<const GpuAllocations> current_;
    std::chrono::steady_clock::time_point last_answer_at_{};  // the refresh thread's only
    std::atomic<uint64_t> answers_{0}, failures_{0};
    std::thread thread_;  // last: started once the members it uses exist
};

}  // namespace kepler::estimate
