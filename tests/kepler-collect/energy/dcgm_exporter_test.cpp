// MIG instances' activity from dcgm-exporter (kepler-collect/energy/gpu/dcgm_exporter): its text parsed as
// the exporter writes it (a fixture in dcgm-exporter's own label layout), malformed samples refused with
// the line, the endpoint checked, and the reader over a real HTTP server, answering and then not.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "common/text_io.hpp"
#include "energy/gpu/dcgm_exporter.hpp"
#include "fakes/http_server.hpp"
#include "test_support.hpp"

namespace kepler::collect {
namespace {

using kepler::testing::FakeHttpServer;

TEST(DcgmExporter, EachMigInstancesGraphicsActivityByGpuAndInstance) {
    const MigActivities a = parse_dcgm_activities(testing::fixture("dcgm_exporter_mig.txt"));
    ASSERT_EQ(a.size(), 2u) << "GPU 0's two instances; GPU 1 is not partitioned, and a longer name is another metric";
    EXPECT_DOUBLE_EQ(a.at({0, 1}), 0.6);
    EXPECT_DOUBLE_EQ(a.at({0, 2}), 0.2);
}

TEST(DcgmExporter, LabelEscapesTimestampsAndCarriageReturnsAreRead) {
    const MigActivities a = parse_dcgm_activities(
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE{modelName=\"A \\\"quoted\\\" name, with a } and \\\\\",gpu=\"3\",GPU_I_ID=\"7\",} 0.25 1733500000000\r\n"
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE{gpu=\"3\",GPU_I_ID=\"8\"}\t1.02\n");
    EXPECT_DOUBLE_EQ(a.at({3, 7}), 0.25);
    EXPECT_DOUBLE_EQ(a.at({3, 8}), 1.0) << "a little above 1 is rounding: 1";
}

TEST(DcgmExporter, AMalformedSampleOfTheMetricIsRefusedWithItsLine) {
    for (const char* text : {"DCGM_FI_PROF_GR_ENGINE_ACTIVE{gpu=\"0\",GPU_I_ID=\"1\"} busy\n",
                             "DCGM_FI_PROF_GR_ENGINE_ACTIVE{gpu=\"0\",GPU_I_ID=\"1\"} -0.5\n",
                             "DCGM_FI_PROF_GR_ENGINE_ACTIVE{gpu=\"0\",GPU_I_ID=\"1\"} 37\n",
                             "DCGM_FI_PROF_GR_ENGINE_ACTIVE{gpu=\"0\",GPU_I_ID=\"1\"} nan\n",
                             "DCGM_FI_PROF_GR_ENGINE_ACTIVE{gpu=\"zero\",GPU_I_ID=\"1\"} 0.5\n",
                             "DCGM_FI_PROF_GR_ENGINE_ACTIVE{gpu=\"0\",GPU_I_ID=\"1} 0.5\n",
                             "DCGM_FI_PROF_GR_ENGINE_ACTIVE{gpu=\"0\" GPU_I_ID=\"1\"} 0.5\n",
                             "DCGM_FI_PROF_GR_ENGINE_ACTIVE{gpu=\"0\",GPU_I_ID=\"1\"}\n"}) {
        SCOPED_TRACE(text);
        try {
            (void)parse_dcgm_activities(std::string("# HELP x\n") + text);
            ADD_FAILURE() << "accepted";
        } catch (const CollectError& e) {
            EXPECT_NE(std::string(e.what()).find("line 2"), std::string::npos) << e.what();
        }
    }
}

TEST(DcgmExporter, TheEndpointIsCheckedAndGetsMetricsWhenItNamesNoPath) {
    EXPECT_EQ(dcgm_metrics_url("http://dcgm-exporter.gpu-operator:9400"), "http://dcgm-exporter.gpu-operator:9400/metrics");
    EXPECT_EQ(dcgm_metrics_url("https://10.0.0.7:9400/"), "https://10.0.0.7:9400/metrics");
    EXPECT_EQ(dcgm_metrics_url("http://127.0.0.1:9400/custom/metrics"), "http://127.0.0.1:9400/custom/metrics");
    for (const char* bad : {"dcgm:9400", "ftp://host/metrics", "http:///metrics", "http://user:pw@host:9400",
                            "http://host:9400/metrics?x=1", "http://host:9400/metrics#top"}) {
        EXPECT_THROW((void)dcgm_metrics_url(bad), CollectError) << bad;
    }
}

TEST(DcgmExporter, TheReaderKeepsTheLatestAnswerAndItGrowsStaleWhenTheExporterStopsAnswering) {
    std::atomic<bool> answering{true};
    const std::string body = testing::fixture("dcgm_exporter_mig.txt");
    FakeHttpServer server([&](const FakeHttpServer::Request& r) {
        if (r.target != "/metrics") return FakeHttpServer::Response{404, "", {}};
        return answering ? FakeHttpServer::Response{200, body, {}} : FakeHttpServer::Response{503, "", {}};
    });
    DcgmActivityReader reader(DcgmSettings{server.url(), std::chrono::milliseconds(20)});
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!reader.activity(0, 1, monotonic_now_ns(), 1'000'000'000) && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    ASSERT_EQ(reader.activity(0, 1, monotonic_now_ns(), 1'000'000'000), 0.6);
    EXPECT_EQ(reader.activity(0, 2, monotonic_now_ns(), 1'000'000'000), 0.2);
    EXPECT_FALSE(reader.activity(0, 3, monotonic_now_ns(), 1'000'000'000)) << "no such GPU instance";

    answering = false;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    EXPECT_FALSE(reader.activity(0, 1, monotonic_now_ns(), 100'000'000)) << "the last answer is older than the age allowed";
    EXPECT_EQ(reader.activity(0, 1, monotonic_now_ns(), 60'000'000'000), 0.6) << "a failed scrape keeps the last answer";
}

}  // namespace
}  // namespace kepler::collect
