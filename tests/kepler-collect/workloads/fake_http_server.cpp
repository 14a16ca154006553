#include "fake_http_server.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <stdexcept>

namespace kepler::collect::testing {

FakeHttpServer::FakeHttpServer(Handler handler) : handler_(std::move(handler)) {
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

std::string FakeHttpServer::url() const { return "http://127.0.0.1:" + std::to_string(port_); }

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
        answer(connection);
        close(connection);
    }
}

void FakeHttpServer::answer(int connection) {
    std::string head;
    char buffer[4096];
    while (head.find("\r\n\r\n") == std::string::npos && head.size() < 65536) {
        const ssize_t n = read(connection, buffer, sizeof buffer);
        if (n <= 0) return;
        head.append(buffer, static_cast<size_t>(n));
    }
    Request request;
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
        request.headers[name] = line.substr(line.find_first_not_of(' ', colon + 1));
    }
    const Response response = handler_(request);
    {
        std::lock_guard lock(mutex_);
        requests_.push_back(request);
    }
    std::string reply = "HTTP/1.1 " + std::to_string(response.status) + " Fake\r\nContent-Type: application/json\r\n" +
                        "Content-Length: " + std::to_string(response.body.size()) + "\r\nConnection: close\r\n\r\n" +
                        response.body;
    size_t sent = 0;
    while (sent < reply.size()) {
        const ssize_t n = write(connection, reply.data() + sent, reply.size() - sent);
        if (n <= 0) return;
        sent += static_cast<size_t>(n);
    }
}

}  // namespace kepler::collect::testing
