#include "model/external_model.hpp"

#include <fmt/format.h>

#include <cmath>
#include <filesystem>

namespace kepler_estimate {

namespace {
constexpr size_t kKeptAnswers = 64;  // answers for frames the estimator has not reached yet
constexpr double kMaxPlausibleJoules = 1e9;
}  // namespace

ExternalModel::ExternalModel(std::string name, std::string source, std::chrono::milliseconds wait)
    : name_(std::move(name)), source_(std::move(source)), wait_(wait) {
    state_ = fmt::format("waiting for estimates segment {}", source_);
}

bool ExternalModel::open() {
    if (reader_) return true;
    try {
        std::error_code ec;
        if (std::filesystem::is_regular_file(source_, ec)) reader_.emplace(keplershm::Reader::open_recording(source_));
        else reader_.emplace(keplershm::Reader::open(source_));
    } catch (const keplershm::Error& e) {
        state_ = fmt::format("waiting for estimates segment {} ({})", source_, e.what());
        return false;
    }
    return true;
}

void ExternalModel::take(const keplershm::FrameView& view) {
    if (view.segment().segment_kind != KEPLERSHM_SEGMENT_ESTIMATES) {
        state_ = fmt::format("{} is not an estimates segment", source_);
        return;
    }
    const keplershm_header& header = view.segment();
    std::vector<std::pair<ZoneKey, double>> zones;
    for (const keplershm_estimate& e : view.estimates()) {
        if (e.workload_index != 0xffffffffu || e.pid != 0) continue;  // per-workload rows: not a node model's
        ZoneKey zone{ZoneKind::platform, kWholeNode};
        if (e.zone_index != 0xffffffffu) {
            if (e.zone_index >= std::min<uint32_t>(header.zone_count, KEPLERSHM_MAX_ZONES)) continue;
            const std::optional<ZoneKind> kind = zone_kind_from_protocol(header.zones[e.zone_index].kind);
            if (!kind) continue;
            zone = ZoneKey{*kind, kWholeNode};
        }
        if (!std::isfinite(e.energy_joules) || e.energy_joules < 0 || e.energy_joules > kMaxPlausibleJoules) continue;
        zones.emplace_back(zone, e.energy_joules);
    }
    answers_[FrameId{view.header().producer_generation, view.header().producer_sequence}] = std::move(zones);
    while (answers_.size() > kKeptAnswers) answers_.erase(answers_.begin());
}

void ExternalModel::pull(std::chrono::milliseconds timeout) {
    keplershm::FrameView view;
    try {
        while (reader_->next(timeout, view) == keplershm::Status::ok) {
            take(view);
            timeout = std::chrono::milliseconds(0);  // take whatever else is there, without waiting
        }
    } catch (const keplershm::Error& e) {
        state_ = fmt::format("estimates segment {}: {}", source_, e.what());
        reader_.reset();
    }
}

std::optional<NodeEnergy> ExternalModel::estimate(const FrameInput& in) {
    if (!open()) return std::nullopt;
    const FrameId id{in.frame.generation(), in.frame.sequence()};
    pull(std::chrono::milliseconds(0));
    const auto deadline = std::chrono::steady_clock::now() + wait_;
    while (reader_ && !answers_.count(id) && std::chrono::steady_clock::now() < deadline) {
        pull(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()));
    }
    auto it = answers_.find(id);
    if (it == answers_.end() || it->second.empty()) {
        state_ = fmt::format("no answer from {} for frame {}", source_, id.second);
        return std::nullopt;
    }
    NodeEnergy out;
    out.source = name_;
    for (const auto& [zone, joules] : it->second) {
        // The model gives totals only: all of it is dynamic for the split (MODELS.md).
        out.zones.push_back(ZoneEnergy{zone, watts_to_uj(joules, 1.0), 0});
    }
    answers_.erase(answers_.begin(), std::next(it));
    state_.clear();
    return out;
}

}  // namespace kepler_estimate
