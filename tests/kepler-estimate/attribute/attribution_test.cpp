// Attribution: exact conservation per zone and interval, idle policies, the unaccounted record's share.
#include <gtest/gtest.h>

#include <numeric>
#include <random>

#include "pipeline/estimator.hpp"
#include "attribute/attribution.hpp"
#include "support/test_frames.hpp"

using namespace kepler::estimate;
using namespace estimate_test;

namespace {

constexpr uint64_t kSecond = 1'000'000'000ull;

uint64_t sum(const std::vector<uint64_t>& v) { return std::accumulate(v.begin(), v.end(), uint64_t{0}); }

/// Frames with a meter of two packages and a DRAM zone.
keplershm::WriterOptions metered_node() {
    return node_options(4, kProcfsMetrics | KEPLERSHM_METRIC_CACHE_MISSES,
                        {zone_info("package-0", KEPLERSHM_ZONE_PACKAGE, 0), zone_info("package-1", KEPLERSHM_ZONE_PACKAGE, 1),
                         zone_info("dram-0", KEPLERSHM_ZONE_DRAM, 0)});
}

struct Fixture {
    std::string name = unique_segment_name("attr");
    TestWriter writer;
    keplershm::Reader reader;
    FrameBuffer buffer;
    explicit Fixture(const keplershm::WriterOptions& options) : writer(name, options), reader(keplershm::Reader::open(name)) {}
    const keplershm::FrameView& frame(const TestFrame& f) { return buffer.roundtrip(writer, reader, f); }
};

TestFrame busy_frame(uint64_t t, std::vector<uint64_t> cpu_ns, uint64_t unaccounted_ns) {
    TestFrame f;
    f.start_ns = t;
    f.end_ns = t + kSecond;
    for (size_t i = 0; i < cpu_ns.size(); ++i) {
        TestProcess p;
        p.pid = static_cast<uint32_t>(100 + i);
        p.start_time_ticks = 1000 + i;
        p.cpu_time_ns = cpu_ns[i];
        f.processes.push_back(p);
    }
    f.unaccounted_cpu_ns = unaccounted_ns;
    f.zones = {{0, 30'000'000}, {1, 20'000'000}, {2, 5'000'000}};
    f.cpu_busy_ns = {500'000'000, 500'000'000, 0, 0};
    return f;
}

NodeEnergy node_energy(uint64_t total, uint64_t idle) {
    return NodeEnergy{{ZoneEnergy{ZoneKey{ZoneKind::package, 0}, total, idle, {}}}, "test"};
}

void expect_conserved(const Attribution& a) {
    for (const ZoneShares& s : a.zones) {
        EXPECT_EQ(sum(s.dynamic_uj) + s.unaccounted_dynamic_uj + s.kernel_dynamic_uj, s.node.total_uj - s.node.idle_uj)
            << zone_name(s.node.zone.kind);
        EXPECT_EQ(sum(s.idle_uj) + s.unaccounted_idle_uj + s.kernel_idle_uj + s.node_idle_uj, s.node.idle_uj)
            << zone_name(s.node.zone.kind);
    }
}

}  // namespace

TEST(SplitEnergy, PartsSumExactlyForRandomWeights) {
    std::mt19937_64 rng(42);
    for (int round = 0; round < 2000; ++round) {
        const size_t n = rng() % 50;
        std::vector<uint64_t> weights(n);
        for (uint64_t& w : weights) w = rng() % 4 == 0 ? 0 : rng() % 5'000'000'000ull;
        const uint64_t unaccounted = rng() % 3 == 0 ? 0 : rng() % 1'000'000'000ull;
        const uint64_t energy = rng() % 1'000'000'000'000ull;
        std::vector<uint64_t> parts(n);
        uint64_t rest = 0;
        split_energy(energy, weights, unaccounted, parts, rest);
        ASSERT_EQ(sum(parts) + rest, energy) << "round " << round;
        const double total_weight = static_cast<double>(sum(weights) + unaccounted);
        for (size_t i = 0; i < n && total_weight > 0; ++i) {
            EXPECT_NEAR(static_cast<double>(parts[i]), static_cast<double>(energy) * weights[i] / total_weight, n + 1.0);
        }
    }
}

TEST(SplitEnergy, NoActivityGoesToUnaccounted) {
    std::vector<uint64_t> weights(5, 0), parts(5, 99);
    uint64_t rest = 0;
    split_energy(12345, weights, 0, parts, rest);
    EXPECT_EQ(rest, 12345u);
    EXPECT_EQ(sum(parts), 0u);
    split_energy(777, {}, 0, {}, rest);
    EXPECT_EQ(rest, 777u);
}

