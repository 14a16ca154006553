#include "workloads/kube_metadata.hpp"

#include <signal.h>

#include <cstdlib>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "support/log/log.hpp"
#include "common/text_io.hpp"
#include "keplershm.h"
#include "support/http/http_client.hpp"

namespace kepler::collect {

namespace {

constexpr size_t kMaxField = 512;  // longer than any Kubernetes name; longer values are skipped

std::string text_field(const nlohmann::json& object, const char* key) {
    const auto it = object.find(key);
    if (it == object.end() || !it->is_string()) return {};
    const auto& s = it->get_ref<const std::string&>();
    return s.size() <= kMaxField ? s : std::string();
}

void add_statuses(const nlohmann::json& status, const char* key, const ContainerMeta& pod, PodIndex& index) {
    const auto list = status.find(key);
    if (list == status.end() || !list->is_array()) return;
    for (const auto& c : *list) {
        if (!c.is_object()) continue;
        auto [runtime, id] = split_container_id(text_field(c, "containerID"));
        if (id.empty()) continue;  // not started yet
        ContainerMeta meta = pod;
        meta.container_name = text_field(c, "name");
        meta.runtime = runtime;
        index.by_container_id[id] = std::move(meta);
    }
}

}  // namespace

std::pair<uint32_t, std::string> split_container_id(std::string_view uri) {
    const size_t sep = uri.find("://");
    if (sep == std::string_view::npos) return {KEPLERSHM_RUNTIME_UNKNOWN, std::string(uri)};
    const std::string_view scheme = uri.substr(0, sep);
    uint32_t runtime = KEPLERSHM_RUNTIME_UNKNOWN;
    if (scheme == "containerd") runtime = KEPLERSHM_RUNTIME_CONTAINERD;
    if (scheme == "cri-o") runtime = KEPLERSHM_RUNTIME_CRIO;
    if (scheme == "docker") runtime = KEPLERSHM_RUNTIME_DOCKER;
    if (scheme == "podman") runtime = KEPLERSHM_RUNTIME_PODMAN;
    return {runtime, std::string(uri.substr(sep + 3))};
}

std::string parse_pod_list(std::string_view json, PodIndex& index) {
    nlohmann::json doc = nlohmann::json::parse(json.begin(), json.end(), nullptr, false);
    if (doc.is_discarded()) throw CollectError(fmt::format("pod list: not valid JSON ({} bytes)", json.size()));
    if (!doc.is_object() || !doc.contains("items") || !doc["items"].is_array()) {
        const std::string kind = doc.is_object() ? text_field(doc, "kind") : std::string();
        const std::string message = doc.is_object() ? text_field(doc, "message") : std::string();
        throw CollectError(fmt::format("pod list: expected a PodList with items, got kind '{}'{}", kind,
                                       message.empty() ? "" : fmt::format(" ({})", message)));
    }
    for (const auto& pod : doc["items"]) {
        if (!pod.is_object()) continue;
        const auto metadata = pod.find("metadata");
        if (metadata == pod.end() || !metadata->is_object()) continue;
        ContainerMeta base;
        base.pod_uid = text_field(*metadata, "uid");
        base.pod_name = text_field(*metadata, "name");
        base.pod_namespace = text_field(*metadata, "namespace");
        if (base.pod_uid.empty() || base.pod_name.empty()) continue;
        index.by_pod_uid[base.pod_uid] = PodMeta{base.pod_name, base.pod_namespace};
        const auto status = pod.find("status");
        if (status == pod.end() || !status->is_object()) continue;
        for (const char* key : {"initContainerStatuses", "containerStatuses", "ephemeralContainerStatuses"}) {
            add_statuses(*status, key, base, index);
        }
    }
    const auto metadata = doc.find("metadata");
    return metadata != doc.end() && metadata->is_object() ? text_field(*metadata, "continue") : std::string();
}

KubeOptions in_cluster_options() {
    KubeOptions o;
    const char* host = std::getenv("KUBERNETES_SERVICE_HOST");
    const char* port = std::getenv("KUBERNETES_SERVICE_PORT");
    if (host == nullptr || *host == '\0') return o;
    const std::string_view h(host);
    o.api_url = fmt::format("https://{}:{}", h.find(':') != std::string_view::npos ? fmt::format("[{}]", h) : std::string(h),
                            port != nullptr && *port != '\0' ? port : "443");
    o.token_file = "/var/run/secrets/kubernetes.io/serviceaccount/token";
    o.ca_file = "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt";
    return o;
}

PodIndex KubeMetadata::fetch(const KubeOptions& options) {
    using support::http_get;
    using support::url_encode;
    support::HttpRequest request;
    request.max_bytes = 64u << 20;  // a page of 500 pods, or a kubelet's whole list, is well below this
    request.ca_file = options.ca_file;
    request.insecure_skip_verify = options.insecure_skip_verify;
    request.timeout_ms = options.timeout_ms;
    if (!options.token_file.empty()) request.bearer_token = std::string(trim(read_text_file_or_throw(options.token_file, 64 * 1024)));

    PodIndex index;
    if (!options.kubelet_url.empty()) {
        request.url = options.kubelet_url + "/pods";
        const support::HttpResponse r = http_get(request);
        if (r.status != 200) throw CollectError(fmt::format("kubelet {}: HTTP {}", request.url, r.status));
        parse_pod_list(r.body, index);
        return index;
    }
    if (options.node_name.empty()) throw CollectError("metadata: the node name is unknown (--node-name)");
    std::string token;
    for (int page = 0; page < 10'000; ++page) {
        request.url = fmt::format("{}/api/v1/pods?fieldSelector={}&limit=500{}", options.api_url,
                                  url_encode("spec.nodeName=" + options.node_name),
                                  token.empty() ? "" : "&continue=" + url_encode(token));
        const support::HttpResponse r = http_get(request);
        if (r.status == 401 || r.status == 403) {
            throw CollectError(fmt::format("API server {}: HTTP {}: the service account needs get/list/watch on pods "
                                           "(see kepler-collect/README.md, RBAC)", request.url, r.status));
        }
        if (r.status != 200) throw CollectError(fmt::format("API server {}: HTTP {}", request.url, r.status));
        token = parse_pod_list(r.body, index);
        if (token.empty()) return index;
    }
    throw CollectError("API server: more than 10000 pages of pods");
}

KubeMetadata::KubeMetadata(KubeOptions options) : options_(std::move(options)) {
    // The worker must not take SIGTERM/SIGINT: the main loop waits for them with sigtimedwait().
    sigset_t block, previous;
    sigemptyset(&block);
    sigaddset(&block, SIGTERM);
    sigaddset(&block, SIGINT);
    pthread_sigmask(SIG_BLOCK, &block, &previous);
    thread_ = std::thread([this] { run(); });
    pthread_sigmask(SIG_SETMASK, &previous, nullptr);
}

KubeMetadata::~KubeMetadata() {
    {
        std::lock_guard lock(mutex_);
        stopping_ = true;
    }
    wake_.notify_all();
    if (thread_.joinable()) thread_.join();
}

std::shared_ptr<const PodIndex> KubeMetadata::snapshot() const {
    std::lock_guard lock(mutex_);
    return index_;
}

void KubeMetadata::request_refresh() {
    {
        std::lock_guard lock(mutex_);
        refresh_requested_ = true;
    }
    wake_.notify_all();
}

uint64_t KubeMetadata::fetches() const {
    std::lock_guard lock(mutex_);
    return fetches_;
}

std::string KubeMetadata::last_error() const {
    std::lock_guard lock(mutex_);
    return last_error_;
}

void KubeMetadata::run() {
    using clock = std::chrono::steady_clock;
    clock::time_point last_fetch{};
    while (true) {
        std::string error;
        std::shared_ptr<const PodIndex> fresh;
        try {
            fresh = std::make_shared<const PodIndex>(fetch(options_));
        } catch (const std::exception& e) {
            error = e.what();
        }
        last_fetch = clock::now();
        std::unique_lock lock(mutex_);
        if (fresh) {
            index_ = std::move(fresh);
            ++fetches_;
            if (!last_error_.empty()) log_info("metadata: fetching pods works again");
            last_error_.clear();
        } else {
            if (error != last_error_) log_warn("metadata: {}", error);  // once per distinct error
            last_error_ = error;
        }
        refresh_requested_ = false;
        // Sleep until the period ends, or until a request after the minimum spacing, or until stop.
        while (!stopping_) {
            const auto now = clock::now();
            const bool due = now - last_fetch >= options_.refresh;
            const bool asked = refresh_requested_ && now - last_fetch >= options_.min_refresh;
            if (due || asked) break;
            const auto until = refresh_requested_ ? last_fetch + options_.min_refresh : last_fetch + options_.refresh;
            wake_.wait_until(lock, until);
        }
        if (stopping_) return;
    }
}

}  // namespace kepler::collect
