// Models written in other languages (PROTOCOL.md §8 "Estimates segments"): an external process reads
// the collector's frames and publishes its node power for each one in an estimates segment; this
// model imports those answers so they are chosen, compared and exported like any other model's.
//
// The pipeline never waits on it, with one bounded exception: when it is the configured --primary and
// its producer kept up with the previous frame, estimate() gives it up to min(wait, interval / 4) for
// the current frame; otherwise the next model answers that frame. Answers that arrive after their
// frame was estimated are still matched (by generation and sequence) and compared with the meter.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "external/answer_matcher.hpp"
#include "external/estimates_feed.hpp"
#include "model/node_model.hpp"

namespace kepler::estimate {

struct ExternalOptions {
    std::chrono::milliseconds wait{100};  // longest wait for the primary's answer (also capped at interval / 4)
    bool primary = false;                 // configured as --primary: the only case that waits
    MatcherOptions matcher;
    keplershm::ReaderOptions reader;      // the estimates segment's accepted owner and frame cap
};

/// Not thread-safe (NodeModel contract): the pipeline thread calls it. Its AnswerSource may run its
/// own reader thread (thread-safe by itself).
class ExternalModel final : public NodeModel {
public:
    /// `source` is an estimates segment name, or the path of a recording of one (for replays).
    ExternalModel(std::string name, std::string source, ExternalOptions options);

    std::string_view kind() const noexcept override { return "external"; }
    std::optional<std::string> refusal(const NodeFacts&) const override { return std::nullopt; }
    /// The answer for this frame if it is already there (see the file comment for the one wait).
    std::optional<NodeEnergy> estimate(const FrameInput& input) override;

    std::string no_answer_reason() const override;
    std::vector<LateEnergy> take_late_answers() override;
    std::vector<std::string> take_messages() override;
    std::optional<ExternalReport> external_report() const override;

private:
    void pull(FrameId current);
    void note_changes();
    NodeEnergy to_energy(const EstimatesAnswer& answer) const;

    std::string name_;
    std::string source_name_;
    ExternalOptions options_;
    std::unique_ptr<AnswerSource> source_;
    AnswerMatcher matcher_;
    std::vector<LateEnergy> late_;
    std::vector<std::string> messages_;
    std::optional<std::string> logged_state_;  // feed state last logged (none before the first log)
    std::set<std::string> logged_rejections_;  // reasons logged so far (each once, at most 32)
    bool waited_out_ = false;       // the primary's latest wait ended without its answer
    bool rejected_this_frame_ = false;
};

}  // namespace kepler::estimate
