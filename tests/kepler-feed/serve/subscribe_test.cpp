// Subscriptions against the real feed fed by the real collector: what arrives equals what a local
// reader reads for the same sequences, selection and filters send only what was asked, hostile requests
// are refused with clear codes, and a stalled subscriber is dropped while another keeps receiving.
#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <set>
#include <thread>

#include "support/feed_fixture.hpp"

namespace feed_test {
namespace {

class Subscribe : public ::testing::Test {
protected:
    void SetUp() override {
        collector_ = start_collector(tmp_, name_);
        feed_ = std::make_unique<Feed>(tmp_, name_, extra_args());
        ASSERT_NE(feed_->port(), 0) << feed_->log();
        stub_ = connect(feed_->target());
        ASSERT_TRUE(wait_for_frames(*stub_)) << feed_->log() << collector_->log();
    }
    virtual std::vector<std::string> extra_args() { return {}; }

    e2e::TempDir tmp_;
    std::string name_ = e2e::unique_name("feed");
    std::unique_ptr<Daemon> collector_;
    std::unique_ptr<Feed> feed_;
    std::unique_ptr<v1::Feed::Stub> stub_;
};

TEST_F(Subscribe, FieldsEqualTheLocalReaderForTheSameSequences) {
    LocalReader local(name_);
    ASSERT_NE(local.reader, nullptr);
    Stream stream = subscribe(*stub_, v1::SubscribeRequest{});
    v1::Frame frame;
    for (int n = 0; n < 5; ++n) {
        ASSERT_TRUE(stream.read(frame)) << stream.finish().error_message();
        if (n == 0) {
            ASSERT_TRUE(frame.has_segment()) << "the first frame describes its generation";
            EXPECT_GT(frame.segment().schema_size(), 0);
            EXPECT_FALSE(frame.segment().node_name().empty());
        }
        keplershm_view view{};
        view.sz = sizeof view;
        // The ring holds 64 frames of 100 ms: the frame just received is still there.
        ASSERT_EQ(keplershm_reader_copy(local.reader, frame.sequence(), &view), KEPLERSHM_OK) << frame.sequence();
        EXPECT_EQ(frame.generation(), view.generation);
        EXPECT_EQ(frame.header().interval_start_ns(), view.frame->interval_start_ns);
        EXPECT_EQ(frame.header().interval_end_ns(), view.frame->interval_end_ns);
        EXPECT_EQ(frame.header().interval_end_realtime_ns(), view.frame->interval_end_realtime_ns);
        EXPECT_EQ(frame.header().process_read_time_ns(), view.frame->process_read_time_ns);
        EXPECT_EQ(frame.header().metric_mask(), view.frame->metric_mask);
        EXPECT_EQ(frame.header().flags(), view.frame->flags);
        EXPECT_EQ(frame.header().source(), view.frame->source);
        std::set<std::string> names;
        for (const v1::Section& section : frame.sections()) {
            names.insert(section.name());
            EXPECT_EQ(compare_section(section, local.reader, view), "") << "frame " << frame.sequence();
        }
        EXPECT_TRUE(names.count("processes") && names.count("cpus") && names.count("unaccounted")) << frame.sequence();
    }
}

TEST_F(Subscribe, SelectionSendsOnlyWhatWasAsked) {
    Stream stream = subscribe(*stub_, request_for({"processes:pid,cpu_time_ns", "unaccounted"}));
    v1::Frame frame;
    ASSERT_TRUE(stream.read(frame)) << stream.finish().error_message();
    ASSERT_EQ(frame.sections_size(), 2);
    const v1::Section* processes = find_section(frame, "processes");
    ASSERT_NE(processes, nullptr);
    ASSERT_EQ(processes->columns_size(), 2);
    EXPECT_EQ(processes->columns(0).name(), "pid");
    EXPECT_EQ(processes->columns(1).name(), "cpu_time_ns");
    EXPECT_EQ(processes->columns(0).u32_size(), static_cast<int>(processes->rows()));
    EXPECT_EQ(processes->columns(1).u64_size(), static_cast<int>(processes->rows()));
    EXPECT_NE(find_section(frame, "unaccounted"), nullptr);
}

TEST_F(Subscribe, TopNKeepsTheBusiestProcesses) {
    LocalReader local(name_);
    v1::SubscribeRequest request = request_for({"processes:pid,cpu_time_ns"});
    request.mutable_filter()->set_top_n_by_cpu(3);
    Stream stream = subscribe(*stub_, request);
    v1::Frame frame;
    ASSERT_TRUE(stream.read(frame)) << stream.finish().error_message();
    keplershm_view view{};
    view.sz = sizeof view;
    ASSERT_EQ(keplershm_reader_copy(local.reader, frame.sequence(), &view), KEPLERSHM_OK);
    const void* records = nullptr;
    uint32_t count = 0, stride = 0;
    keplershm_view_section(&view, KEPLERSHM_SECTION_PROCESSES, &records, &count, &stride);
    std::vector<uint64_t> cpu;
    for (uint32_t i = 0; i < count; ++i)
        cpu.push_back(reinterpret_cast<const keplershm_process*>(static_cast<const uint8_t*>(records) + i * stride)->cpu_time_ns);
    std::sort(cpu.rbegin(), cpu.rend());
    const v1::Section* processes = find_section(frame, "processes");
    ASSERT_NE(processes, nullptr);
    ASSERT_EQ(processes->rows(), std::min<uint32_t>(3, count));
    std::vector<uint64_t> got(processes->columns(1).u64().begin(), processes->columns(1).u64().end());
    std::sort(got.rbegin(), got.rend());
    for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], cpu[i]) << "rank " << i;
}

