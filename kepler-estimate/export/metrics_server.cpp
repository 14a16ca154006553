#include "export/metrics_server.hpp"

#include <CivetServer.h>
#include <fmt/format.h>
#include <netdb.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>
#include <zlib.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>
#include <vector>

namespace kepler::estimate {

namespace {

constexpr const char* kContentType = "text/plain; version=0.0.4; charset=utf-8";

std::string_view trim(std::string_view text) {
    while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
    while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
    return text;
}

/// The blocks as one gzip stream. Level 1: the exposition is repetitive text that shrinks ~10x even
/// so, and a scrape every second must stay cheap (bench/kepler-estimate/README.md).
std::string gzip(const std::vector<std::string_view>& blocks) {
    z_stream z{};
    if (deflateInit2(&z, Z_BEST_SPEED, Z_DEFLATED, 15 + 16 /* gzip wrapper */, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
        throw std::runtime_error("zlib: deflateInit2 failed");
    }
    size_t input = 0;
    for (const std::string_view block : blocks) input += block.size();
    std::string out(deflateBound(&z, input), '\0');
    z.next_out = reinterpret_cast<Bytef*>(out.data());
    z.avail_out = static_cast<uInt>(out.size());
    int rc = Z_OK;
    for (size_t i = 0; i <= blocks.size() && rc == Z_OK; ++i) {
        const bool last = i == blocks.size();
        z.next_in = last ? nullptr : reinterpret_cast<Bytef*>(const_cast<char*>(blocks[i].data()));
        z.avail_in = last ? 0 : static_cast<uInt>(blocks[i].size());
        rc = deflate(&z, last ? Z_FINISH : Z_NO_FLUSH);
    }
    out.resize(z.total_out);
    deflateEnd(&z);
    // deflateBound() leaves room for everything, so Z_FINISH completes in one call.
    if (rc != Z_STREAM_END) throw std::runtime_error(fmt::format("zlib: deflate failed ({})", rc));
    return out;
}

// The status line and headers are written here rather than with mg_response_header_*(): civetweb 1.15
// formats their Date header with gmtime(), whose static buffer two workers answering scrapes at once
// share (a data race TSan reports in estimate.metrics_server's concurrent-scrape test).
void send_headers(mg_connection* conn, size_t length, bool gzipped) {
    mg_printf(conn, "HTTP/1.1 200 OK\r\nContent-Type: %s\r\nContent-Length: %zu\r\n%s\r\n", kContentType, length,
              gzipped ? "Content-Encoding: gzip\r\n" : "");
}

void send_error(mg_connection* conn, const std::string& what) {
    const std::string body = "kepler-estimate: cannot render /metrics: " + what + "\n";
    mg_printf(conn, "HTTP/1.1 500 Internal Server Error\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %zu\r\n\r\n",
              body.size());
    mg_write(conn, body.data(), body.size());
}

/// civetweb's own error answers (404 for another path, 408 for a request that timed out, 400 for a bad
/// one) go through its default page, which formats a Date header with gmtime() as well: idle clients
/// timing out together raced on its buffer (TSan, estimate.metrics_server's idle-client test). The
/// answer is written here instead; returning 0 tells civetweb it was sent.
int send_civetweb_error(mg_connection* conn, int status, const char* message) {
    const std::string body = fmt::format("{} {}\n", status, message != nullptr ? message : "");
    mg_printf(conn, "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n",
              status, mg_get_response_code_text(conn, status), body.size());
    mg_write(conn, body.data(), body.size());
    return 0;
}

}  // namespace

bool accepts_gzip(std::string_view accept_encoding) {
    while (!accept_encoding.empty()) {
        const size_t comma = accept_encoding.find(',');
        std::string_view coding = accept_encoding.substr(0, comma);
        accept_encoding.remove_prefix(comma == std::string_view::npos ? accept_encoding.size() : comma + 1);
        const size_t semicolon = coding.find(';');
        const std::string_view name = trim(coding.substr(0, semicolon));
        if (name != "gzip") continue;
        if (semicolon == std::string_view::npos) return true;
        // "gzip;q=0" (any spelling of zero) refuses it.
        const std::string_view parameter = trim(coding.substr(semicolon + 1));
        if (!parameter.starts_with("q=")) return true;
        return parameter.substr(2).find_first_not_of("0.") != std::string_view::npos;
    }
    return false;
}

class MetricsServer::Handler final : public CivetHandler {
public:
    explicit Handler(Render render) : render_(std::move(render)) {}

