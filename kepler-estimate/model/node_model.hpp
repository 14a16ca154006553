// Step 1 of the estimator: the interface of a node model, which gives node energy per zone for one
// interval from a meter or from a model, and the built-in ones (the curve, the meter).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/frame_id.hpp"
#include "core/node_energy.hpp"
#include "keplershm/keplershm.hpp"
#include "model/features.hpp"

namespace kepler::estimate {

/// What a model needs to know about the node to accept it. Plain value.
struct NodeFacts {
    std::string cpu_model;
    uint32_t cpu_count = 0;
    uint64_t metric_mask = 0;  // metrics the node produces (segment header)
    bool has_meter = false;    // the segment declares energy zones
};
[[nodiscard]] NodeFacts node_facts(const keplershm_header& segment);

/// Everything a model may look at for one frame. The references outlive the call only.
struct FrameInput {
    const keplershm::FrameView& frame;
    const NodeFeatures& features;
    const NodeFacts& node;
};

/// Counters of a model that answers from another process (all monotonic). Plain value.
struct AnswerCounts {
    uint64_t answers = 0;   // matched to a frame this estimator read (used, on time or late)
    uint64_t used = 0;      // of those: there when their frame was estimated
    uint64_t late = 0;      // of those: arrived more than one interval after their frame was read
    uint64_t missing = 0;   // frames that got no answer while they were remembered
    uint64_t rejected = 0;  // invalid, duplicate, or for a frame not read / no longer remembered
};

/// What the estimator knows of a model that answers from another process (PROTOCOL.md §8), for
/// export. Plain value.
struct ExternalReport {
    std::string segment;
    std::string producer;  // model name in the estimates header
    std::string version;   // model version in the estimates header
    AnswerCounts counts;
    std::optional<double> last_lag_s;
    uint64_t arrivals_dropped = 0;
};

/// An answer matched after its frame was estimated, as node energy. Plain value.
struct LateEnergy {
    FrameId frame;
    NodeEnergy energy;
    double interval_s = 0;
};

/// How well a model's training CPU matches this node (MODELS.md: exact, then vendor, then any).
enum class CpuMatch { exact = 0, vendor = 1, any = 2 };
[[nodiscard]] std::string_view to_string(CpuMatch match) noexcept;
[[nodiscard]] CpuMatch match_cpu(std::string_view trained_on, std::string_view node_cpu);

/// A source of node energy. Not thread-safe: one pipeline thread calls it.
class NodeModel {
public:
    virtual ~NodeModel() = default;
    /// "measured", "curve" or "xgboost".
    [[nodiscard]] virtual std::string_view kind() const noexcept = 0;
    /// Why the model cannot serve this node (e.g. it needs a metric the node lacks), or nullopt.
    [[nodiscard]] virtual std::optional<std::string> refusal(const NodeFacts& node) const = 0;
    [[nodiscard]] virtual CpuMatch cpu_match(const NodeFacts&) const { return CpuMatch::any; }
    /// The model's own measure of its error on data it was not trained on (mean absolute watts per
    /// zone), when its files carry one.
    [[nodiscard]] virtual std::map<ZoneKind, double> expected_error_w() const { return {}; }
    /// Per feature with a known training range: whether the last estimated frame lay outside it (the
    /// model extrapolated). Empty for models without training ranges.
    [[nodiscard]] virtual std::map<std::string, bool> outside_training_range() const { return {}; }
    /// Energy per zone for the frame's interval, or nullopt when this frame gives the model nothing
    /// to work with (no valid meter reading, a needed feature missing). Throws on internal failure.
    [[nodiscard]] virtual std::optional<NodeEnergy> estimate(const FrameInput& input) = 0;
    /// Why the latest estimate() had no answer (a label value: stable text, no frame numbers).
    [[nodiscard]] virtual std::string no_answer_reason() const { return "needed features missing from the frame"; }

    // Models that answer from another process (external models); the others keep these defaults.
    /// Answers for earlier frames matched during the latest estimate() call.
    [[nodiscard]] virtual std::vector<LateEnergy> take_late_answers() { return {}; }
    /// Lines worth logging since the last call (attached, producer gone, first rejection of a kind).
    [[nodiscard]] virtual std::vector<std::string> take_messages() { return {}; }
    /// The channel's counters.
    [[nodiscard]] virtual std::optional<ExternalReport> external_report() const { return std::nullopt; }
};

/// Built-in utilisation curve of MODELS.md; defaults are Cloud Carbon Footprint's AWS averages.
struct CurveParams {
    double idle_w = 0.74;  // per vCPU
    double max_w = 3.5;    // per vCPU
};
[[nodiscard]] std::unique_ptr<NodeModel> make_curve_model(std::string name, CurveParams params);
/// GPU idle power given by the operator (--gpu-idle-watts), in place of detecting it.
struct GpuIdleWatts {
    std::optional<double> every;         // every GPU
    std::map<uint32_t, double> by_index;  // a GPU by its device index (wins over `every`)
    [[nodiscard]] std::optional<double> of(uint32_t index) const {
        const auto it = by_index.find(index);
        return it != by_index.end() ? std::optional<double>(it->second) : every;
    }
};

/// The node's own meter: energy_delta_uj of the frame's valid zones; idle = lowest power seen so far —
/// for a GPU whose users the frame lists, the lowest seen while nobody used it (0 until then), or the
/// configured figure.
[[nodiscard]] std::unique_ptr<NodeModel> make_measured_model(GpuIdleWatts gpu_idle = {});

}  // namespace kepler::estimate
