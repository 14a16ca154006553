#include "energy/redfish/redfish_source.hpp"

#include <fmt/format.h>

#include <condition_variable>
#include <mutex>
#include <thread>

#include "common/text_io.hpp"
#include "keplershm/keplershm.hpp"
#include "support/http/http_client.hpp"
#include "support/log/log.hpp"

namespace kepler::collect {

namespace {

constexpr double kMicrojoulesPerKwh = 3.6e12;

/// One zone: held power, the supply's own counter where published, and what the frames have seen.
struct ZoneState {
    ZoneState(uint64_t max_age_ns, std::string origin)
        : power(max_age_ns), total(std::move(origin), ceiling_watts(KEPLERSHM_ZONE_PLATFORM)) {}
    HeldPowerIntegral power;
    // Counter discipline: between two values of the BMC's counter, held power fills in; at each new
    // value the total is the counter's (ZoneTotal spreads the correction).
    std::optional<double> counter_kwh;
    double counter_uj = 0;      // the counter's energy since its first value
    double held_at_counter = 0; // the held integral when the counter last changed
    uint64_t counter_at_ns = 0; // when it last changed
    bool ever_fresh = false;
    bool stale = true;
    bool warned_no_number = false;
    ZoneTotal total;

    [[nodiscard]] std::optional<double> meter_total_uj(uint64_t now_ns) const {
        const std::optional<double> held = power.total_uj(now_ns);
        if (!held) return std::nullopt;
        return counter_kwh ? counter_uj + (*held - held_at_counter) : *held;
    }
};

class RedfishSource final : public EnergySource {
public:
    RedfishSource(BmcConfig config, std::unique_ptr<RedfishClient> client, std::vector<RedfishMeter> meters)
        : config_(std::move(config)), client_(std::move(client)), meters_(std::move(meters)) {
        const auto max_age_ns = static_cast<uint64_t>(std::chrono::nanoseconds(config_.max_age).count());
        for (const RedfishMeter& meter : meters_) {
            keplershm_zone_info info{};
            keplershm::set_text(info.name, redfish_zone_name(meter));
            info.kind = KEPLERSHM_ZONE_PLATFORM;
            info.power_source = KEPLERSHM_POWER_REDFISH;
            info.meter_detail = meter.detail;
            infos_.push_back(info);
            zones_.emplace_back(max_age_ns, fmt::format("{} (redfish BMC {})", redfish_zone_name(meter), config_.id));
        }
        poll_once();  // the first readings before the first frame
        thread_ = std::thread([this] { poll_loop(); });
    }

    ~RedfishSource() override {
        {
            std::lock_guard lock(mutex_);
            stopping_ = true;
        }
        wake_.notify_all();
        thread_.join();  // a request in flight ends within its timeout
    }

    std::string describe() const override { return fmt::format("redfish BMC {} ({})", config_.id, config_.endpoint); }
    const std::vector<keplershm_zone_info>& zones() const noexcept override { return infos_; }

    void read(std::span<keplershm_zone_sample> samples, uint64_t frame_end_ns) override {
        std::lock_guard lock(mutex_);
        const uint64_t now = frame_end_ns;
        for (size_t i = 0; i < zones_.size() && i < samples.size(); ++i) {
            ZoneState& z = zones_[i];
            keplershm_zone_sample& sample = samples[i];
            sample.read_time_ns = z.power.last_reading_ns();
            if (z.power.stale(now)) {
                if (!z.stale && z.ever_fresh) {
                    log_warn("redfish: zone {}: the newest reading is older than {} ms: stale, not attributed until the "
                             "BMC answers again", keplershm::get_text(infos_[i].name), config_.max_age.count());
                }
                z.stale = true;
                z.total.publish_invalid(KEPLERSHM_ZONE_STALE, sample);
                continue;
            }
            if (z.stale) z.total.rebase();  // the gap's energy is not known in time: counting restarts
            z.stale = false;
            z.ever_fresh = true;
            z.total.publish(*z.meter_total_uj(now), now, z.counter_kwh ? 0u : uint32_t{KEPLERSHM_ZONE_INTEGRATED}, sample);
        }
    }

private:
    void poll_loop() {
        std::unique_lock lock(mutex_);
        while (!stopping_) {
            const auto next = std::chrono::steady_clock::now() + config_.poll_interval;
            lock.unlock();
            poll_once();
            lock.lock();
            wake_.wait_until(lock, next, [this] { return stopping_; });
        }
    }

