// External models through the estimator, in-process, with real estimates segments: answers used as
// primary, the one bounded wait, late answers compared with their own frame's meter, producers that
// are silent, dead or hostile, recordings of an estimates segment, and the exported counters.
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <fcntl.h>
#include <unistd.h>

#include <fstream>
#include <thread>

#include "pipeline/estimator.hpp"
#include "export/prometheus_export.hpp"
#include "load/model_spec.hpp"
#include "read/frame_source.hpp"
#include "support/metric_series.hpp"
#include "support/test_estimates.hpp"
#include "support/test_frames.hpp"

using namespace kepler::estimate;
using namespace estimate_test;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

constexpr uint64_t kSecond = 1'000'000'000ull;

ModelReport report(const Estimator& e, const std::string& name) {
    for (const ModelReport& r : e.models().reports()) {
        if (r.name == name) return r;
    }
    throw std::runtime_error("no model " + name);
}

/// Polls until `done` holds (the feed's reader thread runs on its own); false after `limit`.
template <class Pred>
bool eventually(Pred done, std::chrono::milliseconds limit = 5000ms) {
    const auto end = Clock::now() + limit;
    while (!done()) {
        if (Clock::now() > end) return false;
        std::this_thread::sleep_for(5ms);
    }
    return true;
}

bool attached(const Estimator& est, const std::string& model) { return !report(est, model).external->producer.empty(); }

EstimatorOptions with_external(const std::string& segment, bool primary, std::chrono::milliseconds wait = 100ms) {
    EstimatorOptions options;
    options.models = {parse_model_spec("py=external:" + segment)};
    if (primary) options.primary = "py";
    options.model_set.external_wait = wait;
    return options;
}

keplershm::WriterOptions metered_node() { return node_options(4, kProcfsMetrics, {zone_info("package-0", KEPLERSHM_ZONE_PACKAGE, 0)}); }
keplershm::WriterOptions model_segment() { return estimates_options({zone_info("package", KEPLERSHM_ZONE_PACKAGE, 0)}, "notebook", "v1"); }

}  // namespace

