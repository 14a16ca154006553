// http_server.hpp — a real HTTP/1.1 server on 127.0.0.1 (one request per connection), plain or TLS
// (OpenSSL, with a certificate the test makes), that answers with whatever the test says: the daemons'
// libcurl client is exercised over a real socket and a real handshake, never through a mock of our code.
//
// Connections are answered one at a time on the server's thread. A handler may take its time (a slow
// device) and may return a body of any size (a client that hangs up halfway is only a failed write, never
// a SIGPIPE); a client that stalls is dropped after a few seconds. The destructor returns as soon as the
// handler in progress does, if any: a handler that waits must be given a way to stop waiting.
#pragma once

#include <openssl/ssl.h>

#include <atomic>
#include <cstddef>
#include <filesystem>
#include <functional>
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
        std::string body;  // as sent per Content-Length (at most kMaxRequestBody bytes are read)
    };
    struct Response {
        int status = 200;
        std::string body;
        std::vector<std::pair<std::string, std::string>> headers;  // besides Content-Type/Length, e.g. Location
    };
    /// A handler runs on the server's thread; if it throws, the client gets a 500.
    using Handler = std::function<Response(const Request&)>;

    static constexpr size_t kMaxRequestBody = 1 << 20;  // a longer body is cut there: no test needs more

    /// Plain HTTP, or HTTPS with `tls` (throws std::runtime_error when OpenSSL refuses the files).
    explicit FakeHttpServer(Handler handler, std::optional<TlsFiles> tls = std::nullopt);
    FakeHttpServer(const FakeHttpServer&) = delete;
    FakeHttpServer& operator=(const FakeHttpServer&) = delete;
    ~FakeHttpServer();

    /// "http://127.0.0.1:<port>" or "https://127.0.0.1:<port>".
    [[nodiscard]] std::string url() const;
    [[nodiscard]] std::vector<Request> requests() const;

private:
    struct TlsContextFree {
        void operator()(SSL_CTX* context) const noexcept { SSL_CTX_free(context); }
    };

    void serve();
    void answer(int connection);
    [[nodiscard]] Response respond(const Request& request);

    Handler handler_;
    std::unique_ptr<SSL_CTX, TlsContextFree> tls_;
    int listener_ = -1;
    int port_ = 0;
    std::atomic<bool> stopping_{false};
    mutable std::mutex mutex_;
    std::vector<Request> requests_;
    // The connection being answered (-1 between connections), so that the destructor can shut it down
    // and wake a read or write blocked on it; guarded by mutex_, like stopping_'s check before accept.
    int active_connection_ = -1;
    std::thread thread_;
};

}  // namespace kepler::testing
