// dcgm-exporter's reader thread (dcgm_exporter.hpp): scrapes over support/http and keeps the latest answer.
#include "energy/gpu/dcgm_exporter.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "common/text_io.hpp"
#include "support/http/http_client.hpp"
#include "support/log/log.hpp"

namespace kepler::collect {

namespace {

constexpr size_t kMaxBody = 32u << 20;  // dcgm-exporter on 8 GPUs answers a few hundred kB

}  // namespace

DcgmActivityReader::DcgmActivityReader(DcgmSettings settings)
    : settings_(std::move(settings)), url_(dcgm_metrics_url(settings_.endpoint)), thread_([this] { run(); }) {}

DcgmActivityReader::~DcgmActivityReader() {
    {
        std::lock_guard lock(mutex_);
        stop_ = true;
    }
    wake_.notify_all();
    thread_.join();
}

uint64_t DcgmActivityReader::max_age_ns() const noexcept {
    return std::max<uint64_t>(10'000'000'000ull, 3 * static_cast<uint64_t>(std::chrono::nanoseconds(settings_.refresh).count()));
}

std::optional<double> DcgmActivityReader::activity(uint32_t gpu, uint32_t gpu_instance, uint64_t now_ns, uint64_t max_age_ns) const {
    std::lock_guard lock(mutex_);
    if (latest_ns_ == 0 || now_ns > latest_ns_ + max_age_ns) return std::nullopt;
    const auto it = latest_.find({gpu, gpu_instance});
    if (it == latest_.end()) return std::nullopt;
    return it->second;
}

void DcgmActivityReader::run() {
    std::string last_error;
    std::unique_lock lock(mutex_);
    while (!stop_) {
        lock.unlock();
        scrape(last_error);
        lock.lock();
        wake_.wait_for(lock, settings_.refresh, [this] { return stop_; });
    }
}

void DcgmActivityReader::scrape(std::string& last_error) {
    MigActivities activities;
    try {
        support::HttpRequest request;
        request.url = url_;
        request.accept = "text/plain";
        request.max_bytes = kMaxBody;
        request.timeout_ms = 5'000;
        const support::HttpResponse response = support::http_get(request);
        if (response.status != 200) throw CollectError(fmt::format("{} answered HTTP {}", url_, response.status));
        activities = parse_dcgm_activities(response.body);
    } catch (const std::exception& e) {  // HttpError, CollectError
        if (e.what() != last_error) log_warn("dcgm-exporter: {}: MIG instances' activity from it is unknown until it answers", e.what());
        last_error = e.what();
        return;
    }
    if (!last_error.empty() || latest_ns_ == 0) {
        log_info("dcgm-exporter {}: activity of {} MIG GPU instance(s)", url_, activities.size());
    }
    last_error.clear();
    std::lock_guard lock(mutex_);
    latest_ = std::move(activities);
    latest_ns_ = monotonic_now_ns();
}

}  // namespace kepler::collect
