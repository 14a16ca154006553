// Whole-node meters in the estimator: a platform zone (a BMC's power supplies, an ACPI meter) is never
// added to package and DRAM; the node's `other` part is platform − (package + dram + gpu); one meter's
// platform zones are used where several meters see the wall; each zone keeps its own meter's label; and
// kepler_platform_watts / kepler_platform_joules_total per meter with Kepler 0.11's labels.
#include <gtest/gtest.h>

#include "export/prometheus_export.hpp"
#include "pipeline/estimator.hpp"
#include "support/metric_series.hpp"
#include "support/test_frames.hpp"

using namespace kepler::estimate;
using namespace estimate_test;

namespace {

constexpr uint64_t kSecond = 1'000'000'000ull;

keplershm_zone_info meter_zone(const std::string& name, uint32_t power_source, uint32_t detail) {
    keplershm_zone_info z = zone_info(name, KEPLERSHM_ZONE_PLATFORM, 0);
    z.power_source = power_source;
    z.meter_detail = detail;
    z.max_energy_range_uj = 0;
    return z;
}

/// package-0, dram-0 (RAPL), two power supplies read from the BMC, an ACPI meter.
keplershm::WriterOptions bmc_node() {
    keplershm::WriterOptions o = node_options(4, kProcfsMetrics,
                                              {zone_info("package-0", KEPLERSHM_ZONE_PACKAGE, 0), zone_info("dram-0", KEPLERSHM_ZONE_DRAM, 0),
                                               meter_zone("1U/Bay1", KEPLERSHM_POWER_REDFISH, KEPLERSHM_METER_POWER_SUPPLY),
                                               meter_zone("1U/Bay2", KEPLERSHM_POWER_REDFISH, KEPLERSHM_METER_POWER_SUPPLY),
                                               meter_zone("power_meter-power1", KEPLERSHM_POWER_ACPI, KEPLERSHM_METER_POWER_METER)});
    o.platform_meter_id = "bmc-7";
    return o;
}

double sum_of(const std::vector<prometheus::MetricFamily>& families, const std::string& name, const Labels& labels) {
    return series_sum(families, name, labels);
}

TEST(Platform, OtherIsWhatTheWallSawBeyondTheComponentsAndWorkloadsAddUpToTheWall) {
    Feed feed(bmc_node(), "platform");
    Estimator est(EstimatorOptions{});
    // 1 s: package 100 J, DRAM 20 J; supplies 150 J + 100 J; the ACPI meter 400 J (another view of the wall).
    TestFrame f = simple_frame(kSecond, kSecond, {kSecond / 2, kSecond / 4}, {100'000'000, 20'000'000, 150'000'000, 100'000'000, 400'000'000});
    ASSERT_TRUE(est.process(feed.frame(f)));
    ASSERT_TRUE(est.process(feed.frame(simple_frame(2 * kSecond, kSecond, {kSecond / 2, kSecond / 4},
                                                    {100'000'000, 20'000'000, 150'000'000, 100'000'000, 400'000'000}))));
    const auto families = collect(PrometheusExport(est, ExportOptions{}));

    // Node: platform is the BMC's 250 J per second (the ACPI meter is not added), other = 250 − 120.
    EXPECT_NEAR(sum_of(families, "kepler_node_platform_joules_total", {}), 500.0, 1e-6);
    EXPECT_NEAR(sum_of(families, "kepler_node_other_joules_total", {}), 260.0, 1e-6);
    EXPECT_NEAR(sum_of(families, "kepler_node_package_joules_total", {{"source", "rapl"}}), 200.0, 1e-6)
        << "each zone keeps its own meter's label";
    EXPECT_NEAR(sum_of(families, "kepler_node_platform_joules_total", {{"source", "redfish"}}), 500.0, 1e-6);
    // Workloads: package + dram + other = the wall, conserved (Kepler 0.7's container totals).
    EXPECT_NEAR(sum_of(families, "kepler_container_joules_total", {}), 500.0, 1e-6);
    EXPECT_NEAR(sum_of(families, "kepler_container_other_joules_total", {}), 260.0, 1e-6) << "other is attributed, not 0";

    // Per meter, Kepler 0.11's family and labels.
    const std::optional<double> bay1 = series_value(families, "kepler_platform_watts",
                                                    {{"source", "redfish"}, {"bmc_id", "bmc-7"}, {"chassis_id", "1U"},
                                                     {"source_id", "Bay1"}, {"source_type", "PowerSupply"}});
    ASSERT_TRUE(bay1);
    EXPECT_NEAR(*bay1, 150.0, 1e-6);
    EXPECT_NEAR(series_value(families, "kepler_platform_joules_total", {{"source_id", "Bay2"}}).value_or(-1), 200.0, 1e-6);
    EXPECT_NEAR(series_value(families, "kepler_platform_watts", {{"source", "acpi"}, {"source_type", "PowerMeter"}}).value_or(-1), 400.0,
                1e-6)
        << "every meter is shown, also the one the node's total does not use";
    EXPECT_EQ(series_value(families, "kepler_node_info", {{"platform_power_source", "redfish"}, {"components_power_source", "rapl-sysfs"}}), 1.0);
}

TEST(Platform, AStaleMeterHasNoWattsAndKeepsItsEnergy) {
    Feed feed(bmc_node(), "platform-stale");
    Estimator est(EstimatorOptions{});
    ASSERT_TRUE(est.process(feed.frame(simple_frame(kSecond, kSecond, {kSecond}, {100'000'000, 20'000'000, 150'000'000, 100'000'000, 0}))));
    TestFrame f = simple_frame(2 * kSecond, kSecond, {kSecond}, {100'000'000, 20'000'000, 0, 0, 0});
    f.zones[2].valid = false;  // the BMC's readings went stale
    f.zones[3].valid = false;
    ASSERT_TRUE(est.process(feed.frame(f)));
    const auto families = collect(PrometheusExport(est, ExportOptions{}));
    EXPECT_FALSE(series_value(families, "kepler_platform_watts", {{"source_id", "Bay1"}})) << "a stale reading is not a value";
    EXPECT_NEAR(series_value(families, "kepler_platform_joules_total", {{"source_id", "Bay1"}}).value_or(-1), 150.0, 1e-6);
}

TEST(Platform, WithoutAPlatformMeterThereIsNoOtherPart) {
    Feed feed(node_options(4, kProcfsMetrics, {zone_info("package-0", KEPLERSHM_ZONE_PACKAGE, 0)}), "platform-none");
    Estimator est(EstimatorOptions{});
    ASSERT_TRUE(est.process(feed.frame(simple_frame(kSecond, kSecond, {kSecond}, {50'000'000}))));
    const auto families = collect(PrometheusExport(est, ExportOptions{}));
    EXPECT_NEAR(sum_of(families, "kepler_node_other_joules_total", {}), 0.0, 1e-9);
    EXPECT_FALSE(series_value(families, "kepler_platform_watts", {}));
}

}  // namespace
