// Several node models on the same frames (A/B): choice of the primary, refusal reasons, reloads of
// model files, and each model's error against the meter.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "keplershm/keplershm.hpp"
#include "load/http_fetch.hpp"
#include "load/model_spec.hpp"
#include "load/model_watch.hpp"
#include "model/node_model.hpp"

namespace kepler::estimate {

/// What one model did, for export and logs. Plain value.
struct ModelReport {
    std::string name;
    std::string kind;
    bool selected = false;
    std::string reason;                          // why (not) selected
    uint64_t load_errors = 0;                    // bad files rejected
    uint64_t loads = 0;                          // files loaded (first load and reloads)
    uint64_t estimate_errors = 0;                // predictions that threw
    std::map<ZoneKind, uint64_t> energy_uj;      // node energy this model predicted, summed over frames
    std::map<ZoneKind, double> watts;            // last interval
    std::map<ZoneKind, double> abs_error_w;      // last interval, where the meter read that zone
    std::map<ZoneKind, double> mape;             // rolling mean absolute percentage error, as a ratio
    std::map<ZoneKind, double> expected_error_w; // the model's own held-out error (nested), if it has one
    std::map<std::string, bool> outside_training_range;  // per feature with a range: outside it in the last frame
    uint64_t extrapolated_frames = 0;            // frames with some feature outside its training range
    std::optional<ExternalReport> external;      // external models: the estimates channel's counters
};

/// One model's node energy for one frame, with what names it to consumers of the estimates it
/// publishes (PROTOCOL.md §8). Plain value.
struct ModelAnswer {
    std::string name;     // --model NAME
    std::string version;  // the kind, and the model file where there is one
    NodeEnergy energy;
};

/// The answer of every model for one frame and which one is primary. Plain value.
struct ModelSetResult {
    std::optional<NodeEnergy> primary;
    std::string primary_name;
    std::vector<ModelAnswer> answers;  // every model that answered, in configuration order (primary included)
};

struct ModelSetOptions {
    int xgboost_threads = 1;
    size_t mape_window = 60;  // frames in the rolling MAPE
    /// Longest wait for an external model's answer, only when it is --primary (also capped at a
    /// quarter of the frame's interval); other models never wait on an external one.
    std::chrono::milliseconds external_wait{100};
    size_t external_window = 16;  // frames remembered for an external model's late answers
    /// --model-server: kepler-db folders missing locally are fetched from URL/<folder name>/ (the
    /// model DB's layout: node_type_index.json, then only the chosen model file).
    ModelServer model_server;
    /// How external models' estimates segments are opened (accepted owner, frame cap).
    keplershm::ReaderOptions external_reader;
    /// --gpu-idle-watts: GPUs' idle power as configured, instead of detected.
    GpuIdleWatts gpu_idle;
    /// Makes the model of an `external:` spec (`primary`: it is --primary); set by the Estimator, which
    /// knows the external model, so that selection does not.
    std::function<std::unique_ptr<NodeModel>(const ModelSpec& spec, bool primary)> make_external;
};

/// Owns the configured models. Not thread-safe: the pipeline thread calls it; the exporter reads
/// reports() under the pipeline's lock.
class ModelSet {
public:
    ModelSet(std::vector<ModelSpec> specs, std::optional<std::string> primary, ModelSetOptions options);
    ~ModelSet();

    /// Loads model files that appeared or changed; keeps the running model when a new file is bad.
    /// Returns messages worth logging (loads and rejections).
    std::vector<std::string> refresh();
    /// Runs every model on the frame, tracks errors against the meter, and picks the primary.
    ModelSetResult estimate(const FrameInput& input);
    [[nodiscard]] std::vector<ModelReport> reports() const;
    /// Lines worth logging since the last call (external models: attached, gone, rejections).
    [[nodiscard]] std::vector<std::string> take_messages();
    [[nodiscard]] const std::vector<ModelSpec>& specs() const noexcept { return specs_; }
    /// Model directories to watch and fetch (xgboost specs), with their pinned metadata digests.
    [[nodiscard]] std::vector<WatchedModel> watched_models() const;

    struct Entry;

private:
    using MeterTotals = std::map<ZoneKind, uint64_t>;  // microjoules per zone kind, sockets summed
    /// The model whose answer is the node's power this frame (none: no model answered), and why.
    struct Choice {
        std::optional<size_t> index;
        std::string why;
    };
    /// One model's answer to the frame (nullopt: refused, failed or none), its report updated.
    std::optional<NodeEnergy> ask(Entry& entry, const FrameInput& in);
    void score_against_meter(const std::vector<std::optional<NodeEnergy>>& answers, size_t meter, const FrameInput& in);
    [[nodiscard]] Choice choose(const std::vector<std::optional<NodeEnergy>>& answers, const NodeFacts& node) const;
    void note_reasons(const std::vector<std::optional<NodeEnergy>>& answers, const Choice& choice);
    void track_error(Entry& entry, const MeterTotals& meter, const NodeEnergy& predicted, double seconds);
    void take_late_answers(Entry& entry);
    void refresh_kepler(Entry& entry, std::vector<std::string>& log);
    int rank(const Entry& entry, const NodeFacts& node) const;

    std::vector<ModelSpec> specs_;
    std::optional<std::string> primary_;
    ModelSetOptions options_;
    std::vector<std::unique_ptr<Entry>> entries_;  // parallel to specs_
    std::deque<std::pair<FrameId, MeterTotals>> recent_meter_;  // metered frames, for late answers' errors
};

}  // namespace kepler::estimate
