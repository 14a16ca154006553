// The board's own synchronisation, without gRPC (so that ThreadSanitizer sees every access: Debian's
// gRPC is not instrumented): a real estimates segment written through libkeplershm, the board's reader
// thread on it, and several handler threads asking for the answers of the same frames at once.
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <unistd.h>

#include <atomic>
#include <thread>

#include "join/estimates_board.hpp"
#include "keplershm/keplershm.hpp"

namespace kepler::feed {
namespace {

using namespace std::chrono_literals;
constexpr uint64_t kGeneration = 0xfeed;

std::string unique_name(const char* stem) {
    static std::atomic<int> counter{0};
    return fmt::format("{}-{}-{}", stem, getpid(), counter++);
}

keplershm::WriterOptions estimates_options() {
    keplershm::WriterOptions o;
    o.segment_kind = KEPLERSHM_SEGMENT_ESTIMATES;
    o.node_name = "model";
    o.process_capacity = 8;
    o.workload_capacity = o.zone_capacity = o.cpu_capacity = 1;
    o.string_capacity = 64;
    o.slot_count = 64;
    o.heartbeat_period = 100ms;
    keplershm_zone_info package{};
    package.kind = KEPLERSHM_ZONE_PACKAGE;
    o.zones = {package};
    return o;
}

/// Publishes the answer to collector frame (kGeneration, sequence): `sequence` watts in zone 0.
void answer(keplershm::Writer& writer, uint64_t sequence) {
    keplershm::Draft d = writer.begin();
    d.frame().producer_generation = kGeneration;
    d.frame().producer_sequence = sequence;
    keplershm_estimate row{};
    row.power_watts = row.energy_joules = static_cast<double>(sequence);
    d.add_estimate(row);
    writer.commit(d);
}

/// The collector frame (kGeneration, sequence) as the feed's reader would have read it just now. With
/// no interval the wait is the board's own bound.
Snapshot frame(uint64_t sequence) {
    Snapshot s;
    s.generation = kGeneration;
    s.sequence = sequence;
    s.read_at = std::chrono::steady_clock::now();
    return s;
}

/// Until the board has read the answer to frame `sequence` (bounded: a failing test ends).
bool read_by_board(const EstimatesBoard& board, uint64_t sequence) {
    for (auto until = std::chrono::steady_clock::now() + 30s; std::chrono::steady_clock::now() < until; std::this_thread::sleep_for(5ms))
        if (board.status()[0].answered.sequence == sequence) return true;
    return false;
}

TEST(EstimatesBoard, HandlersWaitingTogetherGetTheAnswerToTheirFrameOnly) {
    const std::string name = unique_name("board"), absent = unique_name("board-absent");
    keplershm::Writer writer(name, estimates_options());
    EstimatesBoard board({name, absent}, 5000ms);  // generous: the answer comes long before
    board.start();
    answer(writer, 1);  // so that frame 2's source "keeps up" and is waited for
    ASSERT_TRUE(read_by_board(board, 1));
    for (uint64_t n = 2; n < 30; ++n) {
        const Snapshot f = frame(n);
        std::atomic<int> got{0};
        std::vector<std::thread> handlers;
        for (int h = 0; h < 3; ++h) {
            handlers.emplace_back([&] {
                const std::vector<SourceAnswer> answers = board.answers_for(f);
                ASSERT_EQ(answers.size(), 2u);
                EXPECT_EQ(answers[1].answer, nullptr);
                EXPECT_NE(answers[1].reason.find("not there"), std::string::npos) << answers[1].reason;
                if (answers[0].answer == nullptr) return;
                EXPECT_EQ(answers[0].answer->frame, (FrameId{kGeneration, n})) << "never another frame's answer";
                ++got;
            });
        }
        answer(writer, n);  // while the handlers wait (or before some of them ask: they find it at once)
        for (std::thread& t : handlers) t.join();
        EXPECT_EQ(got.load(), 3) << "frame " << n;
    }
    const std::vector<SourceStatus> status = board.status();
    EXPECT_EQ(status[0].answers, 29u);
    EXPECT_EQ(status[0].rejected, 0u);
    EXPECT_EQ(status[0].model, "model");
    board.stop();
}

TEST(EstimatesBoard, ASourceThatLeftThePreviousFrameUnansweredIsNotWaitedFor) {
    const std::string name = unique_name("board-silent");
    keplershm::Writer writer(name, estimates_options());
    EstimatesBoard board({name}, 5000ms);
    board.start();
    answer(writer, 5);  // alive and attached
    ASSERT_TRUE(read_by_board(board, 5));
    const auto started = std::chrono::steady_clock::now();
    const std::vector<SourceAnswer> answers = board.answers_for(frame(7));  // frame 6 has no answer
    EXPECT_LT(std::chrono::steady_clock::now() - started, 4s) << "the 5 s bound was waited for";
    ASSERT_EQ(answers.size(), 1u);
    EXPECT_EQ(answers[0].answer, nullptr);
    EXPECT_NE(answers[0].reason.find("not waited for"), std::string::npos) << answers[0].reason;
    board.stop();
}

}  // namespace
}  // namespace kepler::feed
