// Where an external model's answers come from: a live estimates segment, read on its own thread so
// the estimator's pipeline never blocks on another program, or a recording of one (for replays).
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "external/estimates_answer.hpp"

namespace kepler::estimate {

using SteadyClock = std::chrono::steady_clock;

/// One frame read from the estimates segment and when it was read. Plain value.
struct Arrival {
    std::variant<EstimatesAnswer, RejectedAnswer> answer;
    SteadyClock::time_point at;
};

/// What the source knows about its producer. Plain value.
struct FeedStatus {
    bool attached = false;       // reading an estimates segment whose writer is alive
    std::string state;           // why not attached (waiting, gone, refused), "" when attached
    std::string producer;        // the model's name (the estimates header's node_name)
    std::string version;         // the model's version (the estimates header's cpu_model)
    uint64_t arrivals_dropped = 0;  // frames read but dropped (inbox full, or over the rate limit)
};

/// Thread-safety is per implementation (see make_answer_source).
class AnswerSource {
public:
    virtual ~AnswerSource() = default;
    /// Everything read since the last call, oldest first. `current` is the collector frame being
    /// estimated: a recording is read up to the answer for it (or past it).
    virtual std::vector<Arrival> take(FrameId current) = 0;
    /// Blocks until an answer for `frame` has arrived or `deadline` passes; true if it arrived.
    virtual bool wait_for(FrameId frame, SteadyClock::time_point deadline) = 0;
    [[nodiscard]] virtual FeedStatus status() const = 0;
    /// True for a recording: answers carry no timing, none is late.
    [[nodiscard]] virtual bool is_recording() const noexcept = 0;
};

/// `source` names a live estimates segment, or (a path: it contains '/' or is a regular file) a
/// recording of one. The live source owns a reader thread and is thread-safe; the recording source
/// reads on the caller's thread and is not. `reader_options` apply to the live segment: who may own it
/// (the model process's uid), and the largest frame it may declare.
[[nodiscard]] std::unique_ptr<AnswerSource> make_answer_source(const std::string& source,
                                                              const keplershm::ReaderOptions& reader_options = {});

}  // namespace kepler::estimate
