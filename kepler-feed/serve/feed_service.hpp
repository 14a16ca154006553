// The gRPC service: Describe() and Subscribe() over the reader and the fan-out, behind an optional
// bearer token. Synchronous handlers: each subscription owns one handler thread of gRPC's pool
// (bounded by --max-subscribers), where its frames are encoded, so encoding for a subscriber never
// runs on the reader thread.
#pragma once

#include <atomic>
#include <string>

#include "join/estimates_board.hpp"
#include "keplershm_feed/v1/feed.grpc.pb.h"
#include "read/frame_reader.hpp"
#include "serve/fanout.hpp"

namespace kepler::feed {

struct ServiceConfig {
    std::string shm_name;
    std::string token;  // empty: no token required
    Limits limits;
};

/// Thread-safe (gRPC calls handlers concurrently).
class FeedService final : public v1::Feed::Service {
public:
    FeedService(ServiceConfig config, FrameReader& reader, Fanout& fanout, EstimatesBoard& estimates)
        : config_(std::move(config)), reader_(reader), fanout_(fanout), estimates_(estimates) {}

    grpc::Status Describe(grpc::ServerContext* context, const v1::DescribeRequest* request,
                          v1::Description* response) override;
    grpc::Status Subscribe(grpc::ServerContext* context, const v1::SubscribeRequest* request,
                           grpc::ServerWriter<v1::Frame>* writer) override;

private:
    /// OK, or UNAUTHENTICATED when a token is configured and the call does not carry it.
    grpc::Status authorize(const grpc::ServerContext& context);
    grpc::Status refuse(grpc::StatusCode code, const std::string& message);
    grpc::Status stream(grpc::ServerContext& context, Subscriber& subscriber, const Selection& selection, uint64_t gap,
                        grpc::ServerWriter<v1::Frame>& writer);
    void describe_estimates(v1::Description& out) const;

    ServiceConfig config_;
    FrameReader& reader_;
    Fanout& fanout_;
    EstimatesBoard& estimates_;
    std::atomic<uint64_t> refused_{0};
    std::atomic<uint64_t> estimates_missing_{0};
};

}  // namespace kepler::feed
