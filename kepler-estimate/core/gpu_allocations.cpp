#include "core/gpu_allocations.hpp"

#include <algorithm>
#include <cctype>
#include <cstring>

#include <fmt/format.h>

namespace kepler::estimate {

namespace {

std::string lower(std::string_view text) {
    std::string out(text);
    std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return out;
}

std::string_view field(const char* text, size_t size) { return {text, strnlen(text, size)}; }

bool all_digits(std::string_view text) {
    return !text.empty() && std::all_of(text.begin(), text.end(), [](unsigned char c) { return std::isdigit(c) != 0; });
}

/// A PCI address with NVML's eight-digit domain ("00000000:3b:00.0") as the kernel writes it ("0000:3b:00.0").
void shorten_pci_domain(std::string& key) {
    const size_t colon = key.find(':');
    if (colon == 8 && key.starts_with("0000") && key.size() == 16 && key[11] == ':' && key[14] == '.') key.erase(0, 4);
}

}  // namespace

std::string normalise_device_id(std::string_view id) {
    std::string key = lower(id);
    if (const size_t replica = key.find("::"); replica != std::string::npos) key.resize(replica);
    // Intel's GPU plugin: "card<N>-<share>" for the share-th container of card N.
    if (key.starts_with("card")) {
        const size_t dash = key.find('-');
        if (dash != std::string::npos && all_digits(std::string_view(key).substr(4, dash - 4)) &&
            all_digits(std::string_view(key).substr(dash + 1))) {
            key.resize(dash);
        }
    }
    shorten_pci_domain(key);
    return key;
}

void GpuAllocations::add(std::string_view device_id, const AllocatedContainer& container) {
    std::vector<AllocatedContainer>& holders = by_device[normalise_device_id(device_id)];
    if (std::find(holders.begin(), holders.end(), container) == holders.end()) holders.push_back(container);
}

const std::vector<AllocatedContainer>* GpuAllocations::holders(const keplershm_gpu_device& device) const {
    std::vector<std::string> keys;
    if (const std::string_view uuid = field(device.uuid, sizeof device.uuid); !uuid.empty()) keys.push_back(lower(uuid));
    if (const std::string_view bus = field(device.pci_bus_id, sizeof device.pci_bus_id); !bus.empty()) keys.push_back(normalise_device_id(bus));
    if (device.vendor == KEPLERSHM_GPU_AMD || device.vendor == KEPLERSHM_GPU_INTEL) keys.push_back(fmt::format("card{}", device.device_index));
    for (const std::string& key : keys) {
        if (const auto it = by_device.find(key); it != by_device.end()) return &it->second;
    }
    return nullptr;
}

}  // namespace kepler::estimate