TEST(ExternalModel, APrimaryAnswerIsUsedWaitedForBrieflyAndComparedWithTheMeter) {
    Feed collector(metered_node());
    const std::string name = unique_segment_name("estimates");
    TestEstimates model(name, model_segment());
    Estimator est(with_external(name, /*primary=*/true, 1000ms));
    ASSERT_TRUE(eventually([&] { return attached(est, "py"); })) << report(est, "py").reason;

    // Frame 1: the answer is there before the frame is estimated (per-process rows are not a node answer).
    const keplershm::FrameView& f1 = collector.frame(simple_frame(kSecond, kSecond, {kSecond}, {8'000'000}));
    model.answer(f1.generation(), f1.sequence(), {node_row(0, 10.0), process_row(42, 7, 1000.0)});
    ASSERT_TRUE(est.process(f1));
    EXPECT_EQ(est.primary_model(), "py");
    EXPECT_EQ(est.last_attribution().zones.at(0).node.total_uj, 10'000'000u);
    EXPECT_NEAR(report(est, "py").abs_error_w.at(ZoneKind::package), 2.0, 1e-9);
    EXPECT_NEAR(report(est, "py").mape.at(ZoneKind::package), 0.25, 1e-9);

    // Frame 2 (4 s interval: the wait is capped at 1 s): the answer comes 50 ms into the wait.
    const keplershm::FrameView& f2 = collector.frame(simple_frame(2 * kSecond, 4 * kSecond, {kSecond}, {32'000'000}));
    std::thread late_writer([&, id = std::pair(f2.generation(), f2.sequence())] {
        std::this_thread::sleep_for(50ms);
        model.answer(id.first, id.second, {node_row(0, 36.0, 4.0)});
    });
    ASSERT_TRUE(est.process(f2));
    late_writer.join();
    EXPECT_EQ(est.primary_model(), "py");
    EXPECT_EQ(report(est, "py").external->counts.used, 2u);

    // Frame 3: no answer at all: after the (bounded) wait the meter answers, and says why.
    const keplershm::FrameView& f3 = collector.frame(simple_frame(6 * kSecond, 4 * kSecond, {kSecond}, {32'000'000}));
    ASSERT_TRUE(est.process(f3));
    EXPECT_EQ(est.primary_model(), "measured");
    EXPECT_NE(report(est, "py").reason.find("no answer within the primary's wait"), std::string::npos) << report(est, "py").reason;

    // Frame 4: the producer fell behind, so it is not waited for at all (the wait would be 1 s).
    const keplershm::FrameView& f4 = collector.frame(simple_frame(10 * kSecond, 4 * kSecond, {kSecond}, {32'000'000}));
    const auto started = Clock::now();
    ASSERT_TRUE(est.process(f4));
    EXPECT_LT(Clock::now() - started, 500ms);
    EXPECT_EQ(est.primary_model(), "measured");
    EXPECT_NE(report(est, "py").reason.find("producer is behind"), std::string::npos) << report(est, "py").reason;

    const auto families = collect(PrometheusExport(est, ExportOptions{}));
    EXPECT_EQ(series_value(families, "kepler_model_answers_total", {{"model", "py"}, {"timing", "ready"}}), 2.0);
    EXPECT_EQ(series_value(families, "kepler_model_external_info", {{"model", "py"}, {"producer", "notebook"}, {"version", "v1"}, {"segment", name}}), 1.0);
    EXPECT_EQ(series_value(families, "kepler_model_node_joules_total", {{"model", "py"}, {"zone", "package"}}), 46.0);
    EXPECT_EQ(series_value(families, "kepler_model_rejected_answers_total", {{"model", "py"}}), 0.0);
    EXPECT_GE(series_value(families, "kepler_model_answer_lag_seconds", {{"model", "py"}}).value_or(-1), 0.0);
    EXPECT_EQ(series_value(families, "kepler_node_package_joules_total", {{"source", "py"}, {"mode", "dynamic"}}), 46.0);
}

TEST(ExternalModel, LateAnswersAreCountedAndComparedWithTheirOwnFramesMeter) {
    Feed collector(metered_node());
    const std::string name = unique_segment_name("estimates");
    TestEstimates model(name, model_segment());
    Estimator est(with_external(name, /*primary=*/false));
    ASSERT_TRUE(eventually([&] { return attached(est, "py"); }));

    // 10 ms frames; frame 1 (8 J metered = 800 W) is answered 100 ms after it was estimated: late.
    const keplershm::FrameView& f1 = collector.frame(simple_frame(kSecond, kSecond / 100, {kSecond / 200}, {8'000'000}));
    const auto id1 = std::pair(f1.generation(), f1.sequence());
    ASSERT_TRUE(est.process(f1));
    EXPECT_EQ(est.primary_model(), "measured");
    std::this_thread::sleep_for(100ms);
    model.answer(id1.first, id1.second, {node_row(0, 5.0, 0.01)});
    // Later frames have other meter readings: the error must be against frame 1's.
    uint64_t n = 1;
    ASSERT_TRUE(eventually([&] {
        const keplershm::FrameView& f = collector.frame(simple_frame((1 + n++) * kSecond, kSecond / 100, {kSecond / 200}, {1'000'000}));
        EXPECT_TRUE(est.process(f));
        return report(est, "py").external->counts.answers == 1;
    }));
    const ModelReport r = report(est, "py");
    EXPECT_EQ(r.external->counts.late, 1u);
    EXPECT_EQ(r.external->counts.used, 0u);
    EXPECT_GE(*r.external->last_lag_s, 0.1);
    EXPECT_NEAR(r.abs_error_w.at(ZoneKind::package), 300.0, 1e-6);  // |5 J - 8 J| / 10 ms
    EXPECT_NEAR(r.watts.at(ZoneKind::package), 500.0, 1e-6);
    EXPECT_EQ(r.energy_uj.at(ZoneKind::package), 5'000'000u);
}

