// http_server.hpp — a real HTTP/1.1 server on 127.0.0.1 (one request per connection), plain or TLS
// (OpenSSL, with a certificate the test makes), that answers with whatever the test says: the daemons'
// libcurl client is exercised over a real socket and a real handshake, never through a mock of our code.
#pragma once

#include <openssl/ssl.h>

#include <atomic>
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
    };
    struct Response {
        int status = 200;
        std::string body;
        std::vector<std::pair<std::string, std::string>> headers;  // besides Content-Type/Length, e.g. Location
    };
    using Handler = std::function<Response(const Request&)>;

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

    Handler handler_;
    std::unique_ptr<SSL_CTX, TlsContextFree> tls_;
    int listener_ = -1;
    int port_ = 0;
    std::atomic<bool> stopping_{false};
    mutable std::mutex mutex_;
    std::vector<Request> requests_;
    std::thread thread_;
};

}  // namespace kepler::testing
