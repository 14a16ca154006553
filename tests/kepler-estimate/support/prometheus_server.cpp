#include "support/prometheus_server.hpp"

#include <gtest/gtest.h>

#include <curl/curl.h>
#include <fmt/format.h>

#include <fstream>
#include <nlohmann/json.hpp>

namespace estimate_test {

namespace fs = std::filesystem;

namespace {

std::string escape(const std::string& text) {
    char* e = curl_easy_escape(nullptr, text.c_str(), static_cast<int>(text.size()));
    std::string out(e);
    curl_free(e);
    return out;
}

}  // namespace

std::optional<double> query(int port, const std::string& promql) {
    std::string body;
    if (http_get(fmt::format("http://127.0.0.1:{}/api/v1/query?query={}", port, escape(promql)), body) != 200) return std::nullopt;
    const auto doc = nlohmann::json::parse(body, nullptr, false);
    if (doc.is_discarded() || doc["status"] != "success" || doc["data"]["result"].empty()) return std::nullopt;
    // One value is asked for: a query that matches several series is the test's mistake (it would read
    // whichever series Prometheus lists first).
    if (doc["data"]["result"].size() > 1) {
        ADD_FAILURE() << promql << " matches " << doc["data"]["result"].size() << " series: " << doc["data"]["result"].dump();
        return std::nullopt;
    }
    return std::stod(doc["data"]["result"][0]["value"][1].get<std::string>());
}

bool answers(int port, const std::string& promql) {
    const auto result = nlohmann::json::parse(query_json(port, promql), nullptr, false);
    return !result.is_discarded() && result.is_array() && !result.empty();
}

std::string query_json(int port, const std::string& promql) {
    std::string body;
    if (http_get(fmt::format("http://127.0.0.1:{}/api/v1/query?query={}", port, escape(promql)), body) != 200) return {};
    const auto doc = nlohmann::json::parse(body, nullptr, false);
    return doc.is_discarded() ? std::string() : doc["data"]["result"].dump();
}

bool wait_for(const std::function<bool()>& done, std::chrono::seconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
        if (done()) return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(250));
    }
    return done();
}

Child start_prometheus(const fs::path& dir, int target_port, int port) {
    std::ofstream(dir / "prometheus.yml") << fmt::format(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n  - job_name: kepler\n"
        "    static_configs:\n      - targets: ['127.0.0.1:{}']\n",
        target_port);
    return Child({"/usr/bin/prometheus", "--config.file=" + (dir / "prometheus.yml").string(),
                  "--storage.tsdb.path=" + (dir / "data").string(), fmt::format("--web.listen-address=127.0.0.1:{}", port)},
                 (dir / "prometheus.log").string());
}

FakeRapl::FakeRapl(const fs::path& root) : root_(root) {
    for (const auto& [dir, name] : {std::pair{"intel-rapl:0", "package-0"}, std::pair{"intel-rapl:0:0", "dram"}}) {
        fs::create_directories(root_ / "class/powercap" / dir);
        std::ofstream(root_ / "class/powercap" / dir / "name") << name << "\n";
        std::ofstream(root_ / "class/powercap" / dir / "max_energy_range_uj") << "262143328850\n";
        write(dir, 1'000'000);
    }
    thread_ = std::thread([this] { run(); });
}

FakeRapl::~FakeRapl() {
    stop_ = true;
    thread_.join();
}

void FakeRapl::write(const std::string& dir, uint64_t uj) {
    const fs::path file = root_ / "class/powercap" / dir / "energy_uj";
    std::ofstream(file.string() + ".tmp") << uj << "\n";
    fs::rename(file.string() + ".tmp", file);  // the collector never reads half a number
}

void FakeRapl::run() {
    // Counters follow the wall clock (not the loop count), so their power holds under a loaded machine.
    const auto start = std::chrono::steady_clock::now();
    while (!stop_) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        write("intel-rapl:0", 1'000'000 + static_cast<uint64_t>(seconds * kPackageWatts * 1e6));
        write("intel-rapl:0:0", 1'000'000 + static_cast<uint64_t>(seconds * kDramWatts * 1e6));
    }
}

}  // namespace estimate_test
