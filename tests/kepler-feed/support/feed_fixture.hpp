// The real collector and the real kepler-feed as child processes, and a gRPC client to the feed.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "keplershm.h"
#include "keplershm_feed/v1/feed.grpc.pb.h"
#include "support/process.hpp"

namespace feed_test {

namespace v1 = keplershm::feed::v1;
using namespace std::chrono_literals;

/// Deadlines are generous: they only bound a test that is already failing (CI machines are loaded).
constexpr auto kDeadline = 90s;

/// A child stopped with SIGTERM (then SIGKILL) at destruction, so that the collector retires and removes
/// its segment instead of leaving it in /dev/shm.
class Daemon : public e2e::Child {
public:
    using e2e::Child::Child;
    ~Daemon() { stop(); }
};

/// kepler-collect on procfs, unprivileged, without Kubernetes, a short interval and a long ring.
/// `extra` arguments are appended (a GPU library, for instance).
std::unique_ptr<Daemon> start_collector(const e2e::TempDir& tmp, const std::string& name,
                                            const std::string& interval = "100ms", const std::string& log = "collect.log",
                                            const std::vector<std::string>& extra = {});

/// kepler-feed on 127.0.0.1 with a port of the kernel's choosing (read from its --port-file).
class Feed {
public:
    Feed(const e2e::TempDir& tmp, const std::string& name, std::vector<std::string> extra = {},
         const std::string& log = "feed.log");
    [[nodiscard]] std::string target() const { return "127.0.0.1:" + std::to_string(port_); }
    [[nodiscard]] int port() const { return port_; }
    Daemon& child() { return *child_; }
    [[nodiscard]] std::string log() const { return child_->log(); }

private:
    std::unique_ptr<Daemon> child_;
    int port_ = 0;
};

std::unique_ptr<v1::Feed::Stub> connect(const std::string& target,
                                        std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials());

/// Describe() with a deadline; `token` adds the bearer metadata.
grpc::Status describe(v1::Feed::Stub& stub, v1::Description& out, const std::string& token = "");

/// Waits until Describe() reports at least one frame read.
bool wait_for_frames(v1::Feed::Stub& stub, std::chrono::seconds timeout = kDeadline);

/// A subscription with its own context (deadline kDeadline unless told).
struct Stream {
    std::unique_ptr<grpc::ClientContext> context;
    std::unique_ptr<grpc::ClientReader<v1::Frame>> reader;
    bool read(v1::Frame& frame) { return reader->Read(&frame); }
    grpc::Status finish() { return reader->Finish(); }
};
Stream subscribe(v1::Feed::Stub& stub, const v1::SubscribeRequest& request, std::chrono::seconds deadline = kDeadline,
                 const std::string& token = "");

/// The status of a subscription that should be refused at once.
grpc::Status refused(v1::Feed::Stub& stub, const v1::SubscribeRequest& request, const std::string& token = "");

/// A request naming sections (and fields: "processes:pid,cpu_time_ns").
v1::SubscribeRequest request_for(const std::vector<std::string>& sections);

const v1::Section* find_section(const v1::Frame& frame, const std::string& name);
const v1::Column* find_column(const v1::Section& section, const std::string& name);

/// Local reader through the C ABI, closed at destruction.
struct LocalReader {
    explicit LocalReader(const std::string& name);
    ~LocalReader();
    LocalReader(const LocalReader&) = delete;
    LocalReader& operator=(const LocalReader&) = delete;
    keplershm_reader* reader = nullptr;
};

/// Every column of `section` against the same frame read locally: same rows, same values per field.
/// Returns "" when equal, else the first difference.
std::string compare_section(const v1::Section& section, keplershm_reader* reader, const keplershm_view& view);

}  // namespace feed_test
