// The kubelet's pod-resources API as the estimator reads it: a real gRPC server (tests/fakes/pod_resources)
// on a unix socket answers List; the client keeps GPU devices only, names each device's holders, and says
// clearly why a call failed; the watch keeps the last answer through a kubelet that stops answering.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "kube/pod_resources.hpp"
#include "pod_resources/fake_kubelet.hpp"
#include "support/test_frames.hpp"

using namespace kepler::estimate;
using kepler::testing::FakeKubelet;
using kepler::testing::FakePod;

namespace {

keplershm_gpu_device nvidia(const std::string& uuid, const std::string& bus = "") {
    keplershm_gpu_device d{};
    d.vendor = KEPLERSHM_GPU_NVIDIA;
    keplershm::set_text(d.uuid, uuid);
    keplershm::set_text(d.pci_bus_id, bus);
    return d;
}

keplershm_gpu_device drm_card(uint32_t vendor, uint32_t card, const std::string& bus) {
    keplershm_gpu_device d{};
    d.vendor = vendor;
    d.device_index = card;
    keplershm::set_text(d.pci_bus_id, bus);
    return d;
}

PodResourcesOptions options_for(const FakeKubelet& kubelet) {
    PodResourcesOptions o;
    o.socket = kubelet.socket().string();
    o.timeout = std::chrono::seconds(5);
    return o;
}

std::vector<FakePod> training_node() {
    return {
        {"train-0", "ml", {{"trainer", {{"nvidia.com/gpu", {"GPU-aaaa"}}, {"example.com/nic", {"eth9"}}}},
                           {"sidecar", {}}}},
        {"infer-0", "ml", {{"server", {{"nvidia.com/mig-1g.10gb", {"MIG-bbbb"}}}}}},
        // NVIDIA's time-slicing: one GPU, a replica id for each container.
        {"notebook-a", "lab", {{"jupyter", {{"nvidia.com/gpu", {"GPU-CCCC::0"}}}}}},
        {"notebook-b", "lab", {{"jupyter", {{"nvidia.com/gpu", {"GPU-cccc::1"}}}}}},
        {"render", "vfx", {{"blender", {{"amd.com/gpu", {"0000:c3:00.0"}}, {"gpu.intel.com/i915", {"card1-0"}}}}}},
    };
}

TEST(PodResources, ListNamesTheContainersHoldingEachGpuAndLeavesOtherDevicesOut) {
    estimate_test::TempDir dir;
    FakeKubelet kubelet(dir.path() / "kubelet.sock");
    kubelet.set_pods(training_node());
    PodResourcesClient client(options_for(kubelet));
    size_t dropped = 99;
    const GpuAllocations a = client.list(dropped);
    EXPECT_EQ(dropped, 0u);
    EXPECT_EQ(a.by_device.size(), 5u) << "GPU-aaaa, MIG-bbbb, GPU-cccc, the AMD card's bus id, card1 (not the NIC)";

    const auto* trainer = a.holders(nvidia("GPU-AAAA"));
    ASSERT_NE(trainer, nullptr) << "UUIDs compare without case";
    EXPECT_EQ(*trainer, (std::vector<AllocatedContainer>{{"ml", "train-0", "trainer"}}));
    const auto* mig = a.holders(nvidia("MIG-bbbb"));
    ASSERT_NE(mig, nullptr) << "a MIG instance, by its own UUID";
    EXPECT_EQ(mig->front().container_name, "server");
    const auto* shared = a.holders(nvidia("GPU-cccc"));
    ASSERT_NE(shared, nullptr);
    EXPECT_EQ(*shared, (std::vector<AllocatedContainer>{{"lab", "notebook-a", "jupyter"}, {"lab", "notebook-b", "jupyter"}}))
        << "a time-sliced GPU's replicas are the GPU";
    const auto* amd = a.holders(drm_card(KEPLERSHM_GPU_AMD, 0, "0000:c3:00.0"));
    ASSERT_NE(amd, nullptr) << "AMD's plugin names a GPU by its PCI address";
    EXPECT_EQ(amd->front().pod_name, "render");
    const auto* intel = a.holders(drm_card(KEPLERSHM_GPU_INTEL, 1, "0000:00:02.0"));
    ASSERT_NE(intel, nullptr) << "Intel's plugin names a GPU card<N>-<share>";
    EXPECT_EQ(intel->front().container_name, "blender");
    EXPECT_EQ(a.holders(nvidia("GPU-dddd", "00000000:3B:00.0")), nullptr) << "an unallocated GPU has no holder";
    EXPECT_EQ(a.holders(drm_card(KEPLERSHM_GPU_INTEL, 2, "")), nullptr);
}

TEST(PodResources, ANvmlBusIdMatchesTheKernelsForm) {
    GpuAllocations a;
    a.add("0000:3b:00.0", {"ns", "pod", "c"});
    EXPECT_NE(a.holders(nvidia("GPU-x", "00000000:3B:00.0")), nullptr) << "NVML writes an eight-digit domain";
    EXPECT_EQ(normalise_device_id("GPU-AbC::12"), "gpu-abc");
    EXPECT_EQ(normalise_device_id("card3-7"), "card3");
    EXPECT_EQ(normalise_device_id("cardinal-1"), "cardinal-1") << "only card<N>-<share> is a card's share";
}

TEST(PodResources, NamesLongerThanAFrameHoldsAreDroppedAndCounted) {
    estimate_test::TempDir dir;
    FakeKubelet kubelet(dir.path() / "kubelet.sock");
    kubelet.set_pods({{std::string(300, 'p'), "ns", {{"c", {{"nvidia.com/gpu", {"GPU-1"}}}}}},
                      {"ok", "ns", {{"c", {{"nvidia.com/gpu", {"GPU-2", ""}}}}}}});
    PodResourcesClient client(options_for(kubelet));
    size_t dropped = 0;
    const GpuAllocations a = client.list(dropped);
    EXPECT_EQ(dropped, 2u) << "the long pod name's device, and an empty id";
    EXPECT_EQ(a.by_device.size(), 1u);
    EXPECT_NE(a.holders(nvidia("GPU-2")), nullptr);
}

TEST(PodResources, FailuresAreSentencesNamingTheSocketAndTheReason) {
    estimate_test::TempDir dir;
    PodResourcesOptions missing;
    missing.socket = (dir.path() / "absent.sock").string();
    missing.timeout = std::chrono::milliseconds(500);
    PodResourcesClient nobody(missing);
    size_t dropped = 0;
    try {
        (void)nobody.list(dropped);
        FAIL() << "no server: List must fail";
    } catch (const PodResourcesError& e) {
        EXPECT_NE(std::string(e.what()).find("absent.sock"), std::string::npos) << e.what();
    }

    FakeKubelet kubelet(dir.path() / "kubelet.sock");
    kubelet.set_failure(grpc::Status(grpc::StatusCode::UNAVAILABLE, "kubelet is restarting"));
    PodResourcesClient client(options_for(kubelet));
    try {
        (void)client.list(dropped);
        FAIL() << "a failed call must throw";
    } catch (const PodResourcesError& e) {
        EXPECT_NE(std::string(e.what()).find("kubelet is restarting"), std::string::npos) << e.what();
    }
}

TEST(PodResources, AnAnswerLargerThanTheLimitIsRefused) {
    estimate_test::TempDir dir;
    FakeKubelet kubelet(dir.path() / "kubelet.sock");
    std::vector<FakePod> many;
    for (int i = 0; i < 200; ++i) many.push_back({"pod-" + std::to_string(i), "ns", {{"c", {{"nvidia.com/gpu", {"GPU-" + std::to_string(i)}}}}}});
    kubelet.set_pods(many);
    PodResourcesOptions small = options_for(kubelet);
    small.max_response_bytes = 1024;
    PodResourcesClient client(small);
    size_t dropped = 0;
    EXPECT_THROW((void)client.list(dropped), PodResourcesError);
    small.max_response_bytes = 1 << 20;
    PodResourcesClient roomy(small);
    EXPECT_EQ(roomy.list(dropped).by_device.size(), 200u);
}

/// Waits up to 20 s for `done` (the watch's thread answers every 20 ms in these tests).
template <typename Done>
bool wait_for(Done done) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!done() && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    return done();
}