TEST(ExternalModel, OtherModelsNeverWaitAndSilentFramesCountAsMissing) {
    Feed collector(metered_node());
    const std::string name = unique_segment_name("estimates");
    TestEstimates model(name, model_segment());  // alive, never answers
    EstimatorOptions options = with_external(name, /*primary=*/false, 1000ms);
    options.model_set.external_window = 3;
    Estimator est(options);
    ASSERT_TRUE(eventually([&] { return attached(est, "py"); }));
    const auto started = Clock::now();
    for (uint64_t n = 1; n <= 10; ++n) {
        ASSERT_TRUE(est.process(collector.frame(simple_frame(n * 4 * kSecond, 4 * kSecond, {kSecond}, {32'000'000}))));
    }
    EXPECT_LT(Clock::now() - started, 1000ms) << "a single wait for the external model would take 1 s";
    EXPECT_EQ(report(est, "py").external->counts.missing, 7u);  // frames 1..7 left the 3-frame window unanswered
    EXPECT_EQ(est.health().frames_read, 10u);
}

TEST(ExternalModel, ADeadProducerIsNotWaitedForEvenAsPrimary) {
    Feed collector(metered_node());
    const std::string name = unique_segment_name("estimates");
    auto model = std::make_unique<TestEstimates>(name, model_segment());
    Estimator est(with_external(name, /*primary=*/true, 1000ms));
    ASSERT_TRUE(eventually([&] { return attached(est, "py"); }));
    model.reset();  // retires the segment: the producer is gone
    uint64_t n = 0;
    ASSERT_TRUE(eventually([&] {
        est.process(collector.frame(simple_frame(++n * 4 * kSecond, 4 * kSecond, {kSecond}, {32'000'000})));
        return report(est, "py").reason.find("is gone") != std::string::npos;
    })) << report(est, "py").reason;
    const auto started = Clock::now();
    for (int i = 0; i < 5; ++i) {
        ASSERT_TRUE(est.process(collector.frame(simple_frame(++n * 4 * kSecond, 4 * kSecond, {kSecond}, {32'000'000}))));
        EXPECT_EQ(est.primary_model(), "measured");
    }
    EXPECT_LT(Clock::now() - started, 1000ms);
}

