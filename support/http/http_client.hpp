// http_client.hpp — the one HTTP(S) client of the daemons (libcurl): the collector's Kubernetes API
// server and kubelet, the estimator's model server. Bounded and strict by default: a response larger
// than max_bytes is an error, never a truncated document; redirects are not followed unless asked, and
// then an https URL is never redirected to plain http.
#pragma once

#include <cstddef>
#include <map>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kepler::support {

/// A transport failure (connect, TLS, timeout, oversize body, refused redirect), with the URL.
class HttpError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

struct HttpRequest {
    std::string url;                 // http:// or https:// only
    std::string method = "GET";      // GET, POST or DELETE
    std::string body;                // sent with POST
    std::string content_type = "application/json";  // of the body
    std::string bearer_token;        // "Authorization: Bearer <token>" when not empty
    std::string basic_user;          // HTTP Basic authentication when not empty
    std::string basic_password;
    std::vector<std::pair<std::string, std::string>> headers;  // more request headers (e.g. X-Auth-Token)
    std::string accept = "application/json";
    std::string ca_file;             // PEM bundle to verify the server with; empty: the system store
    bool insecure_skip_verify = false;  // lab servers only: the caller says so loudly
    int max_redirects = 0;           // 0: a 3xx is returned as it is
    long connect_timeout_ms = 5'000;
    long timeout_ms = 10'000;        // the whole exchange
    size_t max_bytes = 16u << 20;    // the body, after decompression
};

struct HttpResponse {
    long status = 0;
    std::string body;
    std::map<std::string, std::string> headers;  // names lower-cased; the final response's only, bounded
};

/// Sends the request. Throws HttpError on transport errors and oversize bodies; HTTP error statuses are
/// returned, not thrown. Thread-safe (one curl handle per call; libcurl's global state is set up once).
[[nodiscard]] HttpResponse http_request(const HttpRequest& request);
/// Requests on one kept-open connection (HTTP/1.1 keep-alive, TLS session reuse): for a client that
/// asks the same server often, where a new TLS connection per request would cost more CPU than the
/// request (OpenSSL 3 builds a context per connection). Not thread-safe: one thread at a time.
class HttpConnection {
public:
    HttpConnection();
    HttpConnection(const HttpConnection&) = delete;
    HttpConnection& operator=(const HttpConnection&) = delete;
    ~HttpConnection();
    /// As http_request(), on this connection (reconnecting when the server closed it).
    [[nodiscard]] HttpResponse request(const HttpRequest& request);

private:
    void* handle_ = nullptr;  // CURL*
};

/// http_request with the method forced to GET.
[[nodiscard]] HttpResponse http_get(const HttpRequest& request);

/// Percent-encodes a query parameter value (RFC 3986 unreserved characters kept).
[[nodiscard]] std::string url_encode(std::string_view text);

/// True for an https:// URL (scheme compared without regard to case).
[[nodiscard]] bool is_https(std::string_view url) noexcept;

}  // namespace kepler::support
