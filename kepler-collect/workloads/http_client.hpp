// http_client.hpp — a small blocking HTTP(S) GET over libcurl, for the Kubernetes API server and the
// kubelet. Bounded: a response larger than max_bytes is an error, not a truncated document.
#pragma once

#include <cstddef>
#include <string>

namespace kepler::collect {

struct HttpRequest {
    std::string url;
    std::string bearer_token;        // "Authorization: Bearer <token>" when not empty
    std::string ca_file;             // PEM bundle to verify the server with; empty: system store
    bool insecure_skip_verify = false;
    long timeout_ms = 10'000;
    size_t max_bytes = 64u << 20;    // a node's pod list is well below this even with many pods
};

struct HttpResponse {
    long status = 0;
    std::string body;
};

/// Throws CollectError on transport errors (connect, TLS, timeout) and on oversize bodies; HTTP error
/// statuses are returned, not thrown. Thread-safe (one curl handle per call).
[[nodiscard]] HttpResponse http_get(const HttpRequest& request);

/// Percent-encodes a query parameter value.
[[nodiscard]] std::string url_encode(std::string_view text);

}  // namespace kepler::collect
