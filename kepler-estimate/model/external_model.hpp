// Models written in other languages (PROTOCOL.md "Estimates segments"): an external process reads the
// collector's frames and publishes its node power for each one in an estimates segment; this model
// imports those answers so they are chosen, compared and exported like any other model.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "keplershm/keplershm.hpp"
#include "model/node_model.hpp"

namespace kepler_estimate {

/// Not thread-safe (NodeModel contract): its reader is used from the pipeline thread only.
class ExternalModel final : public NodeModel {
public:
    /// `source` is an estimates segment name, or the path of a recording of one (for replays).
    /// `wait` is how long estimate() waits for an answer that has not been published yet.
    ExternalModel(std::string name, std::string source, std::chrono::milliseconds wait);

    std::string_view kind() const noexcept override { return "external"; }
    std::optional<std::string> refusal(const NodeFacts&) const override { return std::nullopt; }
    /// Only node rows (workload_index and pid unset) are used; zone_index names a zone of the
    /// estimates segment's own header, 0xffffffff the whole node (zone `platform`).
    std::optional<NodeEnergy> estimate(const FrameInput& input) override;
    /// Why the latest estimate() had no answer ("" after an answer).
    [[nodiscard]] const std::string& state() const noexcept { return state_; }

private:
    using FrameId = std::pair<uint64_t, uint64_t>;  // collector generation, sequence
    bool open();
    void take(const keplershm::FrameView& view);
    void pull(std::chrono::milliseconds timeout);

    std::string name_;
    std::string source_;
    std::chrono::milliseconds wait_;
    std::optional<keplershm::Reader> reader_;
    std::map<FrameId, std::vector<std::pair<ZoneKey, double>>> answers_;  // joules per zone
    std::string state_;
};

}  // namespace kepler_estimate
