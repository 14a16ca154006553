// GET /metrics over HTTP (civetweb, the server prometheus-cpp embeds): each scrape renders a fresh
// Exposition and writes its blocks straight to the connection, gzip-compressed when the scraper
// accepts it (Prometheus does). Nothing else is served: any other path is 404.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "export/exposition.hpp"

class CivetServer;

namespace kepler::estimate {

/// How many clients the listener serves at once and how long one may take to send its request. Every
/// connection holds a worker until its request is whole, so these two bound what idle or slow clients
/// (slow-loris) can take from the scraper: at most `workers` at a time, each for at most the timeout.
struct ListenerLimits {
    int workers = 16;
    std::chrono::milliseconds request_timeout{5000};
};

/// Thread-safe: civetweb's worker threads call `render` concurrently, one call per scrape.
class MetricsServer {
public:
    using Render = std::function<Exposition()>;
    /// Listens on `listen` ("ADDR:PORT"; port 0 asks the kernel for a free one). Throws
    /// std::runtime_error naming the address when it cannot (bad address, port in use).
    MetricsServer(const std::string& listen, Render render, const ListenerLimits& limits = {});
    ~MetricsServer();
    MetricsServer(const MetricsServer&) = delete;
    MetricsServer& operator=(const MetricsServer&) = delete;

    /// "ADDR:PORT" as bound: the port the kernel chose when `listen` asked for port 0.
    [[nodiscard]] std::string bound_address() const;

private:
    class Handler;
    std::string listen_;
    std::unique_ptr<Handler> handler_;
    std::unique_ptr<CivetServer> server_;
};

/// True when an Accept-Encoding header value accepts gzip (a `gzip` coding without q=0).
[[nodiscard]] bool accepts_gzip(std::string_view accept_encoding);

}  // namespace kepler::estimate
