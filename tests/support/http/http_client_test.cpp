// The daemons' HTTP client against real servers on 127.0.0.1 (plain and TLS, tests/fakes): what it sends,
// which certificates it accepts, and the bounds it keeps (size, redirects, schemes, time).
#include "support/http/http_client.hpp"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "fakes/http_server.hpp"
#include "fakes/temp_dir.hpp"

namespace kepler::support {
namespace {

using kepler::testing::FakeHttpServer;
using kepler::testing::TlsFiles;
namespace fs = std::filesystem;

using kepler::testing::TempDir;

FakeHttpServer::Handler answer(int status, std::string body) {
    return [status, body](const FakeHttpServer::Request&) { return FakeHttpServer::Response{status, body, {}}; };
}

HttpRequest get(const std::string& url) {
    HttpRequest request;
    request.url = url;
    request.timeout_ms = 5'000;
    return request;
}

TEST(HttpClient, AGetReturnsStatusAndBodyAndSendsTheBearerToken) {
    FakeHttpServer server(answer(404, R"({"kind":"Status"})"));
    HttpRequest request = get(server.url() + "/api/v1/pods?limit=500");
    request.bearer_token = "s3cret";
    const HttpResponse response = http_get(request);
    EXPECT_EQ(response.status, 404) << "an HTTP error status is an answer, not an exception";
    EXPECT_EQ(response.body, R"({"kind":"Status"})");
    ASSERT_EQ(server.requests().size(), 1u);
    EXPECT_EQ(server.requests()[0].target, "/api/v1/pods?limit=500");
    EXPECT_EQ(server.requests()[0].headers.at("authorization"), "Bearer s3cret");
}

TEST(HttpClient, ABodyOverTheLimitIsAnErrorNotATruncatedDocument) {
    FakeHttpServer server(answer(200, std::string(100'000, 'x')));
    HttpRequest request = get(server.url());
    request.max_bytes = 99'999;
    EXPECT_THROW((void)http_get(request), HttpError);
    request.max_bytes = 100'000;
    EXPECT_EQ(http_get(request).body.size(), 100'000u);
}

TEST(HttpClient, OnlyHttpAndHttpsUrlsAreFetched) {
    for (const char* url : {"file:///etc/passwd", "ftp://127.0.0.1/x", "gopher://127.0.0.1/", "127.0.0.1:80/x"}) {
        EXPECT_THROW((void)http_get(get(url)), HttpError) << url;
    }
    EXPECT_TRUE(is_https("HTTPS://example.com"));
    EXPECT_FALSE(is_https("http://example.com"));
}

TEST(HttpClient, ASilentServerCostsTheTimeoutNotMore) {
    FakeHttpServer server([](const FakeHttpServer::Request&) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1500));
        return FakeHttpServer::Response{200, "late", {}};
    });
    HttpRequest request = get(server.url());
    request.timeout_ms = 200;
    const auto start = std::chrono::steady_clock::now();
    EXPECT_THROW((void)http_get(request), HttpError);
    // The bound is the feature: far below the server's 1.5 s, with room for a loaded machine.
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(1400));
}

class Https : public ::testing::Test {
protected:
    void SetUp() override {
        auto made = kepler::testing::make_test_certificate(dir_.path(), "server");
        if (!made) GTEST_SKIP() << "openssl CLI not available: cannot make a test certificate";
        files_ = *made;
    }
    TempDir dir_{"kepler-http"};
    TlsFiles files_;
};

TEST_F(Https, TheServerIsTrustedThroughTheCaFileAndOnlyThroughIt) {
    FakeHttpServer server(answer(200, "model"), files_);
    ASSERT_EQ(server.url().rfind("https://", 0), 0u);
    HttpRequest request = get(server.url() + "/m/model.json");
    EXPECT_THROW((void)http_get(request), HttpError) << "a self-signed server is not in the system's store";
    request.ca_file = files_.certificate.string();
    EXPECT_EQ(http_get(request).body, "model");

    const auto other = kepler::testing::make_test_certificate(dir_.path(), "other");
    ASSERT_TRUE(other);
    request.ca_file = other->certificate.string();
    EXPECT_THROW((void)http_get(request), HttpError) << "another CA's certificate proves nothing";
}

TEST_F(Https, SkippingVerificationIsExplicit) {
    FakeHttpServer server(answer(200, "lab"), files_);
    HttpRequest request = get(server.url());
    request.insecure_skip_verify = true;
    EXPECT_EQ(http_get(request).body, "lab");
}

TEST_F(Https, RedirectsAreFollowedOnlyWhenAskedAndNeverDownToPlainHttp) {
    FakeHttpServer plain(answer(200, "from plain http"));
    FakeHttpServer secure_target(answer(200, "from https"), files_);
    const std::string down = plain.url() + "/model.json";
    const std::string across = secure_target.url() + "/model.json";
    FakeHttpServer redirector([&](const FakeHttpServer::Request& r) {
        return FakeHttpServer::Response{302, "", {{"Location", r.target == "/down" ? down : across}}};
    }, files_);
    HttpRequest request = get(redirector.url() + "/across");
    request.ca_file = files_.certificate.string();
    EXPECT_EQ(http_get(request).status, 302) << "max_redirects 0: the redirect is the answer";
    request.max_redirects = 3;
    EXPECT_EQ(http_get(request).body, "from https");
    request.url = redirector.url() + "/down";
    EXPECT_THROW((void)http_get(request), HttpError) << "https must not be redirected to http";
    EXPECT_TRUE(plain.requests().empty());
}

TEST_F(Https, APlainTextClientGetsNoAnswerFromATlsServer) {
    FakeHttpServer server(answer(200, "secret"), files_);
    const std::string plain_url = "http://" + server.url().substr(std::string("https://").size());
    EXPECT_THROW((void)http_get(get(plain_url)), HttpError);
}

}  // namespace
}  // namespace kepler::support

