// /metrics over real HTTP (libcurl against the civetweb server): the text as rendered, gzip when the
// client accepts it (inflated with zlib: the same text), nothing on other paths, clear errors.
#include <gtest/gtest.h>

#include <curl/curl.h>
#include <zlib.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <stdexcept>
#include <thread>
#include <vector>

#include "export/metrics_server.hpp"

using namespace kepler::estimate;

namespace {

struct Response {
    long status = 0;
    std::string headers, body;
};

size_t append(char* data, size_t size, size_t n, void* user) {
    static_cast<std::string*>(user)->append(data, size * n);
    return size * n;
}

/// GET `url` with the raw Accept-Encoding `accept` (none when empty); the body is not decoded.
Response get(const std::string& url, const std::string& accept = "") {
    Response r;
    CURL* curl = curl_easy_init();
    curl_slist* headers = accept.empty() ? nullptr : curl_slist_append(nullptr, ("Accept-Encoding: " + accept).c_str());
    curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, append);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, &r.body);
    curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, append);
    curl_easy_setopt(curl, CURLOPT_HEADERDATA, &r.headers);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT, 10L);
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    if (curl_easy_perform(curl) == CURLE_OK) curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &r.status);
    curl_slist_free_all(headers);
    curl_easy_cleanup(curl);
    return r;
}

std::string gunzip(const std::string& data) {
    z_stream z{};
    EXPECT_EQ(inflateInit2(&z, 15 + 16), Z_OK);
    z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
    z.avail_in = static_cast<uInt>(data.size());
    std::string out;
    char buffer[65536];
    int rc = Z_OK;
    while (rc == Z_OK) {
        z.next_out = reinterpret_cast<Bytef*>(buffer);
        z.avail_out = sizeof buffer;
        rc = inflate(&z, Z_NO_FLUSH);
        out.append(buffer, sizeof buffer - z.avail_out);
    }
    inflateEnd(&z);
    EXPECT_EQ(rc, Z_STREAM_END) << "a whole gzip stream";
    return out;
}

/// Enough series to span several chunks and gzip blocks.
Exposition sample_exposition(int scrape) {
    Exposition out;
    Exposition::Family& f = out.family("kepler_test_joules_total", "Test energy", MetricType::counter);
    for (int i = 0; i < 5000; ++i) out.add(f, {{"pid", std::to_string(i)}, {"scrape", std::to_string(scrape)}}, i * 0.5);
    out.add("kepler_test_up", "Up", MetricType::gauge, {}, 1);
    return out;
}

TEST(MetricsServer, ServesTheRenderedTextPlainAndGzipped) {
    std::atomic<int> scrapes{0};
    MetricsServer server("127.0.0.1:0", [&] { return sample_exposition(scrapes.fetch_add(1) + 1); });
    const std::string address = server.bound_address();
    ASSERT_NE(address, "127.0.0.1:0") << "the port the kernel chose";
    const std::string url = "http://" + address + "/metrics";

    const Response plain = get(url);
    EXPECT_EQ(plain.status, 200);
    EXPECT_EQ(plain.body, sample_exposition(1).text());
    EXPECT_NE(plain.headers.find("Content-Type: text/plain; version=0.0.4"), std::string::npos) << plain.headers;
    EXPECT_EQ(plain.headers.find("Content-Encoding"), std::string::npos);

    const Response gzipped = get(url, "deflate, gzip;q=1.0");
    EXPECT_EQ(gzipped.status, 200);
    EXPECT_NE(gzipped.headers.find("Content-Encoding: gzip"), std::string::npos) << gzipped.headers;
    EXPECT_LT(gzipped.body.size(), plain.body.size() / 4) << "compressed";
    EXPECT_EQ(gunzip(gzipped.body), sample_exposition(2).text());

    const Response refused = get(url, "gzip;q=0, identity");
    EXPECT_EQ(refused.headers.find("Content-Encoding"), std::string::npos) << "q=0 refuses gzip";
    EXPECT_EQ(refused.body, sample_exposition(3).text());

    EXPECT_EQ(get("http://" + address + "/other").status, 404);
    EXPECT_EQ(scrapes.load(), 3) << "one render per scrape, none for other paths";
}

TEST(MetricsServer, ConcurrentScrapesEachGetAWholeExposition) {
    // Two civetweb workers render at once (Prometheus beside an operator's curl): each response is whole.
    std::atomic<int> renders{0};
    MetricsServer server("127.0.0.1:0", [&] {
        renders.fetch_add(1);
        return sample_exposition(0);
    });
    const std::string url = "http://" + server.bound_address() + "/metrics", expected = sample_exposition(0).text();
    std::atomic<int> whole{0};
    std::vector<std::thread> scrapers;
    for (int t = 0; t < 3; ++t) {
        scrapers.emplace_back([&, t] {
            for (int i = 0; i < 10; ++i) {
                const Response r = t == 0 ? get(url) : get(url, "gzip");
                if (r.status == 200 && (t == 0 ? r.body : gunzip(r.body)) == expected) whole.fetch_add(1);
            }
        });
    }
    for (std::thread& s : scrapers) s.join();
    EXPECT_EQ(whole.load(), 30);
    EXPECT_EQ(renders.load(), 30);
}

