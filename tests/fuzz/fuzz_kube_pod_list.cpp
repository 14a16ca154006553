// libFuzzer: the PodList documents of the API server and the kubelet's /pods
// (kepler-collect/workloads/kube_metadata.cpp, parse_pod_list), and the container-id URIs in them. Any
// bytes: an index of pods with non-empty uid and name, containers with non-empty ids, every text within
// the field cap, and a continue token within it, or CollectError. Another exception type escaping
// (nlohmann's own), a crash or a hang is a finding.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/text_io.hpp"
#include "workloads/kube_metadata.hpp"

namespace {

using namespace kepler::collect;

void require(bool holds) {
    if (!holds) __builtin_trap();
}

bool capped(const std::string& text) { return text.size() <= 512; }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    const auto [runtime, id] = split_container_id(text);
    require(id.size() <= text.size());
    PodIndex index;
    std::string token;
    try {
        token = parse_pod_list(text, index);
    } catch (const CollectError&) {
        return 0;  // refused: the documented outcome for a bad document
    }
    require(capped(token));
    for (const auto& [uid, pod] : index.by_pod_uid) {
        require(!uid.empty() && capped(uid) && !pod.name.empty() && capped(pod.name) && capped(pod.namespace_));
    }
    for (const auto& [container_id, meta] : index.by_container_id) {
        require(!container_id.empty() && capped(container_id));
        require(index.by_pod_uid.count(meta.pod_uid) == 1);
        require(capped(meta.container_name) && capped(meta.pod_name) && capped(meta.pod_namespace));
    }
    return 0;
}
