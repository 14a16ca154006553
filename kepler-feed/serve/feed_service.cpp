#include "serve/feed_service.hpp"

#include <fmt/format.h>

#include "keplershm/keplershm.hpp"
#include "select/encode.hpp"

namespace kepler::feed {

namespace {

constexpr std::chrono::milliseconds kIdleWait{250};  // how soon a handler notices a client that went away

/// Compares without leaking, through timing, how much of the token was right.
bool same_secret(std::string_view a, std::string_view b) {
    unsigned diff = a.size() == b.size() ? 0u : 1u;
    for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned>(a[i] ^ (i < b.size() ? b[i] : 0));
    return diff == 0;
}

}  // namespace

grpc::Status FeedService::refuse(grpc::StatusCode code, const std::string& message) {
    ++refused_;
    return {code, message};
}

grpc::Status FeedService::authorize(const grpc::ServerContext& context) {
    if (config_.token.empty()) return grpc::Status::OK;
    const auto& metadata = context.client_metadata();
    const auto it = metadata.find("authorization");
    const std::string expected = "Bearer " + config_.token;
    if (it == metadata.end() || !same_secret(std::string_view(it->second.data(), it->second.size()), expected)) {
        return refuse(grpc::StatusCode::UNAUTHENTICATED,
                      "kepler-feed needs a bearer token: call metadata 'authorization: Bearer <token>' (--token-file)");
    }
    return grpc::Status::OK;
}

grpc::Status FeedService::Describe(grpc::ServerContext* context, const v1::DescribeRequest*, v1::Description* out) {
    if (grpc::Status auth = authorize(*context); !auth.ok()) return auth;
    const ReaderStatus status = reader_.status();
    out->set_attached(status.attached);
    out->set_shm_name(config_.shm_name);
    out->set_latest_sequence(status.latest_sequence);
    out->set_oldest_sequence(fanout_.oldest_sequence());
    out->set_writer_state(status.writer_state);
    if (status.segment) fill_segment(*status.segment, *out->mutable_segment());
    const std::vector<keplershm_field> schema = status.segment ? status.segment->schema : library_schema();
    for (const SectionKind& kind : section_kinds()) {
        v1::SectionInfo* section = out->add_sections();
        section->set_name(kind.name);
        section->set_id(kind.id);
        section->set_record_type(kind.record_type);
        for (const keplershm_field& f : schema)
            if (kind.record_type != 0 && f.record_type == kind.record_type) section->add_fields(utf8(keplershm::get_text(f.name)));
    }
    v1::Limits* limits = out->mutable_limits();
    limits->set_max_subscribers(config_.limits.max_subscribers);
    limits->set_queue_frames(config_.limits.queue_frames);
    limits->set_max_top_n(config_.limits.max_top_n);
    limits->set_max_filter_values(config_.limits.max_filter_values);
    limits->set_max_value_length(config_.limits.max_value_length);
    limits->set_history_frames(fanout_.history_frames());
    v1::Stats* stats = out->mutable_stats();
    stats->set_subscribers(fanout_.subscribers());
    stats->set_subscribers_dropped(fanout_.dropped_total());
    stats->set_frames_read(status.frames_read);
    stats->set_frames_missed(status.frames_missed);
    stats->set_generations_followed(status.generations_followed);
    stats->set_requests_refused(refused_.load());
    stats->set_estimates_missing(estimates_missing_.load());
    describe_estimates(*out);
    return grpc::Status::OK;
}

void FeedService::describe_estimates(v1::Description& out) const {
    out.set_estimates_wait_ms(static_cast<uint32_t>(estimates_.wait_bound().count()));
    for (const SourceStatus& s : estimates_.status()) {
        v1::EstimatesSource* source = out.add_estimates_sources();
        source->set_shm_name(utf8(s.shm_name));
        source->set_attached(s.reader.attached);
        source->set_writer_state(s.reader.writer_state);
        source->set_writer_stale(s.reader.writer_stale);
        source->set_model(utf8(s.model));
        source->set_version(utf8(s.version));
        source->set_answers(s.answers);
        source->set_rejected(s.rejected);
        source->set_last_rejection(utf8(s.last_rejection));
        source->set_answered_generation(s.answered.generation);
        source->set_answered_sequence(s.answered.sequence);
    }
}

grpc::Status FeedService::Subscribe(grpc::ServerContext* context, const v1::SubscribeRequest* request,
                                    grpc::ServerWriter<v1::Frame>* writer) {
    if (grpc::Status auth = authorize(*context); !auth.ok()) return auth;
    const ReaderStatus status = reader_.status();
    std::string error;
    const std::optional<Selection> selection =
        parse_selection(*request, status.segment ? status.segment->schema : library_schema(), config_.limits, error);
    if (!selection) return refuse(grpc::StatusCode::INVALID_ARGUMENT, error);
    Fanout::Start start = fanout_.subscribe(selection->from_sequence, context);
    if (!start.subscriber) return refuse(start.refusal, start.error);
    grpc::Status result = stream(*context, *start.subscriber, *selection, start.gap, *writer);
    fanout_.unsubscribe(start.subscriber);
    return result;
}

grpc::Status FeedService::stream(grpc::ServerContext& context, Subscriber& subscriber, const Selection& selection,
                                 uint64_t gap, grpc::ServerWriter<v1::Frame>& writer) {
    FrameEncoder encoder(selection);
    v1::Frame frame;
    for (bool first = true;;) {
        SnapshotPtr snapshot;
        switch (subscriber.pop(snapshot, kIdleWait)) {
            case Subscriber::Next::idle:
                if (context.IsCancelled()) return grpc::Status::CANCELLED;
                continue;
            case Subscriber::Next::dropped:
                return {grpc::StatusCode::RESOURCE_EXHAUSTED, subscriber.drop_reason()};
            case Subscriber::Next::stopped:
                return {grpc::StatusCode::UNAVAILABLE, "kepler-feed is shutting down; resubscribe with from_sequence"};
            case Subscriber::Next::frame: break;
        }
        frame.Clear();
        // Only this subscriber's handler waits for answers, bounded after the feed read the frame.
        std::vector<SourceAnswer> answers;
        if (encoder.wants_estimates() && !estimates_.empty()) answers = estimates_.answers_for(*snapshot);
        encoder.encode(*snapshot, first ? gap : 0, frame, answers);
        for (const v1::ModelEstimates& e : frame.estimates()) estimates_missing_ += e.missing() ? 1 : 0;
        if (first) frame.set_start_gap(gap);
        first = false;
        // Blocks while the client does not read (HTTP/2 flow control): only this subscriber waits.
        if (!writer.Write(frame)) return grpc::Status::CANCELLED;
    }
}

}  // namespace kepler::feed
