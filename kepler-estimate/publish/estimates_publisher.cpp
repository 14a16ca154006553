#include "publish/estimates_publisher.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

#include "keplershm/estimates.hpp"
#include "load/model_spec.hpp"

namespace kepler::estimate {

namespace {

constexpr uint32_t kNoIndex = keplershm::kNoEstimateIndex;
// PREFIX-<model> must be a segment name for the longest model name too.
constexpr size_t kMaxPrefix = keplershm::kMaxSegmentName - 1 - kMaxModelName;

/// The zones of one answer in the order the model gave them, each once (a model that named a zone twice
/// has its energy added up: an estimates answer has at most one row per zone).
std::vector<ZoneKey> zone_keys(const NodeEnergy& energy) {
    std::vector<ZoneKey> keys;
    for (const ZoneEnergy& z : energy.zones)
        if (std::find(keys.begin(), keys.end(), z.zone) == keys.end()) keys.push_back(z.zone);
    return keys;
}

std::vector<keplershm_zone_info> header_zones(const std::vector<ZoneKey>& keys) {
    std::vector<keplershm_zone_info> zones;
    for (const ZoneKey& key : keys) {
        keplershm_zone_info info{};
        // socket 0xffffffff is a zone the model predicts for the whole node (the `package="all"` label).
        const std::string name = key.socket == kWholeNode ? std::string(zone_name(key.kind))
                                                          : fmt::format("{}-{}", zone_name(key.kind), key.socket);
        keplershm::set_text(info.name, name);
        info.kind = zone_kind_to_protocol(key.kind);
        info.socket = key.socket;
        zones.push_back(info);
    }
    return zones;
}

bool same_zones(const std::vector<keplershm_zone_info>& a, const std::vector<keplershm_zone_info>& b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](const keplershm_zone_info& x, const keplershm_zone_info& y) {
        return x.kind == y.kind && x.socket == y.socket;
    });
}

keplershm_estimate row(uint32_t zone, uint32_t workload, uint64_t uj, double seconds) {
    keplershm_estimate r{};  // flags and reserved stay zero (PROTOCOL.md §8)
    r.zone_index = zone;
    r.workload_index = workload;
    r.energy_joules = static_cast<double>(uj) / 1e6;
    r.power_watts = r.energy_joules / seconds;
    return r;
}

}  // namespace

std::string estimates_segment_name(const std::string& prefix, const std::string& model) {
    bool usable = prefix.size() <= kMaxPrefix;
    try {
        keplershm::check_segment_name(prefix);
    } catch (const keplershm::Error&) {
        usable = false;
    }
    if (!usable) {
        throw std::invalid_argument(fmt::format(
            "--publish-estimates \"{}\": the prefix must be 1-{} of [A-Za-z0-9._-], not starting with '.' (segments are "
            "named PREFIX-<model>)", prefix, kMaxPrefix));
    }
    return prefix + "-" + model;
}

EstimatesPublisher::EstimatesPublisher(std::string prefix, std::chrono::milliseconds retry) : prefix_(std::move(prefix)), retry_(retry) {
    (void)estimates_segment_name(prefix_, "m");  // refuse a bad prefix at start, not at the first frame
}

std::vector<PublishNote> EstimatesPublisher::publish(const keplershm::FrameView& frame, const std::vector<ModelAnswer>& answers,
                                                     const std::string& primary, const Attribution& attribution) {
    std::vector<PublishNote> log;
    if (frame.interval_end_ns() <= frame.interval_start_ns()) return log;  // no energy over an empty interval
    for (const ModelAnswer& answer : answers) publish_one(frame, answer, answer.name == primary ? &attribution : nullptr, log);
    return log;
}

std::vector<PublishNote> EstimatesPublisher::heartbeat() {
    std::vector<PublishNote> log;
    for (auto& [model, channel] : channels_) {
        if (!channel.writer) continue;
        try {
            channel.writer->heartbeat();  // also notices another writer that took the name over
        } catch (const keplershm::Error& e) {
            fail(channel, fmt::format("model {}: estimates segment {}: {}", model, channel.writer->name(), e.what()), log);
        }
    }
    return log;
}

void EstimatesPublisher::fail(Channel& channel, std::string reason, std::vector<PublishNote>& log) const {
    channel.writer.reset();
    channel.retry_at = std::chrono::steady_clock::now() + retry_;
    if (reason != channel.last_failure) {
        log.push_back({true, fmt::format("{}; not published, tried again every {:.3g} s", reason,
                                         std::chrono::duration<double>(retry_).count())});
    }
    channel.last_failure = std::move(reason);
}

