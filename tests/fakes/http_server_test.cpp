// The fake HTTP server's persistent connections, checked with libcurl (as the daemons' clients use it) and
// with raw sockets where a test must say exactly what goes on the wire: one connection serves many requests,
// an idle client holds up no one, the server closes when asked and when it must, and stops promptly.
#include "fakes/http_server.hpp"
#include "fakes/temp_dir.hpp"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace kepler::testing {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

const bool curl_ready = curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK;

/// Every request answered 200 with its target as the body, except /throw, whose handler throws.
FakeHttpServer::Response echo_target(const FakeHttpServer::Request& request) {
    if (request.target == "/throw") throw std::runtime_error("asked to");
    return FakeHttpServer::Response{200, request.target, {}};
}

using kepler::testing::TempDir;

/// One libcurl easy handle, kept across requests as a client that reuses its connection keeps it.
class CurlClient {
public:
    struct Reply {
        CURLcode code = CURLE_OK;
        long status = 0;
        std::string body;
        std::string connection_header;  // the answer's Connection header, lower-cased
        long new_connections = -1;      // CURLINFO_NUM_CONNECTS: 0 when the request reused a connection
    };

    explicit CurlClient(fs::path ca_file = {}) : curl_(curl_easy_init()), ca_file_(std::move(ca_file)) {}
    CurlClient(const CurlClient&) = delete;
    CurlClient& operator=(const CurlClient&) = delete;
    ~CurlClient() { curl_easy_cleanup(curl_); }

