// Aggregation process -> container -> pod -> namespace -> node and VMs; exited processes keep
// their energy; counters never decrease, also across a writer (collector) restart; retention.
#include <gtest/gtest.h>

#include <thread>

#include "pipeline/estimator.hpp"
#include "export/prometheus_export.hpp"
#include "export/top_view.hpp"
#include "read/frame_source.hpp"
#include "support/metric_series.hpp"
#include "support/test_frames.hpp"

using namespace kepler::estimate;
using namespace estimate_test;

namespace {

constexpr uint64_t kSecond = 1'000'000'000ull;

std::vector<TestWorkload> cluster_workloads() {
    return {
        TestWorkload{.kind = KEPLERSHM_WORKLOAD_POD, .container_id = "c1", .container_name = "web", .pod_uid = "uid-1", .pod_name = "p1", .pod_namespace = "ns1"},
        TestWorkload{.kind = KEPLERSHM_WORKLOAD_POD, .container_id = "c2", .container_name = "sidecar", .pod_uid = "uid-1", .pod_name = "p1", .pod_namespace = "ns1"},
        TestWorkload{.kind = KEPLERSHM_WORKLOAD_POD, .container_id = "c3", .container_name = "db", .pod_uid = "uid-2", .pod_name = "p2", .pod_namespace = "ns1"},
        TestWorkload{.kind = KEPLERSHM_WORKLOAD_CONTAINER, .container_id = "c4", .container_name = "docker-thing"},
        TestWorkload{.kind = KEPLERSHM_WORKLOAD_SYSTEM},
        TestWorkload{.kind = KEPLERSHM_WORKLOAD_KERNEL},
        TestWorkload{.kind = KEPLERSHM_WORKLOAD_VM, .vm_id = "vm-1", .vm_name = "guest"},
    };
}

/// pid i+1 in workload i, plus one process outside any workload and one with a bogus index.
TestFrame cluster_frame(uint64_t start, uint64_t meter_uj) {
    TestFrame f;
    f.start_ns = start;
    f.end_ns = start + kSecond;
    f.workloads = cluster_workloads();
    for (uint32_t i = 0; i < 7; ++i) {
        f.processes.push_back(TestProcess{.pid = i + 1, .start_time_ticks = 50, .cpu_time_ns = (i + 1) * 10'000'000ull, .workload = i});
    }
    f.processes.push_back(TestProcess{.pid = 20, .start_time_ticks = 50, .cpu_time_ns = 5'000'000, .workload = KEPLERSHM_NO_WORKLOAD});
    f.processes.push_back(TestProcess{.pid = 21, .start_time_ticks = 50, .cpu_time_ns = 5'000'000, .workload = 999});
    f.unaccounted_cpu_ns = 20'000'000;
    f.zones = {{0, meter_uj}, {1, meter_uj / 4}};
    f.cpu_busy_ns = {300'000'000, 0, 0, 0};
    f.cpu_irq_ns = {5'000'000, 0, 0, 0};  // of the unaccounted 20 ms: the kernel's interrupts
    return f;
}

keplershm::WriterOptions metered() {
    return node_options(4, kProcfsMetrics, {zone_info("package-0", KEPLERSHM_ZONE_PACKAGE, 0), zone_info("dram-0", KEPLERSHM_ZONE_DRAM, 0)});
}

uint64_t total(const Ledger& l, const EntityEnergy& e) { return l.total_uj(e.total); }

uint64_t node_total(const Ledger& l) { return l.total_uj(l.node().total); }

uint64_t containers_total(const Ledger& l) {
    uint64_t sum = 0;
    for (const auto& [_, c] : l.containers()) sum += total(l, c.energy);
    return sum;
}

}  // namespace

