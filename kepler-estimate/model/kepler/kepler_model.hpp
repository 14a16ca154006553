// `--model NAME=kepler:PATH`: one of Kepler 0.7's published models (weights JSON or XGBoost zip) served
// in process. Kepler's features are per-interval node totals; ours are per-second rates, so each
// value is the rate times Kepler's sampling interval (3 s, its default, under which the DB was trained).
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "model/kepler/kepler_predictor.hpp"
#include "model/node_model.hpp"

namespace kepler::estimate {

/// Kepler 0.7's sampling interval: the per-interval totals the published models were trained on.
inline constexpr double kKeplerIntervalS = 3.0;

/// Our frame feature behind a Kepler 0.7 feature name (bpf_cpu_time_ms → cpu_time_ms_per_s, ...).
[[nodiscard]] std::optional<Feature> kepler_feature(std::string_view kepler_name) noexcept;

/// Not thread-safe (NodeModel contract).
class KeplerModel final : public NodeModel {
public:
    /// Loads `path` (.json weights or .zip XGBoost); `note` is appended to the selection reason (the
    /// node-type match of kepler-db). Throws ModelError.
    KeplerModel(std::string name, const std::filesystem::path& path, int threads, std::string note = {});

    std::string_view kind() const noexcept override { return "kepler"; }
    std::optional<std::string> refusal(const NodeFacts& node) const override;
    CpuMatch cpu_match(const NodeFacts&) const override { return match_; }
    std::optional<NodeEnergy> estimate(const FrameInput& input) override;

    /// Kepler-named per-interval values of a frame, in features() order; nullopt when one is missing.
    [[nodiscard]] std::optional<std::vector<double>> kepler_row(const NodeFeatures& features) const;
    [[nodiscard]] KeplerPredictor& predictor() noexcept { return *predictor_; }
    [[nodiscard]] const std::string& note() const noexcept { return note_; }
    void set_cpu_match(CpuMatch match) noexcept { match_ = match; }

private:
    std::string name_;
    std::string note_;
    std::unique_ptr<KeplerPredictor> predictor_;
    std::vector<std::optional<Feature>> columns_;  // parallel to predictor_->features()
    CpuMatch match_ = CpuMatch::any;
    std::optional<std::vector<double>> idle_;      // AbsPower: prediction at rest, per zone
};

}  // namespace kepler::estimate