    /// One round of requests, without the lock; the readings are applied under it.
    void poll_once() {
        try {
            const std::vector<RedfishReading> readings = client_->read(meters_);
            const uint64_t arrived = monotonic_now_ns();
            std::lock_guard lock(mutex_);
            for (size_t i = 0; i < readings.size() && i < zones_.size(); ++i) apply(i, readings[i], arrived);
            if (!last_error_.empty()) log_info("redfish: BMC {} answers again", config_.id);
            last_error_.clear();
        } catch (const std::exception& e) {
            // Said once per distinct problem, not every poll: the zones go stale on their own.
            std::lock_guard lock(mutex_);
            if (e.what() != last_error_) log_warn("{}; zones go stale after {} ms without a reading", e.what(), config_.max_age.count());
            last_error_ = e.what();
        }
    }

    void apply(size_t i, const RedfishReading& reading, uint64_t arrived_ns) {
        ZoneState& z = zones_[i];
        if (!reading.watts) {
            if (!z.warned_no_number) {
                log_warn("redfish: zone {}: the BMC gives no usable power reading ({})", keplershm::get_text(infos_[i].name),
                         meters_[i].url);
            }
            z.warned_no_number = true;
            return;
        }
        z.warned_no_number = false;
        z.power.add(arrived_ns, *reading.watts);
        if (!reading.energy_kwh) return;
        const double held = *z.power.total_uj(arrived_ns);
        if (z.counter_kwh && *reading.energy_kwh == *z.counter_kwh) return;
        const double step_uj = z.counter_kwh ? (*reading.energy_kwh - *z.counter_kwh) * kMicrojoulesPerKwh : 0.0;
        if (z.counter_kwh && step_uj > 0 &&
            within_ceiling(step_uj, arrived_ns - z.counter_at_ns, ceiling_watts(KEPLERSHM_ZONE_PLATFORM))) {
            z.counter_uj += step_uj;
        } else if (z.counter_kwh) {
            // The counter went back (reset, a replaced supply) or jumped further than the supply could
            // deliver: continue from its new value, held power filling in (the total keeps its precision).
            if (step_uj > 0) log_warn("redfish: zone {}: the energy counter jumped by {:.6g} kWh: not energy, counting continues "
                                      "from its new value", keplershm::get_text(infos_[i].name), step_uj / kMicrojoulesPerKwh);
            z.counter_uj += held - z.held_at_counter;
        }
        z.counter_kwh = reading.energy_kwh;
        z.counter_at_ns = arrived_ns;
        z.held_at_counter = held;
    }

    BmcConfig config_;
    std::unique_ptr<RedfishClient> client_;  // the poll thread's only (the constructor's before it starts)
    std::vector<RedfishMeter> meters_;
    std::vector<keplershm_zone_info> infos_;

    std::mutex mutex_;
    std::condition_variable wake_;
    bool stopping_ = false;
    std::vector<ZoneState> zones_;
    std::string last_error_;
    std::thread thread_;
};

}  // namespace

std::string redfish_zone_name(const RedfishMeter& meter) {
    std::string name = meter.chassis_id + "/" + meter.source_id;
    constexpr size_t kRoom = sizeof(keplershm_zone_info::name) - 1;
    if (name.size() > kRoom) name = name.substr(name.size() - kRoom);  // the source's end tells supplies apart
    return name;
}

std::unique_ptr<EnergySource> make_redfish_source(const BmcConfig& config) {
    if (config.insecure) {
        log_warn("redfish: BMC {} ({}): TLS verification is OFF (insecure): anyone on the path can read its "
                 "credentials and forge its readings; use a CA file outside the lab", config.id, config.endpoint);
    }
    if (config.allow_plain_http && !config.username.empty() && !support::is_https(config.endpoint)) {
        log_warn("redfish: BMC {} ({}): credentials go over plain http, in clear text (allowed): anyone on the path can "
                 "read them; use https outside the lab", config.id, config.endpoint);
    }
    auto client = std::make_unique<RedfishClient>(config);
    std::vector<RedfishMeter> meters = client->discover();
    for (const RedfishMeter& m : meters) {
        log_info("redfish: BMC {}: zone {} ({} \"{}\")", config.id, redfish_zone_name(m), keplershm::meter_detail_name(m.detail),
                 m.source_name);
    }
    return std::make_unique<RedfishSource>(config, std::move(client), std::move(meters));
}

}  // namespace kepler::collect
