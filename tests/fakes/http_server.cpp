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
#include <chrono>
#include <iterator>
#include <stdexcept>
#include <string_view>
#include <system_error>

extern char** environ;

namespace kepler::testing {

namespace {

/// Byte I/O over one accepted socket, through TLS when the server has it. What is read past the end of one
/// request stays in `unread` for the next: a client may send its next request before it reads this answer.
struct Connection {
    int fd;
    SSL* tls;
    std::string unread;

    /// Appends what the client sends next to `unread`; false when it hung up or stalled (SO_RCVTIMEO).
    bool read_more() {
        char buffer[16384];
        const ssize_t n = tls ? SSL_read(tls, buffer, static_cast<int>(sizeof buffer)) : ::read(fd, buffer, sizeof buffer);
        if (n <= 0) return false;
        unread.append(buffer, static_cast<size_t>(n));
        return true;
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
    /// Whether the client sends something within `idle_timeout`. The destructor's shutdown() also makes the
    /// socket readable (at end of file), so a connection waiting here ends at once when the server stops.
    [[nodiscard]] bool wait_for_request(std::chrono::milliseconds idle_timeout) const {
        if (!unread.empty() || (tls && SSL_has_pending(tls))) return true;
        pollfd readable{fd, POLLIN, 0};
        int ready = 0;
        do {
            ready = poll(&readable, 1, static_cast<int>(idle_timeout.count()));
        } while (ready < 0 && errno == EINTR);
        return ready > 0;
    }
};

/// OpenSSL writes to the socket with write(2), which raises SIGPIPE when the client has gone. Blocked on each
/// connection's thread, the signal stays pending there (and goes with the thread) while the write fails
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

std::string lower_case(std::string text) {
    std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return std::tolower(c); });
    return text;
}

/// Whether a comma-separated header value such as "keep-alive, Upgrade" holds `token` (any case).
bool has_token(const std::string& value, std::string_view token) {
    size_t start = 0;
    while (start < value.size()) {
        const size_t end = std::min(value.find(',', start), value.size());
        const size_t first = value.find_first_not_of(" \t", start);
        const size_t last = value.find_last_not_of(" \t", end - 1);
        if (first < end && last != std::string::npos && last >= first &&
            lower_case(value.substr(first, last - first + 1)) == token) {
            return true;
        }
        start = end + 1;
    }
    return false;
}

/// The request line and headers into `request`, and the HTTP version into `version`; false when the request
/// line is not "<method> <target> HTTP/1.x".
bool parse_head(const std::string& head, FakeHttpServer::Request& request, std::string& version) {
    size_t line_end = head.find("\r\n");
    const std::string first = head.substr(0, line_end);
    const size_t space1 = first.find(' ');
    const size_t space2 = space1 == std::string::npos ? std::string::npos : first.find(' ', space1 + 1);
    if (space2 == std::string::npos) return false;
    request.method = first.substr(0, space1);
    request.target = first.substr(space1 + 1, space2 - space1 - 1);
    version = first.substr(space2 + 1);
    while (true) {
        const size_t start = line_end + 2;
        line_end = head.find("\r\n", start);
        if (line_end == std::string::npos || line_end == start) break;
        const std::string line = head.substr(start, line_end - start);
        const size_t colon = line.find(':');
        if (colon == std::string::npos) continue;
        const size_t value = line.find_first_not_of(' ', colon + 1);
        request.headers[lower_case(line.substr(0, colon))] = value == std::string::npos ? std::string() : line.substr(value);
    }
    return !request.method.empty() && version.starts_with("HTTP/1.");
}

/// HTTP/1.1 keeps the connection unless the client says "Connection: close"; HTTP/1.0 closes it unless the
/// client says "Connection: keep-alive".
bool client_keeps_alive(const FakeHttpServer::Request& request, const std::string& version) {
    const auto connection = request.headers.find("connection");
    const std::string value = connection == request.headers.end() ? std::string() : connection->second;
    if (has_token(value, "close")) return false;
    return version != "HTTP/1.0" || has_token(value, "keep-alive");
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
        case 411: return "Length Required";
        case 413: return "Content Too Large";
        case 500: return "Internal Server Error";
        case 503: return "Service Unavailable";
        default: return "Fake";
    }
}

/// A request as read off a connection, and what the server makes of it before any handler sees it.
struct Incoming {
    FakeHttpServer::Request request;
    bool client_keeps_alive = true;
    // 400 (a head it cannot parse), 411 (a chunked body) or 413 (a body over kMaxRequestBody): the server
    // answers it without the handler and closes the connection, whose next bytes it cannot make sense of.
    int refusal = 0;
};