TEST(Attribution, ConservesEveryZoneUnderEveryPolicy) {
    Fixture fx(metered_node());
    uint64_t t = kSecond;
    const std::vector<TestFrame> frames = {busy_frame(t, {300'000'000, 100'000'000, 7, 0}, 50'000'000),
                                           busy_frame(t + kSecond, {}, 0),            // no processes at all
                                           busy_frame(t + 2 * kSecond, {0, 0, 0}, 0),  // processes, no activity
                                           busy_frame(t + 3 * kSecond, {1, 2, 3}, 999'999'999)};
    for (IdlePolicy policy : {IdlePolicy::cpu_share, IdlePolicy::even, IdlePolicy::none}) {
        for (const TestFrame& f : frames) {
            const keplershm::FrameView& view = fx.frame(f);
            for (uint64_t idle : {uint64_t{0}, uint64_t{10'000'000}, uint64_t{40'000'001}}) {
                Attribution a;
                attribute(view, node_energy(40'000'001, idle), policy, a);
                expect_conserved(a);
            }
        }
    }
}

TEST(Attribution, EstimatorTotalsMatchTheNodePerZone) {
    Fixture fx(metered_node());
    Estimator estimator(EstimatorOptions{});
    uint64_t t = kSecond;
    for (int i = 0; i < 20; ++i, t += kSecond) {
        TestFrame f = busy_frame(t, {static_cast<uint64_t>(i) * 10'000'000, 5'000'000, 0}, i % 3 == 0 ? 0 : 1'000'000);
        if (i % 5 == 0) f.processes.clear();  // intervals with no process activity
        f.processes.push_back(TestProcess{.pid = static_cast<uint32_t>(5000 + i), .start_time_ticks = 1, .cpu_time_ns = static_cast<uint64_t>(i) * 1000});
        f.zones = {{0, 1'000'000u + i * 7'777u}, {1, 2'000'000u + i * 3u}, {2, 333'333u}};
        ASSERT_TRUE(estimator.process(fx.frame(f)));
        expect_conserved(estimator.last_attribution());
    }
    const Ledger& ledger = estimator.ledger();
    for (size_t z = 0; z < ledger.zones().size(); ++z) {
        uint64_t containers = 0;
        for (const auto& [_, c] : ledger.containers()) {
            if (z < c.energy.total.size()) containers += c.energy.total[z].dynamic_uj + c.energy.total[z].idle_uj;
        }
        EXPECT_EQ(containers, ledger.node().total[z].dynamic_uj + ledger.node().total[z].idle_uj) << "zone slot " << z;
    }
    EXPECT_EQ(ledger.zones().size(), 3u);
}

TEST(Attribution, UnaccountedGetsItsShareNotOtherProcesses) {
    Fixture fx(metered_node());
    const keplershm::FrameView& view = fx.frame(busy_frame(kSecond, {100'000'000, 300'000'000}, 400'000'000));
    Attribution a;
    attribute(view, node_energy(8'000'000, 0), IdlePolicy::cpu_share, a);
    ASSERT_EQ(a.zones.size(), 1u);
    EXPECT_EQ(a.zones[0].dynamic_uj[0], 1'000'000u);
    EXPECT_EQ(a.zones[0].dynamic_uj[1], 3'000'000u);
    EXPECT_EQ(a.zones[0].unaccounted_dynamic_uj, 4'000'000u);
}

