// Kubernetes metadata: saved API server and kubelet responses, and the real libcurl client against a
// local HTTP server (pagination, bearer token, RBAC refusal, a response of megabytes).
#include <chrono>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/text_io.hpp"
#include "fakes/http_server.hpp"
#include "keplershm.h"
#include "test_support.hpp"
#include "workloads/kube_metadata.hpp"

namespace kepler::collect {
namespace {

using kepler::testing::FakeHttpServer;
using testing::fixture;

constexpr const char* kNginx = "7f3c2d1e0a9b8c7d6e5f4a3b2c1d0e9f8a7b6c5d4e3f2a1b0c9d8e7f6a5b4c3d";
constexpr const char* kShipper = "e1a4c0b9f27d4c1f9a3b8d6e5c4b3a29f8e7d6c5b4a39281706f5e4d3c2b1a09";
constexpr const char* kMigrate = "3b9d0c1e2f3a4b5c6d7e8f9a0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c";
constexpr const char* kCoreDns = "44aa55bb66cc77dd88ee99ff00aa11bb22cc33dd44ee55ff66aa77bb88cc99dd";

TEST(PodList, SavedApiServerPagesGiveNamesForEveryContainer) {
    PodIndex index;
    const std::string token = parse_pod_list(fixture("apiserver_pods_page1.json"), index);
    EXPECT_FALSE(token.empty()) << "page 1 continues";
    EXPECT_TRUE(parse_pod_list(fixture("apiserver_pods_page2.json"), index).empty());

    const ContainerMeta& nginx = index.by_container_id.at(kNginx);
    EXPECT_EQ(nginx.pod_name, "web-7d4b9c-x2lmq");
    EXPECT_EQ(nginx.pod_namespace, "default");
    EXPECT_EQ(nginx.container_name, "nginx");
    EXPECT_EQ(nginx.pod_uid, "0d9b6c4e-27a2-4b57-8bb9-4f1c9e2b9a10");
    EXPECT_EQ(nginx.runtime, static_cast<uint32_t>(KEPLERSHM_RUNTIME_CONTAINERD));
    EXPECT_EQ(index.by_container_id.at(kShipper).container_name, "log-shipper");
    EXPECT_EQ(index.by_container_id.at(kMigrate).container_name, "migrate") << "init containers count too";
    EXPECT_EQ(index.by_container_id.at(kCoreDns).runtime, static_cast<uint32_t>(KEPLERSHM_RUNTIME_CRIO));
    EXPECT_EQ(index.by_container_id.size(), 4u);
    EXPECT_EQ(index.by_pod_uid.size(), 3u) << "a pending pod without containers is still a known pod";
    EXPECT_EQ(index.by_pod_uid.at("11111111-2222-3333-4444-555555555555").namespace_, "batch");
}

TEST(PodList, SavedKubeletResponse) {
    PodIndex index;
    parse_pod_list(fixture("kubelet_pods.json"), index);
    EXPECT_EQ(index.by_container_id.at(kNginx).runtime, static_cast<uint32_t>(KEPLERSHM_RUNTIME_DOCKER));
}

TEST(PodList, RefusalsAndGarbageAreClearErrors) {
    PodIndex index;
    try {
        parse_pod_list(fixture("apiserver_forbidden.json"), index);
        FAIL() << "a Status document is not a PodList";
    } catch (const CollectError& e) {
        EXPECT_NE(std::string(e.what()).find("forbidden"), std::string::npos) << e.what();
    }
    EXPECT_THROW(parse_pod_list("{\"items\": [", index), CollectError);
    EXPECT_THROW(parse_pod_list("[1,2,3]", index), CollectError);
    EXPECT_TRUE(index.by_pod_uid.empty());
}

TEST(ContainerId, RuntimeFromTheStatusPrefix) {
    EXPECT_EQ(split_container_id("containerd://abc").first, static_cast<uint32_t>(KEPLERSHM_RUNTIME_CONTAINERD));
    EXPECT_EQ(split_container_id("cri-o://abc").second, "abc");
    EXPECT_EQ(split_container_id("abc").first, static_cast<uint32_t>(KEPLERSHM_RUNTIME_UNKNOWN));
}

TEST(ApiServer, PagesWithTokenAndFieldSelectorOverRealHttp) {
    const std::string page1 = fixture("apiserver_pods_page1.json");
    const std::string page2 = fixture("apiserver_pods_page2.json");
    FakeHttpServer server([&](const FakeHttpServer::Request& r) {
        return FakeHttpServer::Response{200, r.target.find("continue=") == std::string::npos ? page1 : page2, {}};
    });
    testing::TempDir dir;
    dir.write("token", "sekret-token\n");
    KubeOptions options;
    options.api_url = server.url();
    options.token_file = (dir.path() / "token").string();
    options.node_name = "node-a";
    const PodIndex index = KubeMetadata::fetch(options);
    EXPECT_EQ(index.by_container_id.size(), 4u);

    const auto requests = server.requests();
    ASSERT_EQ(requests.size(), 2u);
    EXPECT_EQ(requests[0].method, "GET");
    EXPECT_EQ(requests[0].target, "/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-a&limit=500");
    EXPECT_EQ(requests[0].headers.at("authorization"), "Bearer sekret-token");
    EXPECT_NE(requests[1].target.find("&continue=eyJ2Ij"), std::string::npos) << requests[1].target;
}

TEST(ApiServer, ForbiddenNamesTheRbacItNeeds) {
    const std::string body = fixture("apiserver_forbidden.json");
    FakeHttpServer server([&](const FakeHttpServer::Request&) { return FakeHttpServer::Response{403, body, {}}; });
    KubeOptions options;
    options.api_url = server.url();
    options.node_name = "node-a";
    try {
        (void)KubeMetadata::fetch(options);
        FAIL() << "HTTP 403 must be an error";
    } catch (const CollectError& e) {
        EXPECT_NE(std::string(e.what()).find("get/list/watch on pods"), std::string::npos) << e.what();
    }
}

TEST(ApiServer, ResponseOfMegabytesIsReadWhole) {
    // Kepler 0.7's estimator read one 4096-byte buffer; a node with many pods answers with megabytes.
    nlohmann::json list = {{"kind", "PodList"}, {"apiVersion", "v1"}, {"metadata", nlohmann::json::object()}};
    list["items"] = nlohmann::json::array();
    for (int i = 0; i < 3000; ++i) {
        char id[65];
        std::snprintf(id, sizeof id, "%064x", i + 1);
        list["items"].push_back({{"metadata", {{"name", "pod-" + std::to_string(i)}, {"namespace", "load"},
                                               {"uid", "uid-" + std::to_string(i)},
                                               {"annotations", {{"padding", std::string(400, 'p')}}}}},
                                 {"status", {{"containerStatuses", {{{"name", "c"}, {"containerID", std::string("containerd://") + id}}}}}}});
    }
    const std::string body = list.dump();
    ASSERT_GT(body.size(), 1'000'000u);
    FakeHttpServer server([&](const FakeHttpServer::Request&) { return FakeHttpServer::Response{200, body, {}}; });
    KubeOptions options;
    options.api_url = server.url();
    options.node_name = "node-a";
    const PodIndex index = KubeMetadata::fetch(options);
    EXPECT_EQ(index.by_container_id.size(), 3000u);
    EXPECT_EQ(index.by_pod_uid.at("uid-2999").name, "pod-2999");
}

TEST(Kubelet, PodsEndpoint) {
    const std::string body = fixture("kubelet_pods.json");
    FakeHttpServer server([&](const FakeHttpServer::Request&) { return FakeHttpServer::Response{200, body, {}}; });
    KubeOptions options;
    options.kubelet_url = server.url();
    const PodIndex index = KubeMetadata::fetch(options);
    EXPECT_EQ(index.by_container_id.at(kNginx).pod_name, "web-7d4b9c-x2lmq");
    EXPECT_EQ(server.requests().at(0).target, "/pods");
}

TEST(KubeMetadata, BackgroundThreadPublishesSnapshotsAndHonoursRefreshRequests) {
    const std::string body = fixture("kubelet_pods.json");
    FakeHttpServer server([&](const FakeHttpServer::Request&) { return FakeHttpServer::Response{200, body, {}}; });
    KubeOptions options;
    options.kubelet_url = server.url();
    options.refresh = std::chrono::hours(1);
    options.min_refresh = std::chrono::milliseconds(50);
    KubeMetadata metadata(options);
    // Generous bounds: they only stop a broken test from hanging, the feature is not timing.
    for (int i = 0; i < 500 && metadata.fetches() == 0; ++i) testing::sleep_ms(10);
    ASSERT_EQ(metadata.fetches(), 1u);
    ASSERT_NE(metadata.snapshot(), nullptr);
    EXPECT_EQ(metadata.snapshot()->by_container_id.size(), 1u);
    metadata.request_refresh();
    for (int i = 0; i < 500 && metadata.fetches() < 2; ++i) testing::sleep_ms(10);
    EXPECT_EQ(metadata.fetches(), 2u);
    EXPECT_TRUE(metadata.last_error().empty());
}

}  // namespace
}  // namespace kepler::collect