TEST_F(Subscribe, WorkloadFilterSendsOnlyMatchingWorkloads) {
    v1::SubscribeRequest request = request_for({"processes:pid,workload_index", "workloads:pod_namespace"});
    request.mutable_filter()->add_namespaces("no-such-namespace");
    Stream stream = subscribe(*stub_, request);
    v1::Frame frame;
    ASSERT_TRUE(stream.read(frame)) << stream.finish().error_message();
    ASSERT_NE(find_section(frame, "processes"), nullptr);
    EXPECT_EQ(find_section(frame, "processes")->rows(), 0u);
    EXPECT_EQ(find_section(frame, "workloads")->rows(), 0u);
}

TEST_F(Subscribe, StartsFromAPastSequenceTheRingHolds) {
    v1::Description d;
    ASSERT_TRUE(e2e::wait_until([&] { return describe(*stub_, d).ok() && d.latest_sequence() >= 4; }, kDeadline));
    const uint64_t from = d.oldest_sequence() + 1;
    v1::SubscribeRequest request = request_for({"zones"});
    request.set_from_sequence(from);
    Stream stream = subscribe(*stub_, request);
    v1::Frame frame;
    ASSERT_TRUE(stream.read(frame)) << stream.finish().error_message();
    EXPECT_EQ(frame.sequence(), from);
    EXPECT_EQ(frame.start_gap(), 0u);
    uint64_t previous = frame.sequence();
    for (int i = 0; i < 3; ++i) {
        ASSERT_TRUE(stream.read(frame));
        EXPECT_EQ(frame.sequence(), previous + 1 + frame.missed());
        previous = frame.sequence();
    }
    request.set_from_sequence(1);  // long gone once the ring wrapped; otherwise frame 1 itself
    Stream old = subscribe(*stub_, request);
    ASSERT_TRUE(old.read(frame));
    EXPECT_EQ(frame.sequence() - frame.start_gap(), 1u) << "a start the feed no longer holds is reported as a gap";
    EXPECT_EQ(frame.missed(), frame.start_gap());
}