TEST(MetricsServer, OtherPathsAreAnsweredConcurrentlyWithWholeErrors) {
    // civetweb's own error page formats a Date header with gmtime()'s shared buffer; the server writes
    // its errors itself, so workers answering at once share nothing (TSan runs this test in CI).
    std::atomic<int> renders{0};
    MetricsServer server("127.0.0.1:0", [&] {
        renders.fetch_add(1);
        return Exposition{};
    });
    const std::string url = "http://" + server.bound_address() + "/other";
    std::atomic<int> whole{0};
    std::vector<std::thread> clients;
    for (int t = 0; t < 4; ++t) {
        clients.emplace_back([&] {
            for (int i = 0; i < 10; ++i) {
                const Response r = get(url);
                if (r.status == 404 && r.body.starts_with("404 ") && r.headers.find("HTTP/1.1 404 Not Found") == 0) whole.fetch_add(1);
            }
        });
    }
    for (std::thread& c : clients) c.join();
    EXPECT_EQ(whole.load(), 40);
    EXPECT_EQ(renders.load(), 0);
}

/// A client that connects to `address` ("HOST:PORT") and then sends `prefix` of a request, one byte
/// every `drip` (slow-loris), or nothing at all when `prefix` is empty (idle). Closed on destruction.
class HeldConnection {
public:
    HeldConnection(const std::string& address, std::string prefix, std::chrono::milliseconds drip)
        : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {
        sockaddr_in to{};
        to.sin_family = AF_INET;
        to.sin_port = htons(static_cast<uint16_t>(std::stoi(address.substr(address.rfind(':') + 1))));
        ::inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
        connected_ = ::connect(fd_, reinterpret_cast<const sockaddr*>(&to), sizeof to) == 0;
        if (!prefix.empty()) {
            dripper_ = std::thread([this, prefix = std::move(prefix), drip] {
                for (char c : prefix) {
                    if (stop_.load() || ::send(fd_, &c, 1, MSG_NOSIGNAL) != 1) return;
                    for (auto waited = std::chrono::milliseconds(0); waited < drip && !stop_.load(); waited += std::chrono::milliseconds(10)) {
                        std::this_thread::sleep_for(std::chrono::milliseconds(10));
                    }
                }
            });
        }
    }
    ~HeldConnection() {
        stop_.store(true);
        if (dripper_.joinable()) dripper_.join();
        ::close(fd_);
    }
    HeldConnection(const HeldConnection&) = delete;
    HeldConnection& operator=(const HeldConnection&) = delete;
    [[nodiscard]] bool connected() const { return connected_; }

private:
    int fd_;
    bool connected_ = false;
    std::atomic<bool> stop_{false};
    std::thread dripper_;
};

double seconds_since(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

TEST(MetricsServer, IdleAndSlowClientsDoNotStallScrapes) {
    // Fewer held connections than workers: the scraper always finds a free worker. Twice as many as
    // workers: held connections are dropped once their request timeout passes, so the scrape waits at
    // most about that timeout (the bound is the feature: without it they would hold workers for ever).
    const ListenerLimits limits{4, std::chrono::milliseconds(1000)};
    MetricsServer server("127.0.0.1:0", [] { return sample_exposition(0); }, limits);
    const std::string url = "http://" + server.bound_address() + "/metrics";
    const std::string slow_request = "GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: " + std::string(200, 'a');
    for (int held : {limits.workers - 1, 2 * limits.workers}) {
        std::vector<std::unique_ptr<HeldConnection>> clients;
        for (int i = 0; i < held; ++i) {
            clients.push_back(std::make_unique<HeldConnection>(server.bound_address(), i % 2 ? slow_request : "",
                                                               std::chrono::milliseconds(200)));
            ASSERT_TRUE(clients.back()->connected());
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(100));  // every held connection has a worker or waits
        const auto start = std::chrono::steady_clock::now();
        const Response r = get(url);
        const double took = seconds_since(start);
        EXPECT_EQ(r.status, 200) << held << " held connections";
        EXPECT_LT(took, 6.0) << held << " held connections kept the scrape waiting " << took << " s (request timeout 1 s: 2 s at most)";
    }
}

TEST(MetricsServer, AFailingRenderIsAnErrorResponseNotACrash) {
    MetricsServer server("127.0.0.1:0", []() -> Exposition { throw std::runtime_error("snapshot failed"); });
    const Response r = get("http://" + server.bound_address() + "/metrics");
    EXPECT_EQ(r.status, 500);
    EXPECT_NE(r.body.find("snapshot failed"), std::string::npos) << r.body;
}

TEST(MetricsServer, APortInUseIsAClearError) {
    MetricsServer first("127.0.0.1:0", [] { return Exposition{}; });
    const std::string taken = first.bound_address();
    try {
        MetricsServer second(taken, [] { return Exposition{}; });
        FAIL() << "a second server on " << taken;
    } catch (const std::runtime_error& e) {
        EXPECT_NE(std::string(e.what()).find("cannot serve /metrics on " + taken), std::string::npos) << e.what();
    }
}

TEST(AcceptsGzip, ReadsTheCodingsAndTheirWeights) {
    EXPECT_TRUE(accepts_gzip("gzip"));
    EXPECT_TRUE(accepts_gzip("identity, gzip"));
    EXPECT_TRUE(accepts_gzip(" deflate , gzip ; q=0.5"));
    EXPECT_FALSE(accepts_gzip("gzip;q=0"));
    EXPECT_FALSE(accepts_gzip("gzip; q=0.000"));
    EXPECT_FALSE(accepts_gzip("identity"));
    EXPECT_FALSE(accepts_gzip("x-gzipped"));
    EXPECT_FALSE(accepts_gzip(""));
}

}  // namespace