TEST(Aggregation, ProcessContainerPodNamespaceNodeAndVms) {
    Feed feed(metered());
    Estimator est(EstimatorOptions{});
    for (int i = 0; i < 5; ++i) ASSERT_TRUE(est.process(feed.frame(cluster_frame((i + 1) * kSecond, 10'000'000))));
    const Ledger& l = est.ledger();
    auto container = [&](const std::string& id) { return total(l, l.containers().at(id).energy); };
    auto process = [&](uint32_t pid) { return total(l, l.processes().at(ProcessKey{pid, 50}).energy); };

    EXPECT_EQ(container("c1"), process(1));
    EXPECT_EQ(container("c4"), process(4));
    EXPECT_EQ(container("kernel_processes"), process(6));
    // System processes: the host's, those outside any workload or with a bogus index, and the VM's
    // (Kepler counts VM processes as system processes at container level).
    EXPECT_EQ(container("system_processes"), process(5) + process(7) + process(20) + process(21));
    EXPECT_EQ(total(l, l.vms().at("vm-1").energy), process(7));
    EXPECT_EQ(l.vms().at("vm-1").vm_name, "guest");
    EXPECT_EQ(total(l, l.pods().at("uid-1").energy), container("c1") + container("c2"));
    EXPECT_EQ(total(l, l.namespaces().at("ns1")), container("c1") + container("c2") + container("c3"));
    EXPECT_EQ(l.containers().at("c2").pod_name, "p1");
    EXPECT_EQ(l.containers().at("c3").namespace_name, "ns1");
    EXPECT_GT(container("unaccounted"), 0u);
    EXPECT_EQ(l.containers().at("kernel_time").namespace_name, "kernel");
    EXPECT_NEAR(static_cast<double>(container("kernel_time")), container("unaccounted") / 3.0, 5.0)
        << "5 of the unaccounted 20 ms are kernel time";
    EXPECT_EQ(containers_total(l), node_total(l));
    EXPECT_EQ(node_total(l), 5u * 12'500'000u);
}

TEST(Aggregation, ProcessesAreKeyedByPidAndStartTime) {
    Feed feed(metered());
    Estimator est(EstimatorOptions{});
    TestFrame f = cluster_frame(kSecond, 10'000'000);
    f.processes.push_back(f.processes[0]);
    f.processes.back().start_time_ticks = 999;  // the same pid, reused by a new process
    ASSERT_TRUE(est.process(feed.frame(f)));
    EXPECT_EQ(est.ledger().processes().count(ProcessKey{1, 50}), 1u);
    EXPECT_EQ(est.ledger().processes().count(ProcessKey{1, 999}), 1u);
    const auto text = PrometheusExport(est, ExportOptions{.process_metrics = true, .include_timing = false}).render().text();
    EXPECT_NE(text.find("start_time=\"999\""), std::string::npos);
}

TEST(Aggregation, ExitedProcessesKeepTheirEnergyInContainerAndPod) {
    Feed feed(metered());
    Estimator est(EstimatorOptions{});
    ASSERT_TRUE(est.process(feed.frame(cluster_frame(kSecond, 10'000'000))));
    TestFrame exiting = cluster_frame(2 * kSecond, 10'000'000);
    exiting.processes[0].extra_flags = KEPLERSHM_PROC_EXITED;
    ASSERT_TRUE(est.process(feed.frame(exiting)));
    const uint64_t c1_before = total(est.ledger(), est.ledger().containers().at("c1").energy);
    const uint64_t pod_before = total(est.ledger(), est.ledger().pods().at("uid-1").energy);
    TestFrame gone = cluster_frame(3 * kSecond, 10'000'000);
    gone.processes.erase(gone.processes.begin());
    ASSERT_TRUE(est.process(feed.frame(gone)));
    EXPECT_EQ(total(est.ledger(), est.ledger().containers().at("c1").energy), c1_before);
    EXPECT_GE(total(est.ledger(), est.ledger().pods().at("uid-1").energy), pod_before);
}

