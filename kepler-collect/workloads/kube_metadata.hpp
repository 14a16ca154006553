// kube_metadata.hpp — pod name, namespace and container name for the containers on this node, from
// the API server (pods with fieldSelector spec.nodeName=<node>) or the kubelet's /pods, refreshed in
// a background thread so the collector loop never waits for the network.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>

namespace kepler::collect {

struct ContainerMeta {
    std::string pod_uid;
    std::string pod_name;
    std::string pod_namespace;
    std::string container_name;
    uint32_t runtime = 0;  // enum keplershm_runtime, from the status's "containerd://..." prefix
};

struct PodMeta {
    std::string name;
    std::string namespace_;
};

/// What is known about the pods of this node.
struct PodIndex {
    std::unordered_map<std::string, ContainerMeta> by_container_id;  // id without "docker://" etc.
    std::unordered_map<std::string, PodMeta> by_pod_uid;
};

/// Adds the pods of one PodList document (API server page or kubelet /pods) to `index`; returns the
/// list's metadata.continue token ("" on the last page). Throws CollectError when the text is not
/// JSON or not a PodList; individual odd entries (missing fields, wrong types) are skipped.
std::string parse_pod_list(std::string_view json, PodIndex& index);

/// "containerd://<id>" → {KEPLERSHM_RUNTIME_CONTAINERD, "<id>"}; unknown schemes keep runtime 0.
std::pair<uint32_t, std::string> split_container_id(std::string_view uri);

struct KubeOptions {
    std::string api_url;          // https://host:port of the API server; "" = not used
    std::string kubelet_url;      // https://node:10250 of the kubelet; "" = not used
    std::string token_file;       // bearer token, re-read before each request (tokens rotate)
    std::string ca_file;
    bool insecure_skip_verify = false;
    std::string node_name;
    std::chrono::milliseconds refresh{30'000};
    std::chrono::milliseconds min_refresh{5'000};  // unknown containers ask for refreshes at most this often
    long timeout_ms = 10'000;
};

/// In-cluster defaults: KUBERNETES_SERVICE_HOST/PORT and the service account's token and CA.
/// Returns options with an empty api_url outside a cluster.
KubeOptions in_cluster_options();

/// Owns the refresh thread. snapshot() and request_refresh() are thread-safe.
class KubeMetadata {
public:
    explicit KubeMetadata(KubeOptions options);
    KubeMetadata(const KubeMetadata&) = delete;
    KubeMetadata& operator=(const KubeMetadata&) = delete;
    ~KubeMetadata();

    /// The latest complete index (never a half-fetched one); empty before the first success.
    [[nodiscard]] std::shared_ptr<const PodIndex> snapshot() const;
    /// Asks for a refresh soon (rate limited by min_refresh): called when an unknown container appears.
    void request_refresh();
    /// Successful fetches so far, and the last error ("" after a success).
    [[nodiscard]] uint64_t fetches() const;
    [[nodiscard]] std::string last_error() const;

    /// One fetch, synchronously (the thread's body; tests call it directly).
    [[nodiscard]] static PodIndex fetch(const KubeOptions& options);

private:
    void run();

    KubeOptions options_;
    mutable std::mutex mutex_;
    std::condition_variable wake_;
    std::shared_ptr<const PodIndex> index_;
    std::string last_error_;
    uint64_t fetches_ = 0;
    bool refresh_requested_ = false;
    bool stopping_ = false;
    std::thread thread_;
};

}  // namespace kepler::collect
