#include "http_server.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <stdexcept>

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
    ssize_t write(const char* data, size_t size) const {
        return tls ? SSL_write(tls, data, static_cast<int>(size)) : ::write(fd, data, size);
    }
};

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
    stopping_ = true;
    thread_.join();
    close(listener_);
}

std::string FakeHttpServer::url() const { return (tls_ ? "https://127.0.0.1:" : "http://127.0.0.1:") + std::to_string(port_); }

std::vector<FakeHttpServer::Request> FakeHttpServer::requests() const {
    std::lock_guard lock(mutex_);
    return requests_;
}

void FakeHttpServer::serve() {
    while (!stopping_) {
        pollfd p{listener_, POLLIN, 0};
        if (poll(&p, 1, 50) <= 0) continue;
        const int connection = accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
        if (connection < 0) continue;
        // A client that connects and says nothing must not hold the server (and the test) for good.
        const timeval limit{5, 0};
        setsockopt(connection, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
        answer(connection);
        close(connection);
    }
}

void FakeHttpServer::answer(int fd) {
    std::unique_ptr<SSL, void (*)(SSL*)> session(tls_ ? SSL_new(tls_.get()) : nullptr, SSL_free);
    if (session) {
        SSL_set_fd(session.get(), fd);
        if (SSL_accept(session.get()) != 1) return;  // the client refused the certificate, or spoke plain HTTP
    }
    const Connection connection{fd, session.get()};
    std::string head;
    char buffer[4096];
    while (head.find("\r\n\r\n") == std::string::npos && head.size() < 65536) {
        const ssize_t n = connection.read(buffer, sizeof buffer);
        if (n <= 0) return;
        head.append(buffer, static_cast<size_t>(n));
    }
    const Request request = parse_head(head);
    const Response response = handler_(request);
    {
        std::lock_guard lock(mutex_);
        requests_.push_back(request);
    }
    std::string reply = "HTTP/1.1 " + std::to_string(response.status) + " Fake\r\nContent-Type: application/json\r\n";
    for (const auto& [name, value] : response.headers) reply += name + ": " + value + "\r\n";
    reply += "Content-Length: " + std::to_string(response.body.size()) + "\r\nConnection: close\r\n\r\n" + response.body;
    size_t sent = 0;
    while (sent < reply.size()) {
        const ssize_t n = connection.write(reply.data() + sent, reply.size() - sent);
        if (n <= 0) return;
        sent += static_cast<size_t>(n);
    }
    if (session) SSL_shutdown(session.get());
}

}  // namespace kepler::testing
