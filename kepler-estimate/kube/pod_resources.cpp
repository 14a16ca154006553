#include "kube/pod_resources.hpp"

#include <fmt/format.h>
#include <grpcpp/grpcpp.h>

#include "kubelet/podresources/v1/api.grpc.pb.h"
#include "support/log/log.hpp"

namespace kepler::estimate {

namespace {

// The longest names a frame's workload record holds (keplershm_workload): a longer one can name no
// container of a frame.
constexpr size_t kMaxNamespace = sizeof(keplershm_workload::pod_namespace) - 1;
constexpr size_t kMaxPodName = sizeof(keplershm_workload::pod_name) - 1;
constexpr size_t kMaxContainerName = sizeof(keplershm_workload::container_name) - 1;

}  // namespace

bool is_gpu_resource(std::string_view name) noexcept {
    return name == "nvidia.com/gpu" || name.starts_with("nvidia.com/mig-") || name == "amd.com/gpu" ||
           name == "gpu.intel.com/i915" || name == "gpu.intel.com/xe";
}

struct PodResourcesClient::Channel {
    std::unique_ptr<v1::PodResourcesLister::Stub> stub;
};

PodResourcesClient::PodResourcesClient(PodResourcesOptions options) : options_(std::move(options)), channel_(std::make_unique<Channel>()) {
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(options_.max_response_bytes);
    channel_->stub = v1::PodResourcesLister::NewStub(
        grpc::CreateCustomChannel("unix:" + options_.socket, grpc::InsecureChannelCredentials(), args));
}

PodResourcesClient::~PodResourcesClient() = default;

GpuAllocations PodResourcesClient::list(size_t& dropped) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + options_.timeout);
    v1::ListPodResourcesResponse response;
    const grpc::Status status = channel_->stub->List(&context, v1::ListPodResourcesRequest{}, &response);
    if (!status.ok()) {
        throw PodResourcesError(fmt::format("kubelet pod-resources List on {}: {} (gRPC status {})", options_.socket,
                                            status.error_message(), static_cast<int>(status.error_code())));
    }
    GpuAllocations allocations;
    size_t kept = 0;
    dropped = 0;
    for (const v1::PodResources& pod : response.pod_resources()) {
        for (const v1::ContainerResources& container : pod.containers()) {
            const AllocatedContainer holder{pod.namespace_(), pod.name(), container.name()};
            const bool fits = holder.pod_namespace.size() <= kMaxNamespace && holder.pod_name.size() <= kMaxPodName &&
                              holder.container_name.size() <= kMaxContainerName;
            for (const v1::ContainerDevices& devices : container.devices()) {
                if (!is_gpu_resource(devices.resource_name())) continue;
                for (const std::string& id : devices.device_ids()) {
                    if (!fits || kept >= kMaxAllocatedDevices || id.empty() || id.size() > 256) {
                        ++dropped;
                        continue;
                    }
                    allocations.add(id, holder);
                    ++kept;
                }
            }
        }
    }
    return allocations;
}

PodResourcesWatch::PodResourcesWatch(PodResourcesOptions options)
    : options_(options), client_(std::move(options)), current_(std::make_shared<GpuAllocations>()), thread_([this] { run(); }) {}

PodResourcesWatch::~PodResourcesWatch() {
    {
        std::lock_guard lock(mutex_);
        stop_ = true;
    }
    wake_.notify_all();
    thread_.join();
}

std::shared_ptr<const GpuAllocations> PodResourcesWatch::current() const {
    std::lock_guard lock(mutex_);
    return current_;
}

void PodResourcesWatch::run() {
    std::string last_error;
    std::unique_lock lock(mutex_);
    while (!stop_) {
        lock.unlock();
        refresh(last_error);
        lock.lock();
        wake_.wait_for(lock, options_.refresh, [this] { return stop_; });
    }
}

void PodResourcesWatch::expire_if_old() {
    if (answers_.load(std::memory_order_relaxed) == 0 || std::chrono::steady_clock::now() - last_answer_at_ < options_.expiry) return;
    std::lock_guard lock(mutex_);
    if (current_->by_device.empty()) return;  // dropped already, or nothing was allocated
    log_warn("kubelet pod-resources on {}: no answer for {} s: the last GPU allocations are dropped until it answers "
             "(GPUs are matched to pods by their processes only)", options_.socket, options_.expiry.count() / 1000.0);
    current_ = std::make_shared<const GpuAllocations>();
}

void PodResourcesWatch::refresh(std::string& last_error) {
    size_t dropped = 0;
    std::shared_ptr<const GpuAllocations> answer;
    try {
        answer = std::make_shared<const GpuAllocations>(client_.list(dropped));
    } catch (const PodResourcesError& e) {
        failures_.fetch_add(1, std::memory_order_relaxed);
        if (e.what() != last_error) log_warn("{}: GPU allocations kept as last read, for {} s after it", e.what(), options_.expiry.count() / 1000.0);
        last_error = e.what();
        expire_if_old();
        return;
    }
    last_answer_at_ = std::chrono::steady_clock::now();
    const bool first = answers_.fetch_add(1, std::memory_order_relaxed) == 0;
    if (first || !last_error.empty()) {
        log_info("kubelet pod-resources on {}: {} GPU device(s) allocated to containers", options_.socket, answer->by_device.size());
    }
    if (dropped > 0 && (first || !last_error.empty())) {
        log_warn("kubelet pod-resources: {} GPU allocation(s) left out (over {} in all, or a name longer than a frame holds)",
                 dropped, kMaxAllocatedDevices);
    }
    last_error.clear();
    std::lock_guard lock(mutex_);
    current_ = std::move(answer);
}

}  // namespace kepler::estimate