TEST_F(Subscribe, HostileRequestsGetClearStatusCodes) {
    grpc::Status s = refused(*stub_, request_for({"gpus"}));
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_NE(s.error_message().find("unknown section 'gpus'"), std::string::npos) << s.error_message();
    s = refused(*stub_, request_for({"processes:pid,watts"}));
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_NE(s.error_message().find("unknown field 'watts'"), std::string::npos) << s.error_message();
    v1::SubscribeRequest huge;
    huge.mutable_filter()->set_top_n_by_cpu(4'000'000'000u);
    s = refused(*stub_, huge);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    huge.Clear();
    for (int i = 0; i < 10000; ++i) huge.mutable_filter()->add_containers("c" + std::to_string(i));
    s = refused(*stub_, huge);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
    huge.Clear();
    huge.set_from_sequence(UINT64_MAX);
    s = refused(*stub_, huge);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_NE(s.error_message().find("beyond the newest frame"), std::string::npos) << s.error_message();
    huge.Clear();
    huge.mutable_filter()->add_pods(std::string(2 << 20, 'x'));  // above the server's 1 MiB request cap
    s = refused(*stub_, huge);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << s.error_message();
    v1::Description d;
    ASSERT_TRUE(describe(*stub_, d).ok());
    EXPECT_GE(d.stats().requests_refused(), 5u);
    EXPECT_TRUE(wait_for_frames(*stub_)) << "the feed keeps serving";
}

class SubscriberLimits : public Subscribe {
protected:
    std::vector<std::string> extra_args() override { return {"--queue-frames", "4", "--max-subscribers", "3", "--drop-grace", "600"}; }
};

TEST_F(SubscriberLimits, StalledSubscriberIsDroppedWhileAnotherKeepsReceiving) {
    // A stalled client: reads one frame, then nothing. Its flow-control window fills, its handler blocks
    // in a write, its queue overflows.
    // Its own channel with a small, fixed receive window (no BDP growth), so that it stalls within a few
    // frames rather than after gRPC buffered megabytes for it.
    grpc::ChannelArguments small_window;
    small_window.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
    small_window.SetInt(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, 16 * 1024);
    auto stalled_stub = v1::Feed::NewStub(grpc::CreateCustomChannel(feed_->target(), grpc::InsecureChannelCredentials(), small_window));
    Stream stalled = subscribe(*stalled_stub, v1::SubscribeRequest{});
    v1::Frame frame;
    ASSERT_TRUE(stalled.read(frame)) << stalled.finish().error_message();

    std::atomic<uint64_t> received{0}, last_sequence{0};
    std::atomic<bool> stop{false};
    Stream live = subscribe(*stub_, request_for({"zones", "unaccounted"}));
    std::thread reader([&] {
        v1::Frame f;
        while (!stop && live.read(f)) {
            ++received;
            last_sequence = f.sequence();
        }
    });
    // Joined on every path out of the test, failed assertions included.
    const auto joiner = std::unique_ptr<std::thread, void (*)(std::thread*)>(&reader, [](std::thread* t) {
        if (t->joinable()) t->join();
    });
    const auto stop_live = [&] {
        stop = true;
        live.context->TryCancel();
    };
    struct OnExit {
        std::function<void()> f;
        ~OnExit() { f(); }
    } cancel_live{stop_live};
    v1::Description d;
    ASSERT_TRUE(e2e::wait_until([&] { return describe(*stub_, d).ok() && d.stats().subscribers_dropped() >= 1; }, kDeadline))
        << feed_->log();
    const uint64_t at_drop = received;
    EXPECT_TRUE(e2e::wait_until([&] { return received >= at_drop + 5; }, kDeadline)) << "the other subscriber keeps receiving";

    // The stalled client reads again: what was already in flight, then the reason it was dropped.
    while (stalled.read(frame)) {
    }
    const grpc::Status s = stalled.finish();
    EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << s.error_message();
    EXPECT_NE(s.error_message().find("behind"), std::string::npos) << s.error_message();

    stop_live();
    reader.join();
    EXPECT_EQ(live.finish().error_code(), grpc::StatusCode::CANCELLED) << "the live subscriber was never dropped";
}

TEST_F(SubscriberLimits, SubscriberCountIsBounded) {
    std::vector<Stream> streams;
    v1::Frame frame;
    for (int i = 0; i < 3; ++i) {
        streams.push_back(subscribe(*stub_, request_for({"zones"})));
        ASSERT_TRUE(streams.back().read(frame));
    }
    const grpc::Status s = refused(*stub_, request_for({"zones"}));
    EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
    EXPECT_NE(s.error_message().find("at most 3 subscribers"), std::string::npos) << s.error_message();
    for (Stream& stream : streams) stream.context->TryCancel();
    for (Stream& stream : streams) stream.finish();
    // Slots come back once the handlers saw the cancellation.
    EXPECT_TRUE(e2e::wait_until([&] {
        Stream again = subscribe(*stub_, request_for({"zones"}), 30s);
        const bool ok = again.read(frame);
        again.context->TryCancel();
        again.finish();
        return ok;
    }, kDeadline));
}

}  // namespace
}  // namespace feed_test
