// Node features exactly as MODELS.md defines them: units, validity flags, unavailable != zero.
#include <gtest/gtest.h>

#include "model/features.hpp"
#include "support/test_frames.hpp"

using namespace kepler::estimate;
using namespace estimate_test;

namespace {
constexpr uint64_t kSecond = 1'000'000'000ull;

TestFrame two_second_frame() {
    TestFrame f;
    f.start_ns = 10 * kSecond;
    f.end_ns = 12 * kSecond;
    f.processes = {TestProcess{.pid = 1, .start_time_ticks = 5, .cpu_time_ns = 600'000'000, .cache_misses = 4000, .cycles = 2'000'000},
                   TestProcess{.pid = 2, .start_time_ticks = 6, .cpu_time_ns = 200'000'000, .cycles = 1'000'000},
                   TestProcess{.pid = 3, .start_time_ticks = 7, .cpu_time_ns = 0}};
    f.unaccounted_cpu_ns = 200'000'000;
    f.cpu_busy_ns = {700'000'000, 300'000'000};
    return f;
}
}  // namespace

TEST(Features, MatchTheModelsContract) {
    const std::string name = unique_segment_name("feat");
    TestWriter writer(name, node_options(2, kProcfsMetrics | KEPLERSHM_METRIC_CYCLES));
    keplershm::Reader reader = keplershm::Reader::open(name);
    FrameBuffer buffer;
    const NodeFeatures f = compute_features(buffer.roundtrip(writer, reader, two_second_frame()));
    EXPECT_DOUBLE_EQ(f.interval_s, 2.0);
    EXPECT_DOUBLE_EQ(*f[Feature::cpu_time_ms_per_s], 1000.0 / 2);  // processes + unaccounted
    EXPECT_DOUBLE_EQ(*f[Feature::node_cpu_busy_ms_per_s], 500.0);
    EXPECT_DOUBLE_EQ(*f[Feature::cpu_count], 2.0);
    EXPECT_DOUBLE_EQ(*f[Feature::cycles_per_s], 1'500'000.0);
    // The node lacks the metric: unavailable, never zero, even though a record carries a value.
    EXPECT_FALSE(f[Feature::cache_misses_per_s].has_value());
    EXPECT_FALSE(f[Feature::softirq_net_rx_per_s].has_value());
}

TEST(Features, NamesRoundTripAndCarryUnits) {
    for (size_t i = 0; i < kFeatureCount; ++i) {
        const Feature f = static_cast<Feature>(i);
        EXPECT_EQ(feature_from_name(feature_name(f)), f);
        EXPECT_FALSE(feature_unit(f).empty());
    }
    EXPECT_FALSE(feature_from_name("csv:kubelet_cpu_usage").has_value());
    EXPECT_EQ(feature_metric(Feature::cpu_count), 0u);
}

TEST(Features, EmptyIntervalIsRejected) {
    const std::string name = unique_segment_name("feat");
    TestWriter writer(name, node_options(2, kProcfsMetrics));
    keplershm::Reader reader = keplershm::Reader::open(name);
    FrameBuffer buffer;
    TestFrame f = two_second_frame();
    f.end_ns = f.start_ns;
    EXPECT_THROW((void)compute_features(buffer.roundtrip(writer, reader, f)), std::invalid_argument);
}