    bool handleGet(CivetServer* /*server*/, mg_connection* conn) override {
        try {
            const Exposition exposition = render_();
            const std::vector<std::string_view> blocks = exposition.blocks();
            const char* accept = mg_get_header(conn, "Accept-Encoding");
            if (accept != nullptr && accepts_gzip(accept)) {
                const std::string body = gzip(blocks);
                send_headers(conn, body.size(), true);
                mg_write(conn, body.data(), body.size());
                return true;
            }
            size_t length = 0;
            for (const std::string_view block : blocks) length += block.size();
            send_headers(conn, length, false);
            for (const std::string_view block : blocks) mg_write(conn, block.data(), block.size());
        } catch (const std::exception& e) {
            send_error(conn, e.what());
        }
        return true;
    }

private:
    Render render_;
};

MetricsServer::MetricsServer(const std::string& listen, Render render, const ListenerLimits& limits)
    : listen_(listen), handler_(std::make_unique<Handler>(std::move(render))) {
    // civetweb gives each connection a worker until its request is whole: request_timeout_ms bounds how
    // long an idle or slow client keeps one, and enough workers leave the scraper one while some are held.
    const std::vector<std::string> options = {
        "listening_ports", listen,
        "num_threads", std::to_string(limits.workers),
        "request_timeout_ms", std::to_string(limits.request_timeout.count()),
    };
    try {
        CivetCallbacks callbacks;  // copied by civetweb when it starts
        callbacks.http_error = send_civetweb_error;
        server_ = std::make_unique<CivetServer>(options, &callbacks);
    } catch (const CivetException& e) {
        throw std::runtime_error(fmt::format("cannot serve /metrics on {}: {}", listen, e.what()));
    }
    server_->addHandler("/metrics", handler_.get());
}

namespace {

/// Opens a TCP connection to host:port and closes it at once (a bounded attempt: 100 ms).
void knock(const std::string& host, const std::string& port) {
    addrinfo hints{};
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV;
    addrinfo* found = nullptr;
    if (getaddrinfo(host.c_str(), port.c_str(), &hints, &found) != 0) return;
    for (const addrinfo* a = found; a != nullptr; a = a->ai_next) {
        const int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0) continue;
        const timeval limit{0, 100'000};
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &limit, sizeof limit);  // bounds connect() on Linux
        const bool connected = connect(fd, a->ai_addr, a->ai_addrlen) == 0;
        close(fd);
        if (connected) break;
    }
    freeaddrinfo(found);
}

}  // namespace

// close() (civetweb's mg_stop) sets the stop flag and joins the listening thread, which looks at the flag
// only when its poll() returns: in 2 s quanta in civetweb 1.15, so every stop took up to 2 s (a pod's
// termination, every test that starts an estimator). A connection to the port ends the poll at once, so
// a knocker connects until close() returns; a knock that lands before the flag is set is served as an
// empty connection that the knocker has already closed.
MetricsServer::~MetricsServer() {
    if (!server_) return;
    const size_t colon = listen_.rfind(':');
    std::string host = colon == std::string::npos ? "" : listen_.substr(0, colon);
    if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
    if (host.empty() || host == "0.0.0.0") host = "127.0.0.1";
    if (host == "::") host = "::1";
    const std::vector<int> ports = server_->getListeningPorts();
    // SYNC POINT: `closed` is stored after close() returned and read by the knocker between knocks;
    // seq_cst, nothing else is shared.
    std::atomic<bool> closed{false};
    std::thread knocker([&] {
        while (!ports.empty() && !closed.load()) {
            knock(host, std::to_string(ports.front()));
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
    });
    server_->close();  // joins the workers before the handler they call goes away
    closed.store(true);
    knocker.join();
}

std::string MetricsServer::bound_address() const {
    const std::vector<int> ports = server_->getListeningPorts();
    const size_t colon = listen_.rfind(':');
    if (ports.empty() || colon == std::string::npos) return listen_;
    return listen_.substr(0, colon + 1) + std::to_string(ports.front());
}

}  // namespace kepler::estimate
