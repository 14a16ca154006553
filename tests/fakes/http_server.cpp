#include "http_server.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <stdexcept>
#include <string_view>

extern char** environ;

namespace kepler::testing {

namespace {

/// Byte I/O over the accepted socket, through TLS when the server has it.
struct Connection {
    int fd;
    SSL* tls;
    ssize_t read(char* buffer, size_t size) const {
        return tls ? SSL_read(tls, buffer, static_cast<int>(size)) : ::read(fd, buffer, size);
    }
    /// All of `data`, through partial writes; false when the client hung up or stopped reading.
    bool write_all(std::string_view data) const {
        constexpr size_t kChunk = 1 << 20;  // SSL_write takes an int
        while (!data.empty()) {
            const size_t size = std::min(data.size(), kChunk);
            // MSG_NOSIGNAL: a client gone mid-body is EPIPE here, not a SIGPIPE that ends the test process.
            const ssize_t n = tls ? SSL_write(tls, data.data(), static_cast<int>(size)) : ::send(fd, data.data(), size, MSG_NOSIGNAL);
            if (n < 0 && !tls && errno == EINTR) continue;
            if (n <= 0) return false;
            data.remove_prefix(static_cast<size_t>(n));
        }
        return true;
    }
};

/// OpenSSL writes to the socket with write(2), which raises SIGPIPE when the client has gone. Blocked on the
/// server's thread alone, the signal stays pending there (and goes with the thread) while the write fails
/// with EPIPE; the test process's own SIGPIPE disposition is left as it is.
void block_broken_pipe_signals_on_this_thread() {
    sigset_t broken_pipe;
    sigemptyset(&broken_pipe);
    sigaddset(&broken_pipe, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &broken_pipe, nullptr);
}

bool run_quietly(const std::vector<std::string>& argv) {
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
    pid_t pid = -1;
    const int rc = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0) return false;
    int status = 0;
    return waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

FakeHttpServer::Request parse_head(const std::string& head) {
    FakeHttpServer::Request request;
    size_t line_end = head.find("\r\n");
    const std::string first = head.substr(0, line_end);
    const size_t space1 = first.find(' ');
    const size_t space2 = first.find(' ', space1 + 1);
    request.method = first.substr(0, space1);
    request.target = first.substr(space1 + 1, space2 - space1 - 1);
    while (true) {
        const size_t start = line_end + 2;
        line_end = head.find("\r\n", start);
        if (line_end == std::string::npos || line_end == start) break;
        const std::string line = head.substr(start, line_end - start);
        const size_t colon = line.find(':');
        if (colon == std::string::npos) continue;
        std::string name = line.substr(0, colon);
        std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
        const size_t value = line.find_first_not_of(' ', colon + 1);
        request.headers[name] = value == std::string::npos ? std::string() : line.substr(value);
    }
    return request;
}

/// The standard reason phrase: some clients log it, none should depend on it.
const char* reason_phrase(int status) {
    switch (status) {
        case 200: return "OK";
        case 201: return "Created";
        case 204: return "No Content";
        case 400: return "Bad Request";
        case 401: return "Unauthorized";
        case 403: return "Forbidden";
        case 404: return "Not Found";
        case 405: return "Method Not Allowed";
        case 500: return "Internal Server Error";
        case 503: return "Service Unavailable";
        default: return "Fake";
    }
}

/// The request's head and, per Content-Length, its body (at most kMaxRequestBody bytes); nullopt when the
/// client hung up, stalled or sent a head over 64 KiB.
std::optional<FakeHttpServer::Request> read_request(const Connection& connection) {
    std::string received;
    char buffer[16384];
    size_t head_end = std::string::npos;
    while ((head_end = received.find("\r\n\r\n")) == std::string::npos) {
        if (received.size() >= 65536) return std::nullopt;
        const ssize_t n = connection.read(buffer, sizeof buffer);
        if (n <= 0) return std::nullopt;
        received.append(buffer, static_cast<size_t>(n));
    }
    FakeHttpServer::Request request = parse_head(received.substr(0, head_end + 4));
    size_t body_size = 0;
    if (const auto length = request.headers.find("content-length"); length != request.headers.end()) {
        const std::string& text = length->second;
        std::from_chars(text.data(), text.data() + text.size(), body_size);
        body_size = std::min(body_size, FakeHttpServer::kMaxRequestBody);
    }
    // libcurl waits for this before a large body (or for a second, by default, when it hears nothing).
    if (body_size > 0 && request.headers["expect"] == "100-continue" && !connection.write_all("HTTP/1.1 100 Continue\r\n\r\n")) {
        return std::nullopt;
    }
    request.headers.erase("expect");
    request.body = received.substr(head_end + 4);
    while (request.body.size() < body_size) {
        const ssize_t n = connection.read(buffer, sizeof buffer);
        if (n <= 0) return std::nullopt;
        request.body.append(buffer, static_cast<size_t>(n));
    }
    request.body.resize(std::min(request.body.size(), body_size));
    return request;
}

}  // namespace

std::optional<TlsFiles> make_test_certificate(const std::filesystem::path& directory, const std::string& stem) {
    TlsFiles files{directory / (stem + ".crt"), directory / (stem + ".key")};
    const bool made = run_quietly({"openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=" + stem,
                                   "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost", "-keyout", files.key.string(), "-out",
                                   files.certificate.string()});
    return made ? std::optional<TlsFiles>(files) : std::nullopt;
}

FakeHttpServer::FakeHttpServer(Handler handler, std::optional<TlsFiles> tls) : handler_(std::move(handler)) {
    if (tls) {
        tls_.reset(SSL_CTX_new(TLS_server_method()));
        if (!tls_ || SSL_CTX_use_certificate_chain_file(tls_.get(), tls->certificate.c_str()) != 1 ||
            SSL_CTX_use_PrivateKey_file(tls_.get(), tls->key.c_str(), SSL_FILETYPE_PEM) != 1) {
            throw std::runtime_error("fake http server: OpenSSL refused the test certificate");
        }
    }
    listener_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (listener_ < 0 || bind(listener_, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
        listen(listener_, 16) != 0) {
        throw std::runtime_error("fake http server: cannot listen on 127.0.0.1");
    }
    socklen_t length = sizeof address;
    getsockname(listener_, reinterpret_cast<sockaddr*>(&address), &length);
    port_ = ntohs(address.sin_port);
    thread_ = std::thread([this] { serve(); });
}

FakeHttpServer::~FakeHttpServer() {
    {
        // Wakes a read or write blocked on a client that stalled; a handler still running is waited for.
        std::lock_guard lock(mutex_);
        stopping_ = true;
        if (active_connection_ >= 0) shutdown(active_connection_, SHUT_RDWR);
    }
    thread_.join();
    close(listener_);
}

std::string FakeHttpServer::url() const { return (tls_ ? "https://127.0.0.1:" : "http://127.0.0.1:") + std::to_string(port_); }

std::vector<FakeHttpServer::Request> FakeHttpServer::requests() const {
    std::lock_guard lock(mutex_);
    return requests_;
}

void FakeHttpServer::serve() {
    block_broken_pipe_signals_on_this_thread();
    while (!stopping_) {
        pollfd p{listener_, POLLIN, 0};
        if (poll(&p, 1, 50) <= 0) continue;
        const int connection = accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
        if (connection < 0) continue;
        {
            std::lock_guard lock(mutex_);
            if (stopping_) {
                close(connection);
                break;
            }
            active_connection_ = connection;
        }
        // A client that connects and says nothing, or stops reading, must not hold the server (and the
        // test) for good.
        const timeval limit{5, 0};
        setsockopt(connection, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
        setsockopt(connection, SOL_SOCKET, SO_SNDTIMEO, &limit, sizeof limit);
        answer(connection);
        {
            std::lock_guard lock(mutex_);
            active_connection_ = -1;
        }
        close(connection);
    }
}

FakeHttpServer::Response FakeHttpServer::respond(const Request& request) {
    try {
        return handler_(request);
    } catch (const std::exception& error) {
        return Response{500, std::string("fake http server: the handler threw: ") + error.what(), {}};
    }
}

void FakeHttpServer::answer(int fd) {
    std::unique_ptr<SSL, void (*)(SSL*)> session(tls_ ? SSL_new(tls_.get()) : nullptr, SSL_free);
    if (session) {
        SSL_set_fd(session.get(), fd);
        if (SSL_accept(session.get()) != 1) return;  // the client refused the certificate, or spoke plain HTTP
    }
    const Connection connection{fd, session.get()};
    const std::optional<Request> request = read_request(connection);
    if (!request) return;
    const Response response = respond(*request);
    {
        std::lock_guard lock(mutex_);
        requests_.push_back(*request);
    }
    std::string head = "HTTP/1.1 " + std::to_string(response.status) + " " + reason_phrase(response.status) +
                       "\r\nContent-Type: application/json\r\n";
    for (const auto& [name, value] : response.headers) head += name + ": " + value + "\r\n";
    head += "Content-Length: " + std::to_string(response.body.size()) + "\r\nConnection: close\r\n\r\n";
    // The body is written apart from the head: a test's 100 MB body is not copied once more.
    if (connection.write_all(head) && connection.write_all(response.body) && session) SSL_shutdown(session.get());
}

}  // namespace kepler::testing