TEST(Aggregation, NamesLearnedAfterTheFirstFrameAreKeptAndEnergyStays) {
    // A container is often first seen before its runtime (podman's conmon) or the API server names it.
    Feed feed(metered());
    Estimator est(EstimatorOptions{});
    TestFrame unnamed = cluster_frame(kSecond, 10'000'000);
    unnamed.workloads[0].container_name = unnamed.workloads[0].pod_name = unnamed.workloads[0].pod_namespace = "";
    unnamed.workloads[3].container_name = "";
    ASSERT_TRUE(est.process(feed.frame(unnamed)));
    const uint64_t c4_first = total(est.ledger(), est.ledger().containers().at("c4").energy);
    EXPECT_EQ(est.ledger().containers().at("c4").container_name, "");
    ASSERT_TRUE(est.process(feed.frame(cluster_frame(2 * kSecond, 10'000'000))));
    const Ledger& l = est.ledger();
    EXPECT_EQ(l.containers().at("c4").container_name, "docker-thing");
    EXPECT_EQ(l.containers().at("c1").container_name, "web");
    EXPECT_EQ(l.containers().at("c1").pod_name, "p1");
    EXPECT_EQ(l.containers().at("c1").namespace_name, "ns1");
    EXPECT_EQ(l.pods().at("uid-1").pod_name, "p1");
    EXPECT_EQ(total(l, l.containers().at("c4").energy), 2 * c4_first) << "the same entry, its energy kept";
    ASSERT_TRUE(est.process(feed.frame(unnamed)));
    EXPECT_EQ(l.containers().at("c4").container_name, "docker-thing") << "a name is never forgotten";
}

TEST(Aggregation, CountersNeverDecreaseAcrossAWriterRestart) {
    const std::string name = unique_segment_name("restart");
    Estimator est(EstimatorOptions{});
    FrameSource source = FrameSource::live(name);
    keplershm::FrameView view;
    auto consume = [&](size_t frames, int max_tries = 200) {
        size_t got = 0;
        for (int tries = 0; got < frames && tries < max_tries; ++tries) {
            if (source.next(view, std::chrono::milliseconds(50)) == FrameSource::Result::frame) {
                if (view.missed()) est.count_missed(view.missed());
                EXPECT_TRUE(est.process(view));
                ++got;
            }
        }
        return got;
    };
    EXPECT_EQ(consume(1, 3), 0u);  // waits for the segment to appear
    std::map<std::string, uint64_t> seen;
    uint64_t node_seen = 0;
    auto check_monotonic = [&] {
        const Ledger& l = est.ledger();
        EXPECT_GE(node_total(l), node_seen);
        node_seen = node_total(l);
        for (const auto& [id, c] : l.containers()) {
            EXPECT_GE(total(l, c.energy), seen[id]) << id;
            seen[id] = total(l, c.energy);
        }
    };
    {
        TestWriter first(name, metered());
        for (int i = 0; i < 3; ++i) {
            first.write(cluster_frame((i + 1) * kSecond, 10'000'000));
            ASSERT_EQ(consume(1), 1u);
            check_monotonic();
        }
    }  // clean stop: segment retired and removed
    const uint64_t before = node_total(est.ledger());
    TestWriter second(name, metered());  // new generation: frames and energy totals start over
    for (int i = 0; i < 3; ++i) {
        second.write(cluster_frame((i + 10) * kSecond, 10'000'000));
        ASSERT_EQ(consume(1), 1u) << "the estimator must re-attach to the new segment";
        check_monotonic();
    }
    EXPECT_EQ(node_total(est.ledger()), before + 3u * 12'500'000u);
    EXPECT_EQ(containers_total(est.ledger()), node_total(est.ledger()));
    EXPECT_GE(source.reattaches() + 1, 1u);

    // A crashed writer replaced in place (replace_live) is followed too.
    keplershm::WriterOptions options = metered();
    options.replace_live = true;
    TestWriter third(name, options);
    third.write(cluster_frame(20 * kSecond, 10'000'000));
    ASSERT_EQ(consume(1), 1u);
    check_monotonic();
    EXPECT_EQ(node_total(est.ledger()), before + 4u * 12'500'000u);
}