/// The next request's head, from `connection.unread` and what the client sends; nullopt when the client hung
/// up, stalled, or sent a head over 64 KiB. Empty lines before a request line are skipped, as RFC 9112 asks.
std::optional<Incoming> read_head(Connection& connection) {
    size_t head_end = std::string::npos;
    while (true) {
        connection.unread.erase(0, std::min(connection.unread.find_first_not_of("\r\n"), connection.unread.size()));
        if ((head_end = connection.unread.find("\r\n\r\n")) != std::string::npos) break;
        if (connection.unread.size() >= 65536 || !connection.read_more()) return std::nullopt;
    }
    Incoming incoming;
    std::string version;
    const bool parsed = parse_head(connection.unread.substr(0, head_end + 4), incoming.request, version);
    connection.unread.erase(0, head_end + 4);
    incoming.client_keeps_alive = client_keeps_alive(incoming.request, version);
    if (!parsed) incoming.refusal = 400;
    return incoming;
}

/// The next request, its body read exactly per Content-Length so that the request after it parses from its
/// first byte; nullopt when the client hung up or stalled.
std::optional<Incoming> read_request(Connection& connection) {
    std::optional<Incoming> incoming = read_head(connection);
    if (!incoming || incoming->refusal != 0) return incoming;
    FakeHttpServer::Request& request = incoming->request;
    if (request.headers.contains("transfer-encoding")) {
        incoming->refusal = 411;
        return incoming;
    }
    size_t body_size = 0;
    if (const auto length = request.headers.find("content-length"); length != request.headers.end()) {
        const std::string& text = length->second;
        const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), body_size);
        if (error != std::errc() || end != text.data() + text.size()) incoming->refusal = 400;
        if (body_size > FakeHttpServer::kMaxRequestBody) incoming->refusal = 413;
        if (incoming->refusal != 0) return incoming;
    }
    // libcurl waits for this before a large body (or for a second, by default, when it hears nothing).
    const bool expects_continue = lower_case(request.headers["expect"]) == "100-continue";
    request.headers.erase("expect");
    if (expects_continue && connection.unread.size() < body_size && !connection.write_all("HTTP/1.1 100 Continue\r\n\r\n")) {
        return std::nullopt;
    }
    while (connection.unread.size() < body_size) {
        if (!connection.read_more()) return std::nullopt;
    }
    request.body = connection.unread.substr(0, body_size);
    connection.unread.erase(0, body_size);
    return incoming;
}

/// True when the handler's response carries "Connection: close": the server closes after sending it.
bool response_closes(const FakeHttpServer::Response& response) {
    return std::any_of(response.headers.begin(), response.headers.end(),
                       [](const auto& header) { return lower_case(header.first) == "connection" && has_token(header.second, "close"); });
}

/// The status line and headers; the handler's own Connection header gives way to the server's, which says
/// what the server does next.
std::string response_head(const FakeHttpServer::Response& response, bool keep_alive) {
    std::string head = "HTTP/1.1 " + std::to_string(response.status) + " " + reason_phrase(response.status) +
                       "\r\nContent-Type: application/json\r\n";
    for (const auto& [name, value] : response.headers) {
        if (lower_case(name) != "connection") head += name + ": " + value + "\r\n";
    }
    return head + "Content-Length: " + std::to_string(response.body.size()) + "\r\nConnection: " +
           (keep_alive ? "keep-alive" : "close") + "\r\n\r\n";
}

/// Ends a connection after its last answer without losing that answer: a socket closed with bytes unread
/// (the rest of a refused body) sends a reset, which can destroy the answer before the client reads it. So
/// the server says it is done (close_notify, FIN) and reads what is left until the client closes, for a
/// second at most (the destructor's shutdown() ends the wait at once).
void close_after_last_answer(const Connection& connection) {
    if (connection.tls) SSL_shutdown(connection.tls);
    shutdown(connection.fd, SHUT_WR);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
    char discarded[16384];
    while (true) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
        pollfd readable{connection.fd, POLLIN, 0};
        if (left.count() <= 0 || poll(&readable, 1, static_cast<int>(left.count())) <= 0) return;
        if (::read(connection.fd, discarded, sizeof discarded) <= 0) return;
    }
}

}  // namespace

std::optional<TlsFiles> make_test_certificate(const std::filesystem::path& directory, const std::string& stem) {
    TlsFiles files{directory / (stem + ".crt"), directory / (stem + ".key")};
    const bool made = run_quietly({"openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=" + stem,
                                   "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost", "-keyout", files.key.string(), "-out",
                                   files.certificate.string()});
    return made ? std::optional<TlsFiles>(files) : std::nullopt;
}

FakeHttpServer::FakeHttpServer(Handler handler, std::optional<TlsFiles> tls, std::chrono::milliseconds idle_timeout)
    : handler_(std::move(handler)), idle_timeout_(idle_timeout) {
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
        listen(listener_, 64) != 0) {
        throw std::runtime_error("fake http server: cannot listen on 127.0.0.1");
    }
    socklen_t length = sizeof address;
    getsockname(listener_, reinterpret_cast<sockaddr*>(&address), &length);
    port_ = ntohs(address.sin_port);
    thread_ = std::thread([this] { serve(); });
}

