// Which containers the kubelet allocated each GPU device to (kube/ reads them from the kubelet's
// pod-resources API): the attribution gives a device's energy that its listed users do not explain to the
// containers that hold it (MODELS.md "GPUs").
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "keplershm.h"

namespace kepler::estimate {

/// A container, as the kubelet names it.
struct AllocatedContainer {
    std::string pod_namespace;
    std::string pod_name;
    std::string container_name;
    friend bool operator==(const AllocatedContainer&, const AllocatedContainer&) = default;
    friend auto operator<=>(const AllocatedContainer&, const AllocatedContainer&) = default;
};

/// Device id (normalised: see normalise_device_id) → the containers holding it, each once, in order. Plain value.
struct GpuAllocations {
    std::map<std::string, std::vector<AllocatedContainer>, std::less<>> by_device;

    /// Records that `container` holds `device_id` (a device plugin's id, as the kubelet reports it).
    void add(std::string_view device_id, const AllocatedContainer& container);
    /// The containers holding a frame's device record, by its UUID, its PCI bus id, or for a DRM card
    /// ("card<N>", Intel's plugin) its card number; null when none.
    [[nodiscard]] const std::vector<AllocatedContainer>* holders(const keplershm_gpu_device& device) const;
    [[nodiscard]] bool empty() const noexcept { return by_device.empty(); }
};

/// A device plugin's device id as a key: lower case, without a time-slicing replica suffix ("::<n>", which
/// NVIDIA's plugin appends when one GPU is shared by several containers) and, for a DRM card, without
/// Intel's per-card share suffix ("card0-1" → "card0").
[[nodiscard]] std::string normalise_device_id(std::string_view id);

}  // namespace kepler::estimate
