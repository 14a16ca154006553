// XGBoost node model (MODELS.md): one booster per target zone over one row of node features.
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "model/model_metadata.hpp"
#include "model/node_model.hpp"

namespace kepler::estimate {

class XgboostBooster;

/// Not thread-safe (NodeModel contract): XGBoost boosters are used from the pipeline thread only.
class XgboostModel final : public NodeModel {
public:
    /// Loads metadata and boosters from a model directory or metadata path; `threads` is XGBoost's
    /// nthread (a per-node daemon must not take every core). Throws ModelError with the reason.
    /// Loads the metadata at `spec_path` (refused unless it hashes to `metadata_sha256`, when set) and its
    /// boosters (each refused unless it hashes to its target's "sha256", when set). Throws ModelError.
    XgboostModel(std::string name, const std::filesystem::path& spec_path, int threads, std::string_view metadata_sha256 = {});
    ~XgboostModel() override;

    std::string_view kind() const noexcept override { return "xgboost"; }
    std::optional<std::string> refusal(const NodeFacts& node) const override;
    CpuMatch cpu_match(const NodeFacts& node) const override;
    std::optional<NodeEnergy> estimate(const FrameInput& input) override;
    std::map<ZoneKind, double> expected_error_w() const override { return meta_.expected_error_w; }
    std::map<std::string, bool> outside_training_range() const override;

    /// Booster outputs in watts, one per target, plus the extrapolation slopes' watts for features
    /// beyond their training range (before clamping and idle handling); nullopt when a feature is
    /// unavailable. For parity tests against Python. Records which features lay outside their range.
    [[nodiscard]] std::optional<std::vector<double>> predict_watts(const NodeFeatures& features);
    [[nodiscard]] const ModelMetadata& metadata() const noexcept { return meta_; }

private:
    [[nodiscard]] std::vector<double> predict_row(const std::vector<float>& row);
    [[nodiscard]] std::vector<double> idle_watts(const NodeFacts& node);

    std::string name_;
    ModelMetadata meta_;
    std::vector<std::unique_ptr<XgboostBooster>> boosters_;  // parallel to meta_.targets
    std::vector<std::optional<Feature>> columns_;     // parallel to meta_.features
    std::optional<uint32_t> idle_cpu_count_;          // cpu_count the cached idle figure is for
    std::vector<double> idle_cache_;
    std::vector<double> excess_;         // parallel to meta_.features: the last row's distance outside its range
    bool estimated_ = false;             // excess_ describes a frame
};

}  // namespace kepler::estimate
