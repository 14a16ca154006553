// fake_http_server.hpp — a real HTTP/1.1 server on 127.0.0.1 (one request per connection) that answers
// with whatever the test says, so the collector's libcurl client is exercised over a real socket.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace kepler::collect::testing {

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
    };
    using Handler = std::function<Response(const Request&)>;

    explicit FakeHttpServer(Handler handler);
    FakeHttpServer(const FakeHttpServer&) = delete;
    FakeHttpServer& operator=(const FakeHttpServer&) = delete;
    ~FakeHttpServer();

    [[nodiscard]] std::string url() const;
    [[nodiscard]] std::vector<Request> requests() const;

private:
    void serve();
    void answer(int connection);

    Handler handler_;
    int listener_ = -1;
    int port_ = 0;
    std::atomic<bool> stopping_{false};
    mutable std::mutex mutex_;
    std::vector<Request> requests_;
    std::thread thread_;
};

}  // namespace kepler::collect::testing