namespace kepler::support {
namespace {

TEST(HttpConnection, SendsMethodsBodiesAndHeadersAndReadsResponseHeaders) {
    FakeHttpServer server([](const FakeHttpServer::Request& r) {
        FakeHttpServer::Response response{r.method == "POST" ? 201 : 200, r.method + " " + r.body, {}};
        response.headers.emplace_back("X-Auth-Token", "t0k3n");
        return response;
    });
    HttpConnection connection;
    HttpRequest post;
    post.url = server.url() + "/login";
    post.method = "POST";
    post.body = R"({"UserName":"a"})";
    post.headers.emplace_back("X-Extra", "1");
    const HttpResponse created = connection.request(post);
    EXPECT_EQ(created.status, 201);
    EXPECT_EQ(created.body, R"(POST {"UserName":"a"})");
    EXPECT_EQ(created.headers.at("x-auth-token"), "t0k3n") << "response header names are lower-cased";
    HttpRequest get;
    get.url = server.url() + "/doc";
    get.basic_user = "u";
    get.basic_password = "p";
    const HttpResponse got = connection.request(get);  // the handle's POST options do not carry over
    EXPECT_EQ(got.body, "GET ");
    HttpRequest del;
    del.url = server.url() + "/session";
    del.method = "DELETE";
    EXPECT_EQ(connection.request(del).body, "DELETE ");
    const auto requests = server.requests();
    ASSERT_EQ(requests.size(), 3u);
    EXPECT_EQ(requests[0].headers.at("x-extra"), "1");
    EXPECT_EQ(requests[1].headers.at("authorization"), "Basic dTpw");
    EXPECT_EQ(requests[2].method, "DELETE");
    HttpRequest put = get;
    put.method = "PUT";
    EXPECT_THROW((void)connection.request(put), HttpError);
}

}  // namespace
}  // namespace kepler::support
