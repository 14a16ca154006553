// A real Prometheus server for end-to-end tests (Debian's `prometheus`), PromQL queries against it, and a
// fake RAPL tree whose counters advance on their own thread for the real collector to read.
#pragma once

#include <atomic>
#include <chrono>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <thread>

#include "support/subprocess.hpp"

namespace estimate_test {

/// The single value of an instant PromQL query, or nullopt when it has no result yet (and a test failure
/// when it matches more than one series).
[[nodiscard]] std::optional<double> query(int port, const std::string& promql);

/// Whether an instant PromQL query returns at least one series (a dashboard panel that has data).
[[nodiscard]] bool answers(int port, const std::string& promql);

/// The result of an instant PromQL query as Prometheus's JSON (every series with its labels), for a
/// failure message; "" when the query failed.
[[nodiscard]] std::string query_json(int port, const std::string& promql);

/// Polls `done` every 250 ms until it holds or `timeout` passed; its last answer.
bool wait_for(const std::function<bool()>& done, std::chrono::seconds timeout);

/// Prometheus scraping 127.0.0.1:`target_port` every second, listening on `port`, its files in `dir`.
[[nodiscard]] Child start_prometheus(const std::filesystem::path& dir, int target_port, int port);

/// A fake powercap tree under `root` with package-0 and its dram zone, whose counters advance on their own
/// thread (about 20 W and 4 W), as RAPL's do.
class FakeRapl {
public:
    explicit FakeRapl(const std::filesystem::path& root);
    FakeRapl(const FakeRapl&) = delete;
    FakeRapl& operator=(const FakeRapl&) = delete;
    ~FakeRapl();
    static constexpr double kPackageWatts = 20.0;
    static constexpr double kDramWatts = 4.0;

private:
    void write(const std::string& dir, uint64_t uj);
    void run();

    std::filesystem::path root_;
    std::atomic<bool> stop_{false};
    std::thread thread_;
};

}  // namespace estimate_test