TEST(Aggregation, MissedFramesAreCounted) {
    const std::string name = unique_segment_name("missed");
    keplershm::WriterOptions options = metered();
    options.slot_count = 4;
    TestWriter writer(name, options);
    FrameSource source = FrameSource::live(name);
    Estimator est(EstimatorOptions{});
    keplershm::FrameView view;
    writer.write(cluster_frame(kSecond, 1000));
    ASSERT_EQ(source.next(view, std::chrono::milliseconds(500)), FrameSource::Result::frame);
    est.count_missed(view.missed());
    for (int i = 0; i < 10; ++i) writer.write(cluster_frame((i + 2) * kSecond, 1000));  // laps the reader
    ASSERT_EQ(source.next(view, std::chrono::milliseconds(500)), FrameSource::Result::frame);
    est.count_missed(view.missed());
    // Frames 2 up to the one read were lapped (the reader takes the oldest frame still intact).
    EXPECT_GE(view.sequence(), 8u);
    EXPECT_EQ(est.health().frames_missed, view.sequence() - 2);
}

TEST(Aggregation, SeriesOfWorkloadsGoneLongerThanRetentionAreDropped) {
    Feed feed(metered());
    EstimatorOptions options;
    options.ledger.retention_ns = 5 * kSecond;
    Estimator est(options);
    ASSERT_TRUE(est.process(feed.frame(cluster_frame(kSecond, 10'000'000))));
    ASSERT_EQ(est.ledger().containers().count("c4"), 1u);
    for (int i = 2; i < 12; ++i) {
        TestFrame f = cluster_frame(i * kSecond, 10'000'000);
        f.workloads[3].container_id = "c4-replacement";  // c4 is gone from the collector's table
        f.processes.erase(f.processes.begin() + 3);
        ASSERT_TRUE(est.process(feed.frame(f)));
        const bool expected = i * kSecond + kSecond - 2 * kSecond <= 5 * kSecond;  // frame end - c4's last end
        EXPECT_EQ(est.ledger().containers().count("c4") == 1, expected) << "frame " << i;
    }
    EXPECT_EQ(est.ledger().processes().count(ProcessKey{4, 50}), 0u);
    EXPECT_EQ(est.ledger().processes().count(ProcessKey{1, 50}), 1u);
}

TEST(Aggregation, ProcessSeriesAreCapped) {
    Feed feed(metered());
    EstimatorOptions options;
    options.ledger.process_series_cap = 3;
    Estimator est(options);
    ASSERT_TRUE(est.process(feed.frame(cluster_frame(kSecond, 10'000'000))));
    EXPECT_EQ(est.ledger().process_series_refused(), 6u);
    const auto families = collect(PrometheusExport(est, ExportOptions{.process_metrics = true, .include_timing = false}));
    for (const auto& f : families) {
        if (f.name == "kepler_process_joules_total") {
            EXPECT_EQ(f.metric.size(), 3u * 2u);  // x mode
        }
    }
    const auto without = PrometheusExport(est, ExportOptions{.process_metrics = false, .include_timing = false}).render().text();
    EXPECT_EQ(without.find("kepler_process_"), std::string::npos);
}

TEST(Aggregation, UntrustedZoneValuesAreIgnored) {
    Feed feed(metered());
    Estimator est(EstimatorOptions{});
    TestFrame f = cluster_frame(kSecond, 10'000'000);
    f.zones.push_back(TestZone{31, 5'000'000, true});                   // index past the header's zones
    f.zones.push_back(TestZone{0, 9'000'000'000'000'000ull, true});     // 9 GJ in a second: broken counter
    ASSERT_TRUE(est.process(feed.frame(f)));
    EXPECT_EQ(node_total(est.ledger()), 12'500'000u);
}

TEST(TopView, ListsTheBiggestConsumersFirst) {
    Feed feed(metered());
    Estimator est(EstimatorOptions{});
    ASSERT_TRUE(est.process(feed.frame(cluster_frame(kSecond, 10'000'000))));
    const std::string text = render_top(est, 3);
    EXPECT_NE(text.find("model measured"), std::string::npos) << text;
    // system_processes holds pids 5, 7, 20 and 21 (140 ms of CPU): the top container.
    const size_t system = text.find("system_processes");
    const size_t kernel = text.find("kernel_processes");
    ASSERT_NE(system, std::string::npos) << text;
    ASSERT_NE(kernel, std::string::npos) << text;
    EXPECT_LT(system, kernel);
    EXPECT_EQ(text.find("c1 "), std::string::npos) << "only the top 3 containers";
}
