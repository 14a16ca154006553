#include "energy/gpu/mig_activity.hpp"

#include <algorithm>
#include <cmath>
#include <optional>

#include <fmt/format.h>

#include "common/text_io.hpp"

namespace kepler::collect {

std::unique_ptr<MigActivity> MigActivity::make(const nvml::Library& lib, nvml::Device gpu, uint32_t nvml_index,
                                               const std::vector<std::pair<unsigned, uint32_t>>& records,
                                               const std::function<DcgmActivityReader*()>& dcgm, std::string& note) {
    std::unique_ptr<MigActivity> activity(new MigActivity(lib, gpu, nvml_index));
    for (const auto& [id, record] : records) {
        auto it = std::find_if(activity->instances_.begin(), activity->instances_.end(),
                               [&](const Instance& g) { return g.gpu_instance_id == id; });
        if (it == activity->instances_.end()) it = activity->instances_.insert(activity->instances_.end(), Instance{id, {}});
        it->records.push_back(record);
    }
    if (activity->instances_.empty()) return nullptr;
    std::string why_not_gpm;
    if (activity->start_gpm(why_not_gpm)) return activity;
    activity->dcgm_ = dcgm ? dcgm() : nullptr;
    if (activity->dcgm_ == nullptr) {
        note = fmt::format("{}: its MIG instances' processes share its active power equally (no --dcgm-endpoint)", why_not_gpm);
        return nullptr;
    }
    note = fmt::format("{}: its MIG instances' activity from dcgm-exporter at {}", why_not_gpm, activity->dcgm_->url());
    return activity;
}

MigActivity::~MigActivity() {
    for (Instance& g : instances_) {
        if (g.previous != nullptr) lib_.gpm_sample_free(g.previous);
        if (g.current != nullptr) lib_.gpm_sample_free(g.current);
    }
}

/// GPM sample buffers for each GPU instance, where the driver and the GPU support GPM; false (with why
/// not) where they do not.
bool MigActivity::start_gpm(std::string& why_not) {
    if (!lib_.has_gpm()) {
        why_not = "the driver has no GPM calls";
        return false;
    }
    nvml::GpmSupport support{nvml::kGpmSupportVersion, 0};
    if (const nvml::Return rc = lib_.gpm_query_support(gpu_, &support); rc != nvml::kSuccess || support.isSupportedDevice == 0) {
        why_not = fmt::format("no GPM ({})", rc != nvml::kSuccess ? lib_.describe(rc) : "Hopper and later GPUs have it");
        return false;
    }
    for (Instance& g : instances_) {
        if (lib_.gpm_sample_alloc(&g.previous) != nvml::kSuccess || lib_.gpm_sample_alloc(&g.current) != nvml::kSuccess) {
            why_not = "GPM sample buffers could not be allocated";
            for (Instance& allocated : instances_) {
                if (allocated.previous != nullptr) lib_.gpm_sample_free(allocated.previous);
                if (allocated.current != nullptr) lib_.gpm_sample_free(allocated.current);
                allocated.previous = allocated.current = nullptr;
            }
            return false;
        }
    }
    request_ = std::make_unique<nvml::GpmMetricsGet>();
    return true;
}

void MigActivity::set_active(std::vector<keplershm_gpu_device>& devices, const Instance& g, bool measured, uint64_t active_ns) {
    for (const uint32_t record : g.records) {
        uint32_t& flags = devices[record].flags;
        flags = measured ? (flags | KEPLERSHM_GPU_ACTIVE_VALID) : (flags & ~uint32_t{KEPLERSHM_GPU_ACTIVE_VALID});
        devices[record].active_ns = measured ? active_ns : 0;
    }
}

void MigActivity::read(std::vector<keplershm_gpu_device>& devices) {
    if (dcgm_ != nullptr) read_dcgm_exporter(devices);
    else read_gpm(devices);
}

void MigActivity::forget() {
    for (Instance& g : instances_) g.have_previous = false;
}

/// Each GPU instance's active time since its previous sample: GPM's graphics activity (the share of the
/// time any of its processes was active) times that span. A failed sample leaves the instance's interval
/// unmeasured and makes the next sample a new start.
void MigActivity::read_gpm(std::vector<keplershm_gpu_device>& devices) {
    for (Instance& g : instances_) {
        const nvml::Return rc = lib_.gpm_mig_sample(gpu_, g.gpu_instance_id, g.current);
        const uint64_t now = monotonic_now_ns();
        bool measured = false;
        uint64_t active_ns = 0;
        if (rc == nvml::kSuccess && g.have_previous && now > g.previous_ns) {
            nvml::GpmMetricsGet& request = *request_;
            request.version = nvml::kGpmMetricsGetVersion;
            request.numMetrics = 1;
            request.sample1 = g.previous;
            request.sample2 = g.current;
            request.metrics[0] = nvml::GpmMetric{};
            request.metrics[0].metricId = nvml::kGpmMetricGraphicsUtil;
            if (lib_.gpm_metrics(&request) == nvml::kSuccess && request.metrics[0].nvmlReturn == nvml::kSuccess &&
                std::isfinite(request.metrics[0].value)) {
                const double share = std::clamp(request.metrics[0].value, 0.0, 100.0) / 100.0;
                active_ns = static_cast<uint64_t>(share * static_cast<double>(now - g.previous_ns));
                measured = true;
            }
        }
        set_active(devices, g, measured, active_ns);
        g.have_previous = rc == nvml::kSuccess;
        if (rc == nvml::kSuccess) {
            std::swap(g.previous, g.current);
            g.previous_ns = now;
        }
    }
}

/// Each GPU instance's active time since the previous read: dcgm-exporter's latest activity ratio (an
/// average over its own sampling period) times the span. Unmeasured while the exporter has not answered
/// recently or does not list the instance.
void MigActivity::read_dcgm_exporter(std::vector<keplershm_gpu_device>& devices) {
    const uint64_t now = monotonic_now_ns();
    for (Instance& g : instances_) {
        const std::optional<double> ratio = dcgm_->activity(nvml_index_, g.gpu_instance_id, now, dcgm_->max_age_ns());
        const bool measured = ratio.has_value() && g.have_previous && now > g.previous_ns;
        set_active(devices, g, measured, measured ? static_cast<uint64_t>(*ratio * static_cast<double>(now - g.previous_ns)) : 0);
        g.have_previous = true;
        g.previous_ns = now;
    }
}

}  // namespace kepler::collect
