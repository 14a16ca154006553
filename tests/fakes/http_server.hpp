// http_server.hpp — a real HTTP/1.1 server on 127.0.0.1, plain or TLS (OpenSSL, with a certificate the test
// makes), that answers with whatever the test says: the daemons' libcurl client is exercised over a real
// socket and a real handshake, never through a mock of our code.
//
// Like a real server (and a real BMC), it keeps connections open (HTTP/1.1 persistent connections), so that
// a client that reuses its connection pays one handshake, not one a request: a benchmark of the client's CPU
// then measures the client, not the fake. A connection closes after a response when the request asked for
// it (`Connection: close`, or HTTP/1.0 without `Connection: keep-alive`), when the handler's response says
// `Connection: close`, after a request the server refuses (a head it cannot parse, a body over
// kMaxRequestBody), or when the client stays idle for the idle timeout.
//
// Each connection is served on its own thread, so that a client idle on its connection (or silent, or
// waiting for a slow handler) never holds up another. A handler may take its time (a slow device) and may
// return a body of any size (a client that hangs up halfway is only a failed write, never a SIGPIPE); a
// client that stalls mid-request or stops reading is dropped after a few seconds. The destructor returns as
// soon as the handlers in progress do, if any: a handler that waits must be given a way to stop waiting.
#pragma once

#include <openssl/ssl.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <filesystem>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace kepler::testing {

/// A certificate and its private key (PEM files).
struct TlsFiles {
    std::filesystem::path certificate;
    std::filesystem::path key;
};

/// A self-signed certificate for 127.0.0.1 and localhost (it is its own CA), made in `directory` with the
/// openssl CLI as `<stem>.crt` and `<stem>.key`; nullopt when openssl is missing or fails.
[[nodiscard]] std::optional<TlsFiles> make_test_certificate(const std::filesystem::path& directory, const std::string& stem);

class FakeHttpServer {
public:
    struct Request {
        std::string method;
        std::string target;  // path and query, as sent
        std::map<std::string, std::string> headers;  // names lower-cased
        std::string body;  // exactly as sent per Content-Length
    };
    struct Response {
        int status = 200;
        std::string body;
        // Besides Content-Type/Length, e.g. Location; "Connection: close" closes the connection after it.
        std::vector<std::pair<std::string, std::string>> headers;
    };
    /// A handler runs on the thread of the connection the request came on, so handlers for different
    /// connections may run at once: it must be thread-safe. If it throws, the client gets a 500.
    using Handler = std::function<Response(const Request&)>;

    /// A request with a longer body is answered 413 without the handler, and its connection closed.
    static constexpr size_t kMaxRequestBody = 1 << 20;
    /// How long a connection may sit between requests before the server closes it (as real servers do).
    static constexpr std::chrono::milliseconds kIdleTimeout{30'000};

    /// Plain HTTP, or HTTPS with `tls` (throws std::runtime_error when OpenSSL refuses the files).
    explicit FakeHttpServer(Handler handler, std::optional<TlsFiles> tls = std::nullopt,
                            std::chrono::milliseconds idle_timeout = kIdleTimeout);
    FakeHttpServer(const FakeHttpServer&) = delete;
    FakeHttpServer& operator=(const FakeHttpServer&) = delete;
    ~FakeHttpServer();

    /// "http://127.0.0.1:<port>" or "https://127.0.0.1:<port>".
    [[nodiscard]] std::string url() const;
    /// The requests handed to the handler so far, in the order they were answered.
    [[nodiscard]] std::vector<Request> requests() const;
    /// Connections accepted so far: a client that reuses its connection adds one, not one a request.
    [[nodiscard]] size_t connections() const;
    /// Connections whose threads are not joined yet: those open, and those that ended in the last 50 ms or so.
    [[nodiscard]] size_t live_connections() const;

private:
    struct TlsContextFree {
        void operator()(SSL_CTX* context) const noexcept { SSL_CTX_free(context); }
    };
    /// A connection being served: its socket (-1 once closed) and its thread, which sets `finished` last.
    struct ConnectionThread {
        int fd = -1;
        bool finished = false;
        std::thread thread;
    };

    void serve();
    void start_connection(int fd);
    void join_finished_connections();
    void serve_connection(ConnectionThread& entry, int fd);
    void answer_requests(int fd);
    [[nodiscard]] Response respond(const Request& request);
    void record(const Request& request);

    Handler handler_;
    std::unique_ptr<SSL_CTX, TlsContextFree> tls_;
    const std::chrono::milliseconds idle_timeout_;
    int listener_ = -1;
    int port_ = 0;
    std::atomic<bool> stopping_{false};
    std::atomic<size_t> connections_accepted_{0};
    mutable std::mutex mutex_;  // guards requests_ and connections_, and stopping_'s check before a connection starts
    std::vector<Request> requests_;
    // The connections being served (a list: an entry stays where it is while its thread refers to it), so
    // that the destructor can shut their sockets down, which wakes a read, write or TLS call blocked on them.
    std::list<ConnectionThread> connections_;
    std::thread thread_;  // the accept loop; it also joins the connection threads that have finished
};

}  // namespace kepler::testing
