// The estimator's own answers, published: after each collector frame is estimated, every model that
// answered writes one estimates frame (PROTOCOL.md §8) into a segment of its own, `PREFIX-<model>`, so
// that kepler-feed, another estimator's `external:` model or a notebook see the estimates beside the
// frame they answer. Publishing is a copy into shared memory on the pipeline thread: no allocation per
// frame once the segments exist, no waiting on readers (they never block a writer).
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "attribute/attribution.hpp"
#include "keplershm/keplershm.hpp"
#include "select/model_set.hpp"

namespace kepler::estimate {

/// Rows an answer may have (kepler-estimate's own `external:` reader refuses more): zone rows always fit;
/// the primary's workload rows are left out of an answer that would exceed it (logged once).
inline constexpr uint32_t kMaxPublishedRows = 65536;

/// Segment name of one model's estimates: `PREFIX-<model>`. Throws std::invalid_argument when PREFIX is
/// not 1-135 of [A-Za-z0-9._-] starting with a letter, digit, '_' or '-' (model names are 1-64 of the
/// same characters, and a segment name at most 200).
[[nodiscard]] std::string estimates_segment_name(const std::string& prefix, const std::string& model);

/// A line worth logging; `warning`: a model's estimates are not published (a name squatted, a segment
/// that cannot be written).
struct PublishNote {
    bool warning = false;
    std::string text;
};

/// How long a model whose segment could not be written waits before it is tried again (a squatter's
/// file removed, /dev/shm freed): the name is not given up for good.
inline constexpr std::chrono::seconds kPublishRetry{30};

/// One estimates segment per model, created at the model's first answer (its zones go into the header)
/// and created again (a new generation) when they or its version change. Not thread-safe: the pipeline
/// thread calls it. Destroying it retires every segment (readers see a clean stop).
class EstimatesPublisher {
public:
    /// `retry`: how long a model whose segment could not be written waits before it is tried again.
    explicit EstimatesPublisher(std::string prefix, std::chrono::milliseconds retry = kPublishRetry);

    /// Publishes each answer to `frame`; the answer of `primary` also gets one row per workload of the
    /// frame and zone (what `attribution` gave the workload's processes). A model whose segment cannot be
    /// written is left out for the retry time, then tried again (the reason is a warning, said again only
    /// when it changes). Returns lines worth logging.
    std::vector<PublishNote> publish(const keplershm::FrameView& frame, const std::vector<ModelAnswer>& answers,
                                     const std::string& primary, const Attribution& attribution);
    /// While no frame comes: beats every segment's heartbeat so readers do not take it for dead.
    std::vector<PublishNote> heartbeat();

private:
    struct Channel {
        std::optional<keplershm::Writer> writer;
        std::vector<keplershm_zone_info> zones;  // as in the writer's header
        std::string version;
        uint32_t capacity = 0;  // rows per answer the writer holds
        // The segment could not be written: this model is not published before retry_at.
        std::optional<std::chrono::steady_clock::time_point> retry_at;
        std::string last_failure;  // said once until it changes
        bool said_too_many = false;
    };

    void publish_one(const keplershm::FrameView& frame, const ModelAnswer& answer, const Attribution* attribution,
                     std::vector<PublishNote>& log);
    /// Gives the channel's segment up for kPublishRetry, with a warning when the reason is new.
    void fail(Channel& channel, std::string reason, std::vector<PublishNote>& log) const;
    void open(Channel& channel, const std::string& model, uint32_t rows);
    /// Rows of one answer into rows_; `keys` are its zones in header order (zone_index counts in them).
    void fill_rows(const keplershm::FrameView& frame, const ModelAnswer& answer, const std::vector<ZoneKey>& keys,
                   const Attribution* attribution, Channel& channel, std::vector<PublishNote>& log);

    std::string prefix_;
    std::chrono::milliseconds retry_;
    std::map<std::string, Channel> channels_;  // by model name
    std::vector<keplershm_estimate> rows_;     // one answer's rows, reused across frames
    std::vector<std::vector<uint64_t>> workload_uj_;  // [zone][workload], reused across frames
};

}  // namespace kepler::estimate