// Busy time no task's clock covers (the CPU samples' irq/softirq/steal) is the kernel's, labelled: it
// leaves the unaccounted record, which keeps only what processes left out or lost.
TEST(Attribution, KernelTimeIsCarvedOutOfTheUnaccountedRecord) {
    Fixture fx(metered_node());
    TestFrame f = busy_frame(kSecond, {100'000'000, 300'000'000}, 400'000'000);
    f.cpu_irq_ns = {60'000'000, 40'000'000, 0, 0};  // 100 ms of the 400 ms unaccounted
    Attribution a;
    attribute(fx.frame(f), node_energy(8'000'000, 2'000'000), IdlePolicy::cpu_share, a);
    expect_conserved(a);
    EXPECT_EQ(a.zones[0].dynamic_uj[0], 750'000u);
    EXPECT_EQ(a.zones[0].kernel_dynamic_uj, 750'000u) << "100 of 800 ms busy";
    EXPECT_EQ(a.zones[0].unaccounted_dynamic_uj, 2'250'000u) << "300 of 800 ms busy";
    EXPECT_EQ(a.zones[0].kernel_idle_uj, 250'000u);
    EXPECT_EQ(a.zones[0].unaccounted_idle_uj, 750'000u);
}

TEST(Attribution, KernelTimeNeverTakesWhatProcessesLeftOut) {
    Fixture fx(metered_node());
    TestFrame f = busy_frame(kSecond, {100'000'000}, 200'000'000);
    f.truncated_cpu_ns = 150'000'000;
    f.cpu_irq_ns = {300'000'000, 0, 0, 0};  // more than the unaccounted record's remainder
    const keplershm::FrameView& view = fx.frame(f);
    EXPECT_EQ(kernel_cpu_time_ns(view), 50'000'000u) << "capped at unaccounted − truncated";
    Attribution a;
    attribute(view, node_energy(3'000'000, 0), IdlePolicy::cpu_share, a);
    expect_conserved(a);
    EXPECT_EQ(a.zones[0].kernel_dynamic_uj, 500'000u);
    EXPECT_EQ(a.zones[0].unaccounted_dynamic_uj, 1'500'000u);
}

TEST(Attribution, IdlePolicies) {
    Fixture fx(metered_node());
    const keplershm::FrameView& view = fx.frame(busy_frame(kSecond, {100'000'000, 300'000'000, 0, 0}, 0));
    const NodeEnergy node = node_energy(10'000'000, 4'000'000);

    Attribution share;
    attribute(view, node, IdlePolicy::cpu_share, share);
    EXPECT_EQ(share.zones[0].idle_uj, (std::vector<uint64_t>{1'000'000, 3'000'000, 0, 0}));
    EXPECT_EQ(share.zones[0].dynamic_uj, (std::vector<uint64_t>{1'500'000, 4'500'000, 0, 0}));

    Attribution even;
    attribute(view, node, IdlePolicy::even, even);
    EXPECT_EQ(even.zones[0].idle_uj, (std::vector<uint64_t>{1'000'000, 1'000'000, 1'000'000, 1'000'000}));
    EXPECT_EQ(even.zones[0].dynamic_uj, share.zones[0].dynamic_uj);  // dynamic energy never depends on the policy

    Attribution none;
    attribute(view, node, IdlePolicy::none, none);
    EXPECT_EQ(sum(none.zones[0].idle_uj), 0u);
    EXPECT_EQ(none.zones[0].node_idle_uj, 4'000'000u);
    EXPECT_EQ(none.zones[0].unaccounted_idle_uj, 0u);
}

TEST(Attribution, DramFollowsCacheMissesWhenTheFrameHasThem) {
    Fixture fx(metered_node());
    TestFrame f = busy_frame(kSecond, {100'000'000, 100'000'000}, 100'000'000);
    f.processes[0].cache_misses = 9000;
    f.processes[1].cache_misses = 1000;
    const keplershm::FrameView& view = fx.frame(f);
    NodeEnergy node{{ZoneEnergy{ZoneKey{ZoneKind::package, 0}, 3'000'000, 0, {}}, ZoneEnergy{ZoneKey{ZoneKind::dram, 0}, 1'000'000, 0, {}}}, "t"};
    Attribution a;
    attribute(view, node, IdlePolicy::cpu_share, a);
    EXPECT_FALSE(a.zones[0].by_cache_misses);
    EXPECT_EQ(a.zones[0].dynamic_uj, (std::vector<uint64_t>{1'000'000, 1'000'000}));
    EXPECT_TRUE(a.zones[1].by_cache_misses);
    EXPECT_EQ(a.zones[1].dynamic_uj, (std::vector<uint64_t>{900'000, 100'000}));
    expect_conserved(a);
}

TEST(Attribution, DramFallsBackToCpuTimeWithoutCounters) {
    Fixture fx(node_options(4, kProcfsMetrics, {zone_info("dram-0", KEPLERSHM_ZONE_DRAM, 0)}));
    TestFrame f = busy_frame(kSecond, {100'000'000, 300'000'000}, 0);
    f.processes[0].cache_misses = 5;  // flagged valid, but the node does not produce the metric
    const keplershm::FrameView& view = fx.frame(f);
    NodeEnergy node{{ZoneEnergy{ZoneKey{ZoneKind::dram, 0}, 4'000'000, 0, {}}}, "t"};
    Attribution a;
    attribute(view, node, IdlePolicy::cpu_share, a);
    EXPECT_FALSE(a.zones[0].by_cache_misses);
    EXPECT_EQ(a.zones[0].dynamic_uj, (std::vector<uint64_t>{1'000'000, 3'000'000}));
}
