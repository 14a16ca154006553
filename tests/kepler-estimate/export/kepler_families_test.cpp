// The Kepler-compatible families from a ledger fed with synthetic frames: Kepler 0.7's zone families
// (zero where the zone is not measured), usage counters only for metrics the frames carry, node and
// build info, Kepler >= 0.10's names, and `both` as the exact union of the two sets.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <set>

#include "pipeline/estimator.hpp"
#include "app/options.hpp"
#include "export/prometheus_export.hpp"
#include "support/metric_series.hpp"
#include "support/test_frames.hpp"

using namespace kepler::estimate;
using namespace estimate_test;

namespace {

constexpr uint64_t kSecond = 1'000'000'000ull;
using Families = std::vector<prometheus::MetricFamily>;

std::set<std::string> names(const Families& families) {
    std::set<std::string> out;
    for (const auto& f : families) out.insert(f.name);
    return out;
}

keplershm::WriterOptions package_and_dram(uint64_t mask) {
    return node_options(4, mask, {zone_info("package-0", KEPLERSHM_ZONE_PACKAGE, 0), zone_info("dram-0", KEPLERSHM_ZONE_DRAM, 0)});
}

/// A pod container (pid 1), a kernel thread (pid 2) and a host process (pid 3); 10 J package, 2 J dram.
TestFrame frame(uint64_t start, bool with_web = true) {
    TestFrame f;
    f.start_ns = start;
    f.end_ns = start + kSecond;
    f.workloads = {TestWorkload{.kind = KEPLERSHM_WORKLOAD_POD, .container_id = "c-web", .container_name = "web", .pod_uid = "u1",
                                .pod_name = "web-0", .pod_namespace = "shop"},
                   TestWorkload{.kind = KEPLERSHM_WORKLOAD_KERNEL}};
    if (with_web) f.processes.push_back(TestProcess{.pid = 1, .start_time_ticks = 5, .cpu_time_ns = 200'000'000, .workload = 0, .cycles = 1000});
    f.processes.push_back(TestProcess{.pid = 2, .start_time_ticks = 5, .cpu_time_ns = 50'000'000, .workload = 1});
    f.processes.push_back(TestProcess{.pid = 3, .start_time_ticks = 5, .cpu_time_ns = 100'000'000, .workload = KEPLERSHM_NO_WORKLOAD,
                                      .cycles = 500});
    f.zones = {{0, 10'000'000}, {1, 2'000'000}};
    f.cpu_busy_ns = {350'000'000, 0, 0, 0};
    f.cpu_idle_ns = {650'000'000, 1'000'000'000, 1'000'000'000, 1'000'000'000};
    return f;
}

Families collect(const Estimator& est, MetricNames names, bool processes = true) {
    return estimate_test::collect(PrometheusExport(est, ExportOptions{.process_metrics = processes, .include_timing = false, .names = names}));
}

}  // namespace

TEST(Kepler07Families, EveryZoneFamilyPerEntityZeroWhereNotMeasured) {
    Feed feed(package_and_dram(kProcfsMetrics));
    Estimator est(EstimatorOptions{});
    for (int i = 0; i < 3; ++i) ASSERT_TRUE(est.process(feed.frame(frame((i + 1) * kSecond))));
    const Families f = collect(est, MetricNames::kepler07);
    for (const char* level : {"container", "pod", "namespace", "process"}) {
        for (const char* zone : {"package", "core", "uncore", "dram", "platform", "other", "gpu"}) {
            EXPECT_TRUE(series_value(f, fmt::format("kepler_{}_{}_joules_total", level, zone))) << level << " " << zone;
        }
    }
    for (const char* zone : {"core", "uncore", "other", "gpu", "platform"}) {
        EXPECT_EQ(series_sum(f, fmt::format("kepler_container_{}_joules_total", zone)), 0.0) << zone;
        EXPECT_EQ(series_value(f, fmt::format("kepler_node_{}_joules_total", zone), {{"package", "0"}, {"mode", "dynamic"}}), 0.0) << zone;
    }
    // Per zone, the containers (with system, kernel and unaccounted) sum to the node: 3 x (10 J, 2 J).
    EXPECT_NEAR(series_sum(f, "kepler_container_package_joules_total"), 30.0, 1e-6);
    EXPECT_NEAR(series_sum(f, "kepler_container_dram_joules_total"), 6.0, 1e-6);
    EXPECT_NEAR(series_sum(f, "kepler_node_package_joules_total"), 30.0, 1e-6);
    // Kepler's labels: kernel threads in namespace "kernel", a source label on container energy.
    EXPECT_TRUE(series_value(f, "kepler_container_joules_total", {{"container_id", "kernel_processes"}, {"container_namespace", "kernel"}}));
    EXPECT_TRUE(series_value(f, "kepler_container_joules_total", {{"container_id", "system_processes"}, {"container_namespace", "system"}}));
    EXPECT_TRUE(series_value(f, "kepler_container_joules_total", {{"container_id", "c-web"}, {"source", "rapl"}, {"mode", "idle"}}));
    EXPECT_TRUE(series_value(f, "kepler_process_joules_total", {{"pid", "1"}, {"source", "rapl"}}));
}

TEST(Kepler07Families, UsageCountersOnlyForMetricsTheFramesCarry) {
    Feed feed(package_and_dram(kProcfsMetrics | KEPLERSHM_METRIC_CYCLES));
    Estimator est(EstimatorOptions{});
    for (int i = 0; i < 2; ++i) ASSERT_TRUE(est.process(feed.frame(frame((i + 1) * kSecond))));
    Families f = collect(est, MetricNames::kepler07);
    const Labels web = {{"container_id", "c-web"}, {"source", "synthetic"}};
    EXPECT_EQ(series_value(f, "kepler_container_bpf_cpu_time_ms_total", web), 400.0);
    EXPECT_EQ(series_value(f, "kepler_container_cpu_cycles_total", web), 2000.0);
    EXPECT_EQ(series_value(f, "kepler_process_cpu_cycles_total", {{"pid", "3"}}), 1000.0);
    EXPECT_EQ(series_value(f, "kepler_container_cpu_cycles_total", {{"container_id", "kernel_processes"}}), 0.0)
        << "the kernel thread's record has no valid cycles: nothing is added";
    for (const char* absent : {"kepler_container_cpu_instructions_total", "kepler_container_cache_miss_total",
                               "kepler_container_bpf_page_cache_hit_total", "kepler_container_bpf_net_rx_irq_total",
                               "kepler_process_cpu_instructions_total", "kepler_vm_cache_miss_total"}) {
        EXPECT_FALSE(series_value(f, absent)) << absent << ": the frames do not carry it, no fake zeros";
    }
    // The web process exits: its container's counters stay where they were, never decrease.
    ASSERT_TRUE(est.process(feed.frame(frame(3 * kSecond, false))));
    f = collect(est, MetricNames::kepler07);
    EXPECT_EQ(series_value(f, "kepler_container_bpf_cpu_time_ms_total", web), 400.0);
    EXPECT_EQ(series_value(f, "kepler_container_cpu_cycles_total", web), 2000.0);
}

TEST(Kepler07Families, NodeAndBuildInfo) {
    Feed feed(package_and_dram(kProcfsMetrics));
    Estimator est(EstimatorOptions{});
    Families f = collect(est, MetricNames::kepler07);
    EXPECT_EQ(series_value(f, "kepler_exporter_build_info", {{"os", "linux"}}), 1.0) << "build info exists before any frame";
    EXPECT_FALSE(series_value(f, "kepler_node_info"));
    ASSERT_TRUE(est.process(feed.frame(frame(kSecond))));
    f = collect(est, MetricNames::kepler07);
    EXPECT_EQ(series_value(f, "kepler_node_info", {{"cpu_architecture", "Test CPU @ 1.00GHz"}, {"components_power_source", "rapl-sysfs"},
                                            {"platform_power_source", "none"}, {"source", "os"}}),
              1.0);
    for (const auto& fam : f) {
        if (fam.name != "kepler_exporter_build_info") continue;
        for (const auto& l : fam.metric.at(0).label) EXPECT_FALSE(l.value.empty()) << l.name;
    }
}

TEST(Kepler07Families, EstimatedIdleSeriesOnlyWhenAsked) {
    Feed feed(node_options(4, kProcfsMetrics));  // no meter: the curve models the power
    Estimator est(EstimatorOptions{});
    ASSERT_TRUE(est.process(feed.frame(simple_frame(kSecond, kSecond, {kSecond}))));
    ExportOptions options{.include_timing = false};
    EXPECT_TRUE(series_value(collect(PrometheusExport(est, options)), "kepler_node_package_joules_total", {{"mode", "idle"}}));
    options.estimated_idle = false;
    const Families hidden = collect(PrometheusExport(est, options));
    EXPECT_FALSE(series_value(hidden, "kepler_node_package_joules_total", {{"mode", "idle"}}));
    EXPECT_FALSE(series_value(hidden, "kepler_container_joules_total", {{"mode", "idle"}}));
    EXPECT_TRUE(series_value(hidden, "kepler_container_joules_total", {{"mode", "dynamic"}}));
}

TEST(Kepler010Families, CurrentNamesAndLabels) {
    Feed feed(package_and_dram(kProcfsMetrics));
    Estimator est(EstimatorOptions{});
    for (int i = 0; i < 2; ++i) ASSERT_TRUE(est.process(feed.frame(frame((i + 1) * kSecond))));
    Families f = collect(est, MetricNames::kepler010);
    const Labels package = {{"zone", "package"}, {"node_name", std::string(est.node_name())}};
    const double node = series_value(f, "kepler_node_cpu_joules_total", package).value_or(-1);
    EXPECT_NEAR(node, 20.0, 1e-6);
    EXPECT_NEAR(*series_value(f, "kepler_node_cpu_active_joules_total", package) + *series_value(f, "kepler_node_cpu_idle_joules_total", package),
                node, 1e-6);
    EXPECT_NEAR(*series_value(f, "kepler_node_cpu_watts", {{"zone", "dram"}}), 2.0, 1e-6);
    EXPECT_NEAR(*series_value(f, "kepler_node_cpu_usage_ratio"), 0.35 / 4, 1e-9);
    EXPECT_TRUE(series_value(f, "kepler_node_cpu_info", {{"model_name", "Test CPU @ 1.00GHz"}}));
    const Labels web = {{"container_id", "c-web"}, {"container_name", "web"}, {"pod_id", "u1"}, {"state", "running"}, {"zone", "package"}};
    EXPECT_GT(*series_value(f, "kepler_container_cpu_joules_total", web), 0.0);
    EXPECT_EQ(series_value(f, "kepler_pod_cpu_joules_total", {{"pod_id", "u1"}, {"pod_name", "web-0"}, {"pod_namespace", "shop"}, {"zone", "package"}}),
              series_value(f, "kepler_container_cpu_joules_total", web));
    EXPECT_NEAR(*series_value(f, "kepler_container_cpu_seconds_total", {{"container_id", "c-web"}}), 0.4, 1e-9);
    EXPECT_NEAR(*series_value(f, "kepler_process_cpu_seconds_total", {{"pid", "3"}, {"type", "regular"}}), 0.2, 1e-9);
    EXPECT_TRUE(series_value(f, "kepler_process_cpu_joules_total", {{"pid", "1"}, {"type", "container"}, {"container_id", "c-web"}}));
    EXPECT_FALSE(series_value(f, "kepler_container_cpu_joules_total", {{"container_id", "kernel_processes"}}))
        << "host and kernel processes are no container in Kepler >= 0.10";
    EXPECT_EQ(series_value(f, "kepler_build_info"), 1.0);
    for (const std::string& name : names(f)) {
        EXPECT_TRUE(name.starts_with("kepler_node_cpu_") || name.starts_with("kepler_container_cpu_") ||
                    name.starts_with("kepler_pod_cpu_") || name.starts_with("kepler_process_cpu_") || name == "kepler_build_info" ||
                    name.starts_with("kepler_model_") || name.starts_with("kepler_estimator_"))
            << name << " is not a Kepler >= 0.10 name";
    }
    // The web container leaves: its series say terminated until they expire.
    ASSERT_TRUE(est.process(feed.frame(frame(3 * kSecond, false))));
    f = collect(est, MetricNames::kepler010);
    EXPECT_TRUE(series_value(f, "kepler_process_cpu_joules_total", {{"pid", "1"}, {"state", "terminated"}}));
}

TEST(MetricNamesBoth, IsTheUnionOfTheTwoSetsWithNothingTwice) {
    Feed feed(package_and_dram(kProcfsMetrics));
    Estimator est(EstimatorOptions{});
    for (int i = 0; i < 2; ++i) ASSERT_TRUE(est.process(feed.frame(frame((i + 1) * kSecond))));
    const Families old_names = collect(est, MetricNames::kepler07);
    const Families new_names = collect(est, MetricNames::kepler010);
    const Families both = collect(est, MetricNames::both);
    std::set<std::string> expected = names(old_names);
    expected.merge(names(new_names));
    EXPECT_EQ(names(both), expected);
    for (const auto& f : both) {
        size_t series = 0;
        for (const Families* set : {&old_names, &new_names}) {
            for (const auto& g : *set) {
                if (g.name == f.name && !f.name.starts_with("kepler_model_") && !f.name.starts_with("kepler_estimator_")) {
                    series += g.metric.size();
                }
            }
        }
        if (series > 0) {
            EXPECT_EQ(f.metric.size(), series) << f.name << ": a family is in one set only, served once";
        }
    }
}

TEST(MetricNamesOption, ParsesTheThreeSetsAndRejectsOthers) {
    EXPECT_EQ(metric_names_from_string("kepler-0.7"), MetricNames::kepler07);
    EXPECT_EQ(metric_names_from_string("kepler-0.10"), MetricNames::kepler010);
    EXPECT_EQ(metric_names_from_string("both"), MetricNames::both);
    EXPECT_FALSE(metric_names_from_string("kepler-0.8"));
    auto parse = [](std::vector<std::string> args, int& code) {
        std::vector<char*> argv;
        for (std::string& a : args) argv.push_back(a.data());
        return parse_options(static_cast<int>(argv.size()), argv.data(), code);
    };
    int code = 0;
    const auto ok = parse({"kepler-estimate", "--replay", "x", "--metric-names", "both"}, code);
    ASSERT_TRUE(ok);
    EXPECT_EQ(export_options(*ok).names, MetricNames::both);
    EXPECT_EQ(export_options(*parse({"kepler-estimate", "--replay", "x"}, code)).names, MetricNames::kepler07) << "the default";
    testing::internal::CaptureStderr();
    EXPECT_FALSE(parse({"kepler-estimate", "--replay", "x", "--metric-names", "kepler-1.0"}, code));
    const std::string err = testing::internal::GetCapturedStderr();
    EXPECT_NE(code, 0);
    EXPECT_NE(err.find("kepler-1.0"), std::string::npos) << err;
}

TEST(KeplerNames, ProcessSeriesAreOnByDefaultUnderKepler010NamesAsKeplersMetricsLevelHasThem) {
    auto process_metrics = [](std::vector<std::string> args) {
        std::vector<char*> argv;
        for (std::string& a : args) argv.push_back(a.data());
        int code = 0;
        const auto options = parse_options(static_cast<int>(argv.size()), argv.data(), code);
        if (!options) throw std::runtime_error("options refused");
        return export_options(*options).process_metrics;
    };
    EXPECT_FALSE(process_metrics({"kepler-estimate", "--replay", "x"})) << "Kepler 0.7 names: off, as Kepler 0.7";
    EXPECT_TRUE(process_metrics({"kepler-estimate", "--replay", "x", "--metric-names", "kepler-0.10"}));
    EXPECT_TRUE(process_metrics({"kepler-estimate", "--replay", "x", "--metric-names", "both"}));
    EXPECT_FALSE(process_metrics({"kepler-estimate", "--replay", "x", "--metric-names", "kepler-0.10", "--no-process-metrics"}));
    EXPECT_TRUE(process_metrics({"kepler-estimate", "--replay", "x", "--process-metrics"}));
}

// Two entities the ledger keeps apart are two series in every name set, never one label set twice (a
// scrape with a label set twice keeps one of the samples; a counter then jumps between the two, and
// Prometheus sees a reset): pods the estimator has no names for (--kube off, or before the names
// arrive), a pod recreated under its old name (a StatefulSet's), and a pid reused twice while the ended
// processes are still exported.
TEST(KeplerFamilies, EntitiesTheLedgerKeepsApartAreNeverOneLabelSet) {
    Feed feed(package_and_dram(kProcfsMetrics));
    Estimator est(EstimatorOptions{});
    for (uint64_t i = 0; i < 3; ++i) {
        TestFrame f;
        f.start_ns = (i + 1) * kSecond;
        f.end_ns = f.start_ns + kSecond;
        f.workloads = {TestWorkload{.container_id = "c-a", .pod_uid = "uid-a"}, TestWorkload{.container_id = "c-b", .pod_uid = "uid-b"},
                       TestWorkload{.container_id = fmt::format("c-web-{}", i), .pod_uid = fmt::format("uid-web-{}", i),
                                    .pod_name = "web-0", .pod_namespace = "shop"}};
        for (uint32_t w = 0; w < 3; ++w) {
            f.processes.push_back(TestProcess{.pid = 10 + w, .start_time_ticks = 5, .cpu_time_ns = 100'000'000, .workload = w});
        }
        f.processes.push_back(TestProcess{.pid = 7, .start_time_ticks = 100 + i, .cpu_time_ns = 100'000'000, .workload = 0});
        f.zones = {{0, 10'000'000}, {1, 2'000'000}};
        f.cpu_busy_ns = {400'000'000, 0, 0, 0};
        f.cpu_idle_ns = {600'000'000, 1'000'000'000, 1'000'000'000, 1'000'000'000};
        ASSERT_TRUE(est.process(feed.frame(f)));
    }
    for (const MetricNames names : {MetricNames::kepler07, MetricNames::kepler010, MetricNames::both}) {
        for (const prometheus::MetricFamily& family : collect(est, names)) {
            std::set<std::vector<std::pair<std::string, std::string>>> seen;
            for (const prometheus::ClientMetric& m : family.metric) {
                std::vector<std::pair<std::string, std::string>> labels;
                for (const prometheus::ClientMetric::Label& l : m.label) labels.emplace_back(l.name, l.value);
                std::sort(labels.begin(), labels.end());
                std::string shown;
                for (const auto& [k, v] : labels) shown += fmt::format("{}=\"{}\",", k, v);
                EXPECT_TRUE(seen.insert(labels).second) << family.name << "{" << shown << "} twice";
            }
        }
    }
}

// Frames the collector flagged CUT_INEXACT are counted, so that a dashboard can tell the per-process split
// of those frames is within a slice rather than exact.
TEST(EstimatorHealth, FramesWhoseCutWasInexactAreCounted) {
    Feed feed(package_and_dram(kProcfsMetrics));
    Estimator est(EstimatorOptions{});
    for (int i = 0; i < 4; ++i) {
        TestFrame f = frame((i + 1) * kSecond);
        if (i % 2 == 1) f.frame_flags = KEPLERSHM_FRAME_CUT_INEXACT;
        ASSERT_TRUE(est.process(feed.frame(f)));
    }
    EXPECT_EQ(est.health().frames_cut_inexact, 2u);
    EXPECT_EQ(series_value(collect(est, MetricNames::kepler07), "kepler_estimator_frames_cut_inexact_total"), 2.0);
}