    Reply get(const std::string& url, const std::vector<std::string>& headers = {}, long timeout_ms = 5'000) {
        Reply reply;
        curl_slist* list = nullptr;
        for (const std::string& header : headers) list = curl_slist_append(list, header.c_str());
        curl_easy_setopt(curl_, CURLOPT_URL, url.c_str());
        if (!ca_file_.empty()) curl_easy_setopt(curl_, CURLOPT_CAINFO, ca_file_.c_str());
        curl_easy_setopt(curl_, CURLOPT_HTTPHEADER, list);
        curl_easy_setopt(curl_, CURLOPT_TIMEOUT_MS, timeout_ms);
        curl_easy_setopt(curl_, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(curl_, CURLOPT_WRITEFUNCTION, keep_body);
        curl_easy_setopt(curl_, CURLOPT_WRITEDATA, &reply);
        curl_easy_setopt(curl_, CURLOPT_HEADERFUNCTION, keep_connection_header);
        curl_easy_setopt(curl_, CURLOPT_HEADERDATA, &reply);
        reply.code = curl_easy_perform(curl_);
        curl_easy_setopt(curl_, CURLOPT_HTTPHEADER, nullptr);
        curl_slist_free_all(list);
        curl_easy_getinfo(curl_, CURLINFO_RESPONSE_CODE, &reply.status);
        curl_easy_getinfo(curl_, CURLINFO_NUM_CONNECTS, &reply.new_connections);
        return reply;
    }

private:
    static size_t keep_body(char* data, size_t, size_t size, void* reply) {
        static_cast<Reply*>(reply)->body.append(data, size);
        return size;
    }
    static size_t keep_connection_header(char* data, size_t, size_t size, void* reply) {
        std::string line(data, size);
        for (char& c : line) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        if (line.starts_with("connection:")) {
            const size_t start = line.find_first_not_of(' ', 11);
            const size_t end = line.find_last_not_of("\r\n");
            static_cast<Reply*>(reply)->connection_header = start <= end ? line.substr(start, end - start + 1) : "";
        }
        return size;
    }

    CURL* curl_;
    fs::path ca_file_;
};

/// A plain TCP client of the server, for bytes that libcurl would not send; reads give up after 5 s.
class RawClient {
public:
    explicit RawClient(const FakeHttpServer& server) : fd_(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
        const std::string url = server.url();
        sockaddr_in address{};
        address.sin_family = AF_INET;
        address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        address.sin_port = htons(static_cast<uint16_t>(std::stoi(url.substr(url.rfind(':') + 1))));
        connected_ = connect(fd_, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0;
        const timeval limit{5, 0};
        setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
    }
    RawClient(const RawClient&) = delete;
    RawClient& operator=(const RawClient&) = delete;
    ~RawClient() { close(fd_); }

    [[nodiscard]] bool connected() const { return connected_; }
    bool send_all(std::string_view data) const {
        while (!data.empty()) {
            const ssize_t n = ::send(fd_, data.data(), data.size(), MSG_NOSIGNAL);
            if (n <= 0) return false;
            data.remove_prefix(static_cast<size_t>(n));
        }
        return true;
    }
    /// Everything until the server closes; `closed` tells whether it did (else the 5 s ran out).
    std::string read_until_closed(bool& closed) const {
        std::string received;
        char buffer[16384];
        ssize_t n = 0;
        while ((n = ::read(fd_, buffer, sizeof buffer)) > 0) received.append(buffer, static_cast<size_t>(n));
        closed = n == 0;
        return received;
    }

private:
    int fd_;
    bool connected_ = false;
};

size_t count_of(const std::string& text, const std::string& part) {
    size_t count = 0;
    for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++count;
    return count;
}

class FakeHttpServerTest : public ::testing::Test {
protected:
    void SetUp() override {
        ASSERT_TRUE(curl_ready);
        tls_ = make_test_certificate(dir_.path(), "server");
        if (!tls_) GTEST_SKIP() << "openssl CLI not available: cannot make a test certificate";
    }
    TempDir dir_{"kepler-http-server"};
    std::optional<TlsFiles> tls_;
};

TEST_F(FakeHttpServerTest, OneCurlHandleMakesThreeHttpsRequestsOverOneConnection) {
    FakeHttpServer server(echo_target, tls_);
    CurlClient client(tls_->certificate);
    for (const std::string path : {"/first", "/second", "/third"}) {
        const CurlClient::Reply reply = client.get(server.url() + path);
        ASSERT_EQ(reply.code, CURLE_OK) << curl_easy_strerror(reply.code);
        EXPECT_EQ(reply.body, path);
        EXPECT_EQ(reply.connection_header, "keep-alive");
        EXPECT_EQ(reply.new_connections, path == "/first" ? 1 : 0) << path << ": the connection was not reused";
    }
    EXPECT_EQ(server.connections(), 1u);
    EXPECT_EQ(server.requests().size(), 3u);
}

TEST_F(FakeHttpServerTest, AClientIdleOnItsConnectionHoldsUpNoOther) {
    FakeHttpServer server(echo_target, tls_);
    CurlClient idle(tls_->certificate);
    ASSERT_EQ(idle.get(server.url() + "/idle").status, 200);  // its connection stays open, unused
    RawClient silent(server);  // connected, and never says a word (not even its TLS hello)
    ASSERT_TRUE(silent.connected());
    std::this_thread::sleep_for(100ms);

    const auto start = Clock::now();
    CurlClient other(tls_->certificate);
    const CurlClient::Reply reply = other.get(server.url() + "/other", {}, 2'000);
    EXPECT_EQ(reply.code, CURLE_OK) << curl_easy_strerror(reply.code);
    EXPECT_EQ(reply.body, "/other");
    EXPECT_LT(Clock::now() - start, 1s);
    EXPECT_EQ(idle.get(server.url() + "/again").new_connections, 0) << "the idle connection still serves";
    EXPECT_EQ(server.connections(), 3u);
}

TEST_F(FakeHttpServerTest, ConnectionCloseIsHonoured) {
    FakeHttpServer server(echo_target, tls_);
    CurlClient client(tls_->certificate);
    const CurlClient::Reply closing = client.get(server.url() + "/last", {"Connection: close"});
    EXPECT_EQ(closing.status, 200);
    EXPECT_EQ(closing.connection_header, "close");
    EXPECT_EQ(client.get(server.url() + "/next").new_connections, 1) << "the closed connection cannot be reused";
    EXPECT_EQ(server.connections(), 2u);
}

TEST_F(FakeHttpServerTest, TheHandlerAskingToCloseClosesTheConnection) {
    FakeHttpServer server([](const FakeHttpServer::Request&) { return FakeHttpServer::Response{200, "bye", {{"Connection", "close"}}}; });
    CurlClient client;
    const CurlClient::Reply reply = client.get(server.url() + "/");
    EXPECT_EQ(reply.body, "bye");
    EXPECT_EQ(reply.connection_header, "close");
    EXPECT_EQ(client.get(server.url() + "/").new_connections, 1);
}

TEST_F(FakeHttpServerTest, Http10ClosesUnlessTheClientAsksToKeepAlive) {
    FakeHttpServer server(echo_target);
    RawClient plain(server);
    ASSERT_TRUE(plain.send_all("GET /once HTTP/1.0\r\n\r\n"));
    bool closed = false;
    const std::string once = plain.read_until_closed(closed);
    EXPECT_TRUE(closed);
    EXPECT_NE(once.find("Connection: close\r\n"), std::string::npos) << once;

    RawClient keeping(server);
    ASSERT_TRUE(keeping.send_all("GET /a HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\nGET /b HTTP/1.0\r\n\r\n"));
    const std::string both = keeping.read_until_closed(closed);
    EXPECT_TRUE(closed);
    EXPECT_EQ(count_of(both, "HTTP/1.1 200 OK\r\n"), 2u) << both;
    EXPECT_NE(both.find("Connection: keep-alive\r\n"), std::string::npos) << both;
}

TEST_F(FakeHttpServerTest, BodiesAreReadExactlySoTheNextRequestOnTheConnectionParses) {
    FakeHttpServer server(echo_target);
    RawClient client(server);
    // Sent at once, as a pipelining client would: the second request starts right after the first's body.
    ASSERT_TRUE(client.send_all("POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello"
                                "GET /b HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
    bool closed = false;
    const std::string answers = client.read_until_closed(closed);
    EXPECT_TRUE(closed);
    EXPECT_EQ(count_of(answers, "HTTP/1.1 200 OK\r\n"), 2u) << answers;
    const std::vector<FakeHttpServer::Request> requests = server.requests();
    ASSERT_EQ(requests.size(), 2u);
    EXPECT_EQ(requests[0].body, "hello");
    EXPECT_EQ(requests[1].method, "GET");
    EXPECT_EQ(requests[1].target, "/b");
}

TEST_F(FakeHttpServerTest, ABodyOverTheCapIs413AndTheConnectionCloses) {
    FakeHttpServer server(echo_target);
    RawClient client(server);
    const size_t size = FakeHttpServer::kMaxRequestBody + 1;
    // The whole body is sent: the answer must reach the client although the server never reads the body.
    ASSERT_TRUE(client.send_all("POST /big HTTP/1.1\r\nHost: x\r\nContent-Length: " + std::to_string(size) + "\r\n\r\n" +
                                std::string(size, 'x')));
    bool closed = false;
    const std::string answer = client.read_until_closed(closed);
    EXPECT_TRUE(closed);
    EXPECT_TRUE(answer.starts_with("HTTP/1.1 413 ")) << answer;
    EXPECT_NE(answer.find("Connection: close\r\n"), std::string::npos) << answer;
    EXPECT_TRUE(server.requests().empty()) << "the handler never sees a refused request";
}

TEST_F(FakeHttpServerTest, AThrowingHandlerIs500AndTheConnectionGoesOn) {
    FakeHttpServer server(echo_target, tls_);
    CurlClient client(tls_->certificate);
    const CurlClient::Reply failed = client.get(server.url() + "/throw");
    EXPECT_EQ(failed.status, 500);
    EXPECT_NE(failed.body.find("asked to"), std::string::npos);
    const CurlClient::Reply next = client.get(server.url() + "/fine");
    EXPECT_EQ(next.status, 200);
    EXPECT_EQ(next.new_connections, 0);
}

TEST_F(FakeHttpServerTest, AnIdleConnectionIsClosedAfterTheIdleTimeout) {
    FakeHttpServer server(echo_target, std::nullopt, 200ms);
    RawClient client(server);
    ASSERT_TRUE(client.send_all("GET /a HTTP/1.1\r\nHost: x\r\n\r\n"));
    const auto start = Clock::now();
    bool closed = false;
    const std::string answer = client.read_until_closed(closed);  // the answer, then the idle close
    EXPECT_TRUE(closed);
    EXPECT_NE(answer.find("Connection: keep-alive\r\n"), std::string::npos) << answer;
    EXPECT_GE(Clock::now() - start, 150ms);
    EXPECT_LT(Clock::now() - start, 2s);
}

TEST_F(FakeHttpServerTest, DestructionIsPromptWhileAClientHoldsAnIdleKeepAliveConnection) {
    auto server = std::make_unique<FakeHttpServer>(echo_target, tls_);
    CurlClient client(tls_->certificate);
    ASSERT_EQ(client.get(server->url() + "/").status, 200);
    RawClient plain_idle(*server);
    ASSERT_TRUE(plain_idle.connected());
    std::this_thread::sleep_for(100ms);
    const auto start = Clock::now();
    server.reset();
    EXPECT_LT(Clock::now() - start, 1s) << "not the idle timeout of 30 s";
}

TEST_F(FakeHttpServerTest, FinishedConnectionThreadsAreJoinedAsTheyEnd) {
    FakeHttpServer server(echo_target);
    for (int i = 0; i < 200; ++i) {
        RawClient client(server);
        ASSERT_TRUE(client.send_all("GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
        bool closed = false;
        (void)client.read_until_closed(closed);
        ASSERT_TRUE(closed);
    }
    const auto deadline = Clock::now() + 2s;
    while (server.live_connections() > 0 && Clock::now() < deadline) std::this_thread::sleep_for(20ms);
    EXPECT_EQ(server.live_connections(), 0u) << "each connection's thread is joined once it ends";
    EXPECT_EQ(server.connections(), 200u);
}

}  // namespace
}  // namespace kepler::testing