void EstimatesPublisher::publish_one(const keplershm::FrameView& frame, const ModelAnswer& answer,
                                     const Attribution* attribution, std::vector<PublishNote>& log) {
    Channel& channel = channels_[answer.name];
    if (channel.retry_at && std::chrono::steady_clock::now() < *channel.retry_at) return;
    const std::vector<ZoneKey> keys = zone_keys(answer.energy);
    fill_rows(frame, answer, keys, attribution, channel, log);
    if (rows_.empty()) return;
    try {
        const std::vector<keplershm_zone_info> zones = header_zones(keys);
        if (!channel.writer || !same_zones(zones, channel.zones) || answer.version != channel.version ||
            rows_.size() > channel.capacity) {
            channel.zones = zones;
            channel.version = answer.version;
            open(channel, answer.name, static_cast<uint32_t>(rows_.size()));
            log.push_back({false, fmt::format("model {}: publishing its estimates in segment {}", answer.name, channel.writer->name())});
            channel.retry_at.reset();
            channel.last_failure.clear();
        }
        keplershm::Draft draft = channel.writer->begin();
        keplershm_frame& out = draft.frame();
        out.producer_generation = frame.generation();
        out.producer_sequence = frame.sequence();
        out.interval_start_ns = frame.interval_start_ns();
        out.interval_end_ns = frame.interval_end_ns();
        out.interval_start_realtime_ns = frame.header().interval_start_realtime_ns;
        out.interval_end_realtime_ns = frame.header().interval_end_realtime_ns;
        for (const keplershm_estimate& r : rows_) draft.add_estimate(r);  // fits: capacity checked above
        channel.writer->commit(draft);
    } catch (const keplershm::Error& e) {
        fail(channel, fmt::format("model {}: cannot publish in {}: {}", answer.name, estimates_segment_name(prefix_, answer.name), e.what()),
             log);
    }
}

// Rows of one answer into rows_: one per zone, and for the primary one per (workload, zone) with the
// energy the attribution gave the workload's processes (processes without a workload have no row).
void EstimatesPublisher::fill_rows(const keplershm::FrameView& frame, const ModelAnswer& answer, const std::vector<ZoneKey>& keys,
                                   const Attribution* attribution, Channel& channel, std::vector<PublishNote>& log) {
    rows_.clear();
    const std::string& model = answer.name;
    const double seconds = static_cast<double>(frame.interval_end_ns() - frame.interval_start_ns()) / 1e9;
    for (uint32_t i = 0; i < keys.size(); ++i) {
        uint64_t uj = 0;
        for (const ZoneEnergy& z : answer.energy.zones)
            if (z.zone == keys[i]) uj += z.total_uj;
        rows_.push_back(row(i, kNoIndex, uj, seconds));
        if (rows_.back().power_watts > keplershm::kMaxEstimateWatts) {
            // Not a value the protocol allows (consumers would refuse the answer): this frame is not answered.
            log.push_back({true, fmt::format("model {}: frame {}: {} W in one zone is beyond {} W; not published", model,
                                             frame.sequence(), rows_.back().power_watts, keplershm::kMaxEstimateWatts)});
            rows_.clear();
            return;
        }
    }
    if (attribution == nullptr) return;
    const keplershm::Records<keplershm_workload> workloads = frame.workloads();
    const size_t wanted = rows_.size() + static_cast<size_t>(workloads.size()) * attribution->zones.size();
    if (wanted > kMaxPublishedRows) {
        if (!channel.said_too_many) {
            log.push_back({true, fmt::format("model {}: {} workload rows would exceed {} rows per answer: published without them",
                                             model, wanted - rows_.size(), kMaxPublishedRows)});
        }
        channel.said_too_many = true;
        return;
    }
    const keplershm::Records<keplershm_process> processes = frame.processes();
    workload_uj_.resize(attribution->zones.size());
    for (size_t z = 0; z < attribution->zones.size(); ++z) {
        const ZoneShares& shares = attribution->zones[z];
        std::vector<uint64_t>& uj = workload_uj_[z];
        uj.assign(workloads.size(), 0);
        for (uint32_t p = 0; p < processes.size() && p < shares.dynamic_uj.size(); ++p) {
            const uint32_t w = processes[p].workload_index;
            if (w < workloads.size()) uj[w] += shares.dynamic_uj[p] + shares.idle_uj[p];
        }
        const auto zone = static_cast<uint32_t>(std::find(keys.begin(), keys.end(), shares.node.zone) - keys.begin());
        if (zone == keys.size()) continue;  // cannot happen: the primary's zones are the ones attributed
        for (uint32_t w = 0; w < workloads.size(); ++w) rows_.push_back(row(zone, w, uj[w], seconds));
    }
}

void EstimatesPublisher::open(Channel& channel, const std::string& model, uint32_t rows) {
    // Retired first (keeping the name) so that the successor takes it at once: readers follow it to the
    // new generation as they follow a collector that restarted.
    if (channel.writer) channel.writer->close(/*keep_name=*/true);
    channel.writer.reset();
    keplershm::WriterOptions o;
    o.segment_kind = KEPLERSHM_SEGMENT_ESTIMATES;
    o.node_name = model;
    o.cpu_model = channel.version;
    o.cpu_count = 1;
    o.zones = channel.zones;
    // Room for twice the rows seen, so that a few more workloads do not make a new generation each frame.
    o.process_capacity = std::min<uint32_t>(kMaxPublishedRows, std::max<uint32_t>(64, 2 * rows));
    o.workload_capacity = 1;
    o.zone_capacity = 1;
    o.cpu_capacity = 1;
    o.string_capacity = 64;
    o.slot_count = 16;  // answers a consumer may fall behind by (kepler-estimate's external models remember 16 frames)
    channel.writer.emplace(estimates_segment_name(prefix_, model), o);
    channel.capacity = o.process_capacity;
}

}  // namespace kepler::estimate