FakeHttpServer::~FakeHttpServer() {
    {
        // Wakes every read, write or TLS call blocked on a connection (an idle client, a stalled one); a
        // handler still running is waited for, and its answer then fails on the shut-down socket.
        std::lock_guard lock(mutex_);
        stopping_ = true;
        for (const ConnectionThread& connection : connections_) {
            if (connection.fd >= 0) shutdown(connection.fd, SHUT_RDWR);
        }
    }
    thread_.join();  // the accept loop: no connection starts after this
    std::list<ConnectionThread> serving;
    {
        std::lock_guard lock(mutex_);
        serving.splice(serving.end(), connections_);  // the entries stay where their threads see them
    }
    for (ConnectionThread& connection : serving) connection.thread.join();
    close(listener_);
}

std::string FakeHttpServer::url() const { return (tls_ ? "https://127.0.0.1:" : "http://127.0.0.1:") + std::to_string(port_); }

std::vector<FakeHttpServer::Request> FakeHttpServer::requests() const {
    std::lock_guard lock(mutex_);
    return requests_;
}

size_t FakeHttpServer::connections() const { return connections_accepted_; }

size_t FakeHttpServer::live_connections() const {
    std::lock_guard lock(mutex_);
    return connections_.size();
}

void FakeHttpServer::serve() {
    while (!stopping_) {
        join_finished_connections();  // a test may open hundreds of connections: their threads go as they end
        pollfd p{listener_, POLLIN, 0};
        if (poll(&p, 1, 50) <= 0) continue;
        const int fd = accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
        if (fd >= 0) start_connection(fd);
    }
}

void FakeHttpServer::start_connection(int fd) {
    // Under the mutex: the destructor either sees this connection (and shuts it down) or stops it here, and
    // the new thread marks its entry finished only once the entry holds it.
    std::lock_guard lock(mutex_);
    if (stopping_) {
        close(fd);
        return;
    }
    ConnectionThread& entry = connections_.emplace_back();
    entry.fd = fd;
    try {
        entry.thread = std::thread([this, &entry, fd] { serve_connection(entry, fd); });
    } catch (const std::system_error&) {  // no thread to be had: the client sees its connection closed
        connections_.pop_back();
        close(fd);
        return;
    }
    ++connections_accepted_;
}

void FakeHttpServer::join_finished_connections() {
    std::list<ConnectionThread> finished;
    {
        std::lock_guard lock(mutex_);
        for (auto connection = connections_.begin(); connection != connections_.end();) {
            const auto next = std::next(connection);
            if (connection->finished) finished.splice(finished.end(), connections_, connection);
            connection = next;
        }
    }
    for (ConnectionThread& connection : finished) connection.thread.join();  // each is returning already
}

void FakeHttpServer::serve_connection(ConnectionThread& entry, int fd) {
    block_broken_pipe_signals_on_this_thread();
    // A client that stalls mid-request, or stops reading an answer, must not hold its thread (and the test's
    // end) for good; a client idle between requests is given idle_timeout_ instead.
    const timeval limit{5, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &limit, sizeof limit);
    answer_requests(fd);
    std::lock_guard lock(mutex_);
    close(fd);  // under the mutex: the destructor must never shut down a number the system has since reused
    entry.fd = -1;
    entry.finished = true;
}

FakeHttpServer::Response FakeHttpServer::respond(const Request& request) {
    try {
        return handler_(request);
    } catch (const std::exception& error) {
        return Response{500, std::string("fake http server: the handler threw: ") + error.what(), {}};
    }
}

void FakeHttpServer::record(const Request& request) {
    std::lock_guard lock(mutex_);
    requests_.push_back(request);
}

void FakeHttpServer::answer_requests(int fd) {
    std::unique_ptr<SSL, void (*)(SSL*)> session(tls_ ? SSL_new(tls_.get()) : nullptr, SSL_free);
    if (session) {
        SSL_set_fd(session.get(), fd);
        if (SSL_accept(session.get()) != 1) return;  // the client refused the certificate, or spoke plain HTTP
    }
    Connection connection{fd, session.get(), {}};
    while (!stopping_ && connection.wait_for_request(idle_timeout_)) {
        const std::optional<Incoming> incoming = read_request(connection);
        if (!incoming) return;  // the client hung up or stalled: there is no one to answer
        const int refusal = incoming->refusal;
        const Response response = refusal != 0 ? Response{refusal, std::string("fake http server: ") + reason_phrase(refusal), {}}
                                               : respond(incoming->request);
        if (refusal == 0) record(incoming->request);
        const bool keep_alive = incoming->client_keeps_alive && refusal == 0 && !response_closes(response);
        // The body is written apart from the head: a test's 100 MB body is not copied once more. A HEAD
        // request gets the head alone, or the client would read the body as the next answer.
        if (!connection.write_all(response_head(response, keep_alive))) return;
        if (incoming->request.method != "HEAD" && !connection.write_all(response.body)) return;
        if (!keep_alive) {
            close_after_last_answer(connection);
            return;
        }
    }
}

}  // namespace kepler::testing
