// dcgm_exporter.hpp — MIG instances' activity from NVIDIA's dcgm-exporter, for GPUs whose driver offers no
// GPM (nvml_source.cpp prefers GPM): its Prometheus text gives DCGM_FI_PROF_GR_ENGINE_ACTIVE per GPU
// (`gpu`, NVML's index) and GPU instance (`GPU_I_ID`), the ratio of time the graphics engine was active,
// as Kepler reads it. Fetched on a thread of its own: the collector's loop never waits for the exporter.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>

namespace kepler::collect {

struct DcgmSettings {
    std::string endpoint;  // http(s)://host:port[/path]; "/metrics" when no path is given
    std::chrono::milliseconds refresh{2000};  // between scrapes (dcgm-exporter itself updates every 30 s by default)
};

/// (NVML GPU index, GPU instance id) → activity, 0 to 1.
using MigActivities = std::map<std::pair<uint32_t, uint32_t>, double>;

/// The endpoint as it is scraped: checked (http or https, a host, no credentials, query or fragment) and
/// "/metrics" added when it names no path. Throws CollectError saying what is wrong.
[[nodiscard]] std::string dcgm_metrics_url(std::string_view endpoint);

/// Every DCGM_FI_PROF_GR_ENGINE_ACTIVE sample of dcgm-exporter's text that names a GPU and a GPU instance
/// (other metrics and whole-GPU samples are skipped). Throws CollectError naming the line for a malformed
/// sample of that metric, a label it cannot read, or a value that is no ratio.
[[nodiscard]] MigActivities parse_dcgm_activities(std::string_view text);

/// Scrapes the endpoint every `refresh` on its own thread and keeps the latest answer. Each change of state
/// (first answer, a failure, answers again) is logged once.
class DcgmActivityReader {
public:
    explicit DcgmActivityReader(DcgmSettings settings);
    ~DcgmActivityReader();
    DcgmActivityReader(const DcgmActivityReader&) = delete;
    DcgmActivityReader& operator=(const DcgmActivityReader&) = delete;

    /// A GPU instance's activity from a scrape younger than `max_age` (CLOCK_MONOTONIC), else nothing. Any thread.
    [[nodiscard]] std::optional<double> activity(uint32_t gpu, uint32_t gpu_instance, uint64_t now_ns, uint64_t max_age_ns) const;
    [[nodiscard]] const std::string& url() const noexcept { return url_; }
    /// The age beyond which a scrape no longer counts: three refreshes, at least 10 s.
    [[nodiscard]] uint64_t max_age_ns() const noexcept;

private:
    void run();
    void scrape(std::string& last_error);

    DcgmSettings settings_;
    std::string url_;
    mutable std::mutex mutex_;
    std::condition_variable wake_;
    bool stop_ = false;
    MigActivities latest_;
    uint64_t latest_ns_ = 0;  // when latest_ was scraped; 0: never
    std::thread thread_;      // last: started once the members it uses exist
};

}  // namespace kepler::collect