TEST(PodResources, TheWatchFollowsChangesAndKeepsTheLastAnswerWhileTheKubeletFails) {
    estimate_test::TempDir dir;
    FakeKubelet kubelet(dir.path() / "kubelet.sock");
    kubelet.set_pods({{"a", "ns", {{"c", {{"nvidia.com/gpu", {"GPU-1"}}}}}}});
    PodResourcesOptions o = options_for(kubelet);
    o.refresh = std::chrono::milliseconds(20);
    PodResourcesWatch watch(o);
    ASSERT_TRUE(wait_for([&] { return watch.current()->holders(nvidia("GPU-1")) != nullptr; }));

    kubelet.set_failure(grpc::Status(grpc::StatusCode::UNAVAILABLE, "down"));
    const uint64_t failures = watch.failures();
    ASSERT_TRUE(wait_for([&] { return watch.failures() >= failures + 2; }));
    EXPECT_NE(watch.current()->holders(nvidia("GPU-1")), nullptr) << "a failed call keeps the last answer";

    kubelet.set_pods({{"b", "ns", {{"c", {{"nvidia.com/gpu", {"GPU-2"}}}}}}});
    kubelet.set_failure(std::nullopt);
    ASSERT_TRUE(wait_for([&] { return watch.current()->holders(nvidia("GPU-2")) != nullptr; }));
    EXPECT_EQ(watch.current()->holders(nvidia("GPU-1")), nullptr) << "a GPU given back has no holder";
}

// A kubelet that stops answering for good: its last allocations hold for `expiry` after the last answer,
// then are dropped (the GPU may have been freed meanwhile), and come back with the next answer.
TEST(PodResources, TheLastAnswerIsDroppedOnceTheKubeletHasNotAnsweredForTheExpiry) {
    estimate_test::TempDir dir;
    FakeKubelet kubelet(dir.path() / "kubelet.sock");
    kubelet.set_pods({{"a", "ns", {{"c", {{"nvidia.com/gpu", {"GPU-1"}}}}}}});
    PodResourcesOptions o = options_for(kubelet);
    o.refresh = std::chrono::milliseconds(20);
    o.expiry = std::chrono::milliseconds(600);
    PodResourcesWatch watch(o);
    ASSERT_TRUE(wait_for([&] { return watch.current()->holders(nvidia("GPU-1")) != nullptr; }));
    // Every answer from here on came after `before`: an answer counted after it is later than it.
    const auto before = std::chrono::steady_clock::now();
    const uint64_t answers = watch.answers();
    ASSERT_TRUE(wait_for([&] { return watch.answers() > answers; }));
    kubelet.set_failure(grpc::Status(grpc::StatusCode::UNAVAILABLE, "down"));
    ASSERT_TRUE(wait_for([&] { return watch.current()->holders(nvidia("GPU-1")) == nullptr; })) << "never dropped";
    EXPECT_GE(std::chrono::steady_clock::now() - before, o.expiry) << "dropped before the expiry after the last answer";
    EXPECT_GT(watch.failures(), 0u);
    kubelet.set_failure(std::nullopt);
    ASSERT_TRUE(wait_for([&] { return watch.current()->holders(nvidia("GPU-1")) != nullptr; })) << "back with the next answer";
}

}  // namespace