TEST(ExternalModel, HostileObjectsAtTheNameAreExplainedAndOutlived) {
    Feed collector(metered_node());
    const std::string name = unique_segment_name("estimates");
    SegmentCleanup cleanup{name};
    {  // noise where the segment should be
        const int fd = shm_open(("/" + name).c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
        ASSERT_GE(fd, 0);
        std::string noise(65536, '\0');
        for (size_t i = 0; i < noise.size(); ++i) noise[i] = static_cast<char>((i * 2654435761u) >> 13);
        ASSERT_EQ(write(fd, noise.data(), noise.size()), static_cast<ssize_t>(noise.size()));
        close(fd);
    }
    Estimator est(with_external(name, /*primary=*/true));
    uint64_t n = 0;
    auto step = [&] { return est.process(collector.frame(simple_frame(++n * kSecond, kSecond, {kSecond}, {8'000'000}))); };
    ASSERT_TRUE(eventually([&] {
        EXPECT_TRUE(step());
        return report(est, "py").reason.find("waiting for estimates segment " + name + " (") != std::string::npos;
    })) << report(est, "py").reason;
    EXPECT_EQ(est.primary_model(), "measured");

    // A collector's segment under the name: refused by kind, not read as answers.
    shm_unlink(("/" + name).c_str());
    TestWriter wrong_kind(name, node_options(4, kProcfsMetrics));
    wrong_kind.write(simple_frame(kSecond, kSecond, {1000}));
    ASSERT_TRUE(eventually([&] {
        EXPECT_TRUE(step());
        return report(est, "py").reason.find("not an estimates segment (kind 2): refused") != std::string::npos;
    })) << report(est, "py").reason;

    // A real estimates segment replaces it: answers are used again.
    keplershm::WriterOptions good = model_segment();
    good.replace_live = true;
    TestEstimates model(name, good);
    ASSERT_TRUE(eventually([&] {
        const keplershm::FrameView& f = collector.frame(simple_frame(++n * kSecond, kSecond, {kSecond}, {8'000'000}));
        model.answer(f, 9.0);
        EXPECT_TRUE(est.process(f));
        return est.primary_model() == "py";
    }, 10'000ms)) << report(est, "py").reason;
    EXPECT_EQ(est.health().frames_read, n);
    EXPECT_EQ(est.health().frames_unestimated, 0u);
}

TEST(ExternalModel, ARecordingOfAnEstimatesSegmentReplaysTheSameAnswers) {
    TempDir dir;
    const auto frames_path = dir.path() / "node.kshm";
    std::vector<TestFrame> frames;
    for (uint64_t n = 1; n <= 5; ++n) frames.push_back(simple_frame(n * kSecond, kSecond, {kSecond}, {8'000'000}));
    record_frames(frames_path, metered_node(), frames);
    std::vector<std::pair<uint64_t, uint64_t>> ids;
    {
        keplershm::Reader reader = keplershm::Reader::open_recording(frames_path.string());
        keplershm::FrameView view;
        while (reader.next(0ms, view) == keplershm::Status::ok) ids.emplace_back(view.generation(), view.sequence());
    }
    ASSERT_EQ(ids.size(), 5u);
    // The model answered frames 1, 2, 3 and 5, with 10 J + n; the estimates are recorded as they come.
    const auto answers_path = dir.path() / "model.kshm";
    {
        const std::string name = unique_segment_name("estimates-rec");
        TestEstimates model(name, model_segment());
        keplershm::Reader reader = keplershm::Reader::open(name);
        keplershm::Recorder recorder(answers_path.string());
        keplershm::FrameView view;
        for (size_t i = 0; i < ids.size(); ++i) {
            if (i == 3) continue;
            model.answer(ids[i].first, ids[i].second, {node_row(0, 10.0 + static_cast<double>(i))});
            ASSERT_EQ(reader.next(1000ms, view), keplershm::Status::ok);
            recorder.append(reader, view);
        }
        recorder.close();
    }
    Estimator est(with_external(answers_path.string(), /*primary=*/true));
    FrameSource source = FrameSource::replay(frames_path.string());
    keplershm::FrameView frame;
    std::vector<std::string> primaries;
    while (source.next(frame, 0ms) == FrameSource::Result::frame) {
        ASSERT_TRUE(est.process(frame));
        primaries.push_back(est.primary_model());
    }
    EXPECT_EQ(primaries, (std::vector<std::string>{"py", "py", "py", "measured", "py"}));
    const ModelReport r = report(est, "py");
    EXPECT_EQ(r.external->counts.used, 4u);
    EXPECT_EQ(r.external->counts.late, 0u);
    EXPECT_EQ(r.external->producer, "notebook");
    EXPECT_EQ(r.energy_uj.at(ZoneKind::package), 10'000'000u + 11'000'000u + 12'000'000u + 14'000'000u);
}

TEST(ExternalModel, AMissingSegmentIsWaitedForWhileOtherModelsAnswer) {
    Feed collector(node_options(4, kProcfsMetrics));
    Estimator est(with_external(unique_segment_name("absent"), /*primary=*/true));
    ASSERT_TRUE(est.process(collector.frame(simple_frame(kSecond, kSecond, {kSecond}))));
    EXPECT_EQ(est.primary_model(), "curve");
    EXPECT_NE(report(est, "py").reason.find("waiting for estimates segment"), std::string::npos) << report(est, "py").reason;
}
