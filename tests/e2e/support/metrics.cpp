#include "support/metrics.hpp"

#include <arpa/inet.h>
#include <cstdlib>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <sstream>
#include <thread>

namespace e2e {

std::optional<std::string> http_get_metrics(int port) {
    const int s = socket(AF_INET, SOCK_STREAM, 0);
    if (s < 0) return std::nullopt;
    timeval timeout{10, 0};
    setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(s, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
        close(s);
        return std::nullopt;
    }
    // HTTP/1.0: the server closes the connection after the body, so reading to EOF is the whole answer.
    const std::string request = "GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
    if (write(s, request.data(), request.size()) != static_cast<ssize_t>(request.size())) {
        close(s);
        return std::nullopt;
    }
    std::string response;
    char buffer[65536];
    for (ssize_t n; (n = read(s, buffer, sizeof buffer)) > 0;) response.append(buffer, static_cast<size_t>(n));
    close(s);
    const size_t body = response.find("\r\n\r\n");
    if (response.rfind("HTTP/1.", 0) != 0 || response.find(" 200 ") > 12 || body == std::string::npos) return std::nullopt;
    return response.substr(body + 4);
}

Scrape parse_exposition(const std::string& text) {
    Scrape out;
    std::istringstream lines(text);
    for (std::string line; std::getline(lines, line);) {
        if (line.empty() || line[0] == '#') continue;
        // The value follows the last space outside the label set.
        const size_t labels_end = line.find('}');
        const size_t space = line.find(' ', labels_end == std::string::npos ? 0 : labels_end);
        if (space == std::string::npos) continue;
        out[line.substr(0, space)] = std::stod(line.substr(space + 1));
    }
    return out;
}

std::string metric_name(const std::string& series) { return series.substr(0, series.find('{')); }

double value_of(const Scrape& scrape, const std::string& series) {
    const auto found = scrape.find(series);
    return found == scrape.end() ? -1 : found->second;
}

std::optional<Scrape> scrape(int port, int attempts) {
    for (int i = 0; i < attempts; ++i) {
        if (auto text = http_get_metrics(port)) return parse_exposition(*text);
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return std::nullopt;
}

int metrics_port(const Child& estimator, std::chrono::milliseconds timeout) {
    const std::string marker = "serving /metrics on ";
    int port = -1;
    wait_until([&] {
        const std::string log = estimator.log();
        const size_t at = log.find(marker);
        if (at == std::string::npos) return false;
        const size_t end = log.find('\n', at);
        const std::string address = log.substr(at + marker.size(), end == std::string::npos ? end : end - at - marker.size());
        port = std::atoi(address.substr(address.rfind(':') + 1).c_str());
        return true;
    }, timeout);
    return port > 0 ? port : -1;
}

}  // namespace e2e
