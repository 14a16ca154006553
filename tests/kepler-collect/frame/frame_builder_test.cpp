// Frames as readers see them: a real Writer publishes what build_frame filled, a real Reader reads it.
// Unaccounted time is reported (never spread onto processes), truncation keeps the busiest processes,
// workloads are shared and named from the pod metadata.
#include <cstring>

#include <gtest/gtest.h>

#include "frame/frame_builder.hpp"
#include "keplershm/keplershm.hpp"
#include "test_support.hpp"

namespace kepler::collect {
namespace {

ProcessActivity process(uint32_t pid, uint64_t cpu_ms, const char* comm) {
    ProcessActivity a;
    a.key = ProcessKey{pid, 1000u + pid};
    a.cpu_time_ns = cpu_ms * 1'000'000;
    a.set_comm(comm);
    a.flags = KEPLERSHM_PROC_SOFTIRQ_VALID;
    return a;
}

std::shared_ptr<const CgroupWorkload> workload(const std::string& path) {
    auto w = std::make_shared<CgroupWorkload>();
    w->path = path;
    w->identity = identify_cgroup_path(path);
    w->cgroup_id = std::hash<std::string>{}(path) | 1;
    return w;
}

class FrameBuilderTest : public ::testing::Test {
protected:
    void SetUp() override {
        name_ = testing::unique_segment_name("kc-frame");
        options_.process_capacity = 4;
        options_.workload_capacity = 2;
        options_.cpu_count = 2;
    }
    void TearDown() override { writer_.reset(); }

    keplershm::FrameView publish(const FrameInputs& in, FrameSummary* summary = nullptr) {
        if (!writer_) writer_ = std::make_unique<keplershm::Writer>(name_, options_);
        if (!reader_) reader_ = std::make_unique<keplershm::Reader>(keplershm::Reader::open(name_));
        keplershm::Draft draft = writer_->begin();
        const FrameSummary s = build_frame(draft, in);
        if (summary) *summary = s;
        writer_->commit(draft);
        reader_->reattach();  // follows the writer when it grew the segment (a new generation)
        keplershm::FrameView view;
        EXPECT_EQ(reader_->copy(writer_->latest_sequence(), view), keplershm::Status::ok);
        return view;
    }

    std::string name_;
    keplershm::WriterOptions options_;
    std::unique_ptr<keplershm::Writer> writer_;
    std::unique_ptr<keplershm::Reader> reader_;
};

NodeCpuSample node(uint64_t busy_ms) {
    NodeCpuSample n;
    keplershm_cpu_sample c{};
    c.cpu = 0;
    c.user_ns = busy_ms * 1'000'000;
    c.idle_ns = 1'000'000'000 - c.user_ns;
    n.cpus.push_back(c);
    keplershm_cpu_sample c1{};
    c1.cpu = 1;
    c1.idle_ns = 1'000'000'000;
    n.cpus.push_back(c1);
    n.busy_ns = c.user_ns;
    return n;
}

TEST_F(FrameBuilderTest, UnaccountedTimeIsReportedNotSpread) {
    SourceSample sample;
    sample.read_time_ns = 5'000'000'000;
    sample.metric_mask = KEPLERSHM_METRIC_CPU_TIME;
    sample.processes = {process(10, 300, "a"), process(11, 300, "b")};
    sample.dropped_entries = 3;
    sample.exited_processes = 1;
    const NodeCpuSample cpu = node(1000);
    FrameInputs in;
    in.interval_start_ns = 4'000'000'000;
    in.interval_end_ns = 5'000'000'000;
    in.first = true;
    in.source = KEPLERSHM_SOURCE_PROCFS;
    in.sample = &sample;
    in.node_cpu = &cpu;
    const keplershm::FrameView f = publish(in);

    EXPECT_EQ(f.source(), static_cast<uint32_t>(KEPLERSHM_SOURCE_PROCFS));
    EXPECT_EQ(f.power_source(), static_cast<uint32_t>(KEPLERSHM_POWER_NONE));
    EXPECT_TRUE(f.flags() & KEPLERSHM_FRAME_FIRST);
    EXPECT_EQ(f.header().process_read_time_ns, 5'000'000'000u);
    EXPECT_EQ(f.header().metric_mask, static_cast<uint64_t>(KEPLERSHM_METRIC_CPU_TIME | KEPLERSHM_METRIC_NODE_CPU));
    ASSERT_EQ(f.processes().size(), 2u);
    EXPECT_EQ(f.processes()[0].cpu_time_ns, 300'000'000u) << "processes keep exactly what they measured";
    EXPECT_EQ(f.processes()[1].cpu_time_ns, 300'000'000u);
    EXPECT_EQ(f.processes()[0].workload_index, KEPLERSHM_NO_WORKLOAD);
    ASSERT_NE(f.unaccounted(), nullptr);
    EXPECT_EQ(f.unaccounted()->cpu_time_ns, 400'000'000u) << "1000 ms busy − 600 ms explained";
    EXPECT_EQ(f.unaccounted()->dropped_entries, 3u);
    EXPECT_EQ(f.unaccounted()->exited_processes, 1u);
    EXPECT_EQ(f.cpus().size(), 2u);
    EXPECT_EQ(f.zones().size(), 0u);
    EXPECT_EQ(f.header().flags & KEPLERSHM_FRAME_CUT_INEXACT, 0u) << "an exact cut is not flagged";
    EXPECT_EQ(f.unaccounted()->inexact_cuts, 0u);
}

TEST_F(FrameBuilderTest, AnInexactCutIsSaidInTheFrame) {
    SourceSample sample;
    sample.processes = {process(10, 300, "a")};
    sample.inexact_cuts = 2;  // e.g. one CPU still being written and one late charge
    const NodeCpuSample cpu = node(300);
    FrameInputs in;
    in.sample = &sample;
    in.node_cpu = &cpu;
    const keplershm::FrameView f = publish(in);
    EXPECT_NE(f.header().flags & KEPLERSHM_FRAME_CUT_INEXACT, 0u);
    ASSERT_NE(f.unaccounted(), nullptr);
    EXPECT_EQ(f.unaccounted()->inexact_cuts, 2u);
}

TEST_F(FrameBuilderTest, TruncationKeepsTheBusiestAndAsksToGrow) {
    SourceSample sample;
    for (uint32_t pid = 1; pid <= 6; ++pid) sample.processes.push_back(process(pid, pid * 10, "p"));
    const NodeCpuSample cpu = node(200);
    FrameInputs in;
    in.sample = &sample;
    in.node_cpu = &cpu;
    FrameSummary summary;
    const keplershm::FrameView f = publish(in, &summary);
    EXPECT_TRUE(f.flags() & KEPLERSHM_FRAME_TRUNCATED);
    EXPECT_EQ(f.header().processes_seen, 6u);
    ASSERT_EQ(f.processes().size(), 4u);
    EXPECT_EQ(f.processes()[0].pid, 6u) << "busiest first";
    EXPECT_EQ(summary.processes_truncated, 2u);
    EXPECT_EQ(f.unaccounted()->truncated_processes, 2u);
    EXPECT_EQ(f.unaccounted()->truncated_cpu_time_ns, 30'000'000u) << "pids 1 and 2: 10 + 20 ms";
    // busy 200 ms − published 180 ms = 20 ms, but the 30 ms left out are known: never report less.
    EXPECT_EQ(f.unaccounted()->cpu_time_ns, 30'000'000u);

    const keplershm::FrameView next = publish(in);  // the writer grew the segment for the next frame
    EXPECT_FALSE(next.flags() & KEPLERSHM_FRAME_TRUNCATED);
    EXPECT_EQ(next.processes().size(), 6u);
}

TEST_F(FrameBuilderTest, WorkloadsAreSharedNamedAndTheirPathsStored) {
    const std::string pod_path =
        "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod0d9b6c4e_27a2_4b57_8bb9_4f1c9e2b9a10.slice/"
        "cri-containerd-7f3c2d1e0a9b8c7d6e5f4a3b2c1d0e9f8a7b6c5d4e3f2a1b0c9d8e7f6a5b4c3d.scope";
    SourceSample sample;
    sample.processes = {process(20, 5, "nginx"), process(21, 4, "nginx"), process(22, 3, "sshd"), process(23, 2, "vm")};
    const std::vector<std::shared_ptr<const CgroupWorkload>> workloads = {
        workload(pod_path), workload(pod_path), workload("/system.slice/sshd.service"),
        workload("/machine.slice/machine-qemu\\x2d1\\x2dubuntu22.scope/libvirt/emulator")};
    PodIndex pods;
    pods.by_container_id["7f3c2d1e0a9b8c7d6e5f4a3b2c1d0e9f8a7b6c5d4e3f2a1b0c9d8e7f6a5b4c3d"] =
        ContainerMeta{"0d9b6c4e-27a2-4b57-8bb9-4f1c9e2b9a10", "web-7d4b9c-x2lmq", "default", "nginx", KEPLERSHM_RUNTIME_CONTAINERD};
    FrameInputs in;
    in.sample = &sample;
    in.workloads = &workloads;
    in.pods = &pods;
    FrameSummary summary;
    const keplershm::FrameView f = publish(in, &summary);

    ASSERT_EQ(f.workloads().size(), 2u) << "capacity 2: the VM's workload does not fit";
    EXPECT_TRUE(f.flags() & KEPLERSHM_FRAME_WORKLOADS_TRUNCATED);
    EXPECT_EQ(f.processes()[0].workload_index, 0u);
    EXPECT_EQ(f.processes()[1].workload_index, 0u) << "two processes of one container share its record";
    EXPECT_EQ(f.processes()[2].workload_index, 1u);
    EXPECT_EQ(f.processes()[3].workload_index, KEPLERSHM_NO_WORKLOAD);
    EXPECT_NE(f.processes()[0].cgroup_id, 0u);

    const keplershm_workload& pod = f.workloads()[0];
    EXPECT_EQ(pod.kind, static_cast<uint32_t>(KEPLERSHM_WORKLOAD_POD));
    EXPECT_EQ(pod.runtime, static_cast<uint32_t>(KEPLERSHM_RUNTIME_CONTAINERD));
    EXPECT_EQ(keplershm::get_text(pod.pod_name), "web-7d4b9c-x2lmq");
    EXPECT_EQ(keplershm::get_text(pod.pod_namespace), "default");
    EXPECT_EQ(keplershm::get_text(pod.container_name), "nginx");
    EXPECT_EQ(keplershm::get_text(pod.pod_uid), "0d9b6c4e-27a2-4b57-8bb9-4f1c9e2b9a10");
    EXPECT_EQ(f.string_at(pod.cgroup_path_offset, pod.cgroup_path_length), pod_path);
    const keplershm_workload& sshd = f.workloads()[1];
    EXPECT_EQ(sshd.kind, static_cast<uint32_t>(KEPLERSHM_WORKLOAD_SYSTEM));
    EXPECT_EQ(f.string_at(sshd.cgroup_path_offset, sshd.cgroup_path_length), "/system.slice/sshd.service");
    EXPECT_FALSE(summary.unknown_container);
}

TEST_F(FrameBuilderTest, UnknownPodContainerAsksForAMetadataRefresh) {
    SourceSample sample;
    sample.processes = {process(30, 5, "new")};
    const std::vector<std::shared_ptr<const CgroupWorkload>> workloads = {
        workload("/kubepods/besteffort/pod11111111-2222-3333-4444-555555555555/"
                 "3b9d0c1e2f3a4b5c6d7e8f9a0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c")};
    PodIndex pods;
    pods.by_pod_uid["11111111-2222-3333-4444-555555555555"] = PodMeta{"job-abc", "batch"};
    FrameInputs in;
    in.sample = &sample;
    in.workloads = &workloads;
    in.pods = &pods;
    FrameSummary summary;
    const keplershm::FrameView f = publish(in, &summary);
    EXPECT_TRUE(summary.unknown_container);
    ASSERT_EQ(f.workloads().size(), 1u);
    EXPECT_EQ(keplershm::get_text(f.workloads()[0].pod_name), "job-abc") << "the pod is known even if the container is not";
    EXPECT_TRUE(keplershm::get_text(f.workloads()[0].container_name).empty());
}

TEST_F(FrameBuilderTest, ZonesAndTheEnergyMetricBit) {
    SourceSample sample;
    std::vector<keplershm_zone_sample> zones(2);
    zones[0].zone_index = 0;
    zones[0].flags = KEPLERSHM_ZONE_VALID;
    zones[0].energy_delta_uj = 1234;
    zones[1].zone_index = 1;  // a failed read: no VALID flag
    keplershm_zone_info info{};
    keplershm::set_text(info.name, "package-0");
    info.kind = KEPLERSHM_ZONE_PACKAGE;
    options_.zones = {info, info};
    FrameInputs in;
    in.sample = &sample;
    in.zones = &zones;
    in.power_source = KEPLERSHM_POWER_RAPL;
    const keplershm::FrameView f = publish(in);
    EXPECT_EQ(f.power_source(), static_cast<uint32_t>(KEPLERSHM_POWER_RAPL));
    ASSERT_EQ(f.zones().size(), 2u);
    EXPECT_EQ(f.zones()[0].energy_delta_uj, 1234u);
    EXPECT_TRUE(f.header().metric_mask & KEPLERSHM_METRIC_ENERGY);
    EXPECT_FALSE(f.header().metric_mask & KEPLERSHM_METRIC_NODE_CPU) << "no /proc/stat reading this interval";
    EXPECT_EQ(f.segment().zone_count, 2u);
}

TEST_F(FrameBuilderTest, GpuDevicesCopiedAndUsesResolvedToPublishedProcesses) {
    SourceSample sample;
    sample.processes = {process(30, 5, "trainer"), process(31, 4, "viewer")};
    std::vector<keplershm_gpu_device> devices(2);
    devices[0].zone_index = 0;
    devices[0].vendor = KEPLERSHM_GPU_NVIDIA;
    devices[0].flags = KEPLERSHM_GPU_MIG_ENABLED | KEPLERSHM_GPU_USAGE_VALID;
    devices[0].parent = devices[0].gpu_instance_id = devices[0].compute_instance_id = 0xffffffffu;
    devices[0].power_limit_mw = 700'000;
    devices[0].memory_used_bytes = 4096;
    keplershm::set_text(devices[0].uuid, "GPU-frame-test-0");
    keplershm::set_text(devices[0].name, "NVIDIA H100 80GB HBM3");
    keplershm::set_text(devices[0].pci_bus_id, "00000000:17:00.0");
    devices[1] = devices[0];
    devices[1].flags = KEPLERSHM_GPU_MIG_INSTANCE | KEPLERSHM_GPU_USAGE_VALID;
    devices[1].parent = 0;
    devices[1].gpu_instance_id = 3;
    devices[1].compute_instance_id = 0;
    keplershm::set_text(devices[1].uuid, "MIG-frame-test-1");
    const std::vector<GpuProcessUse> uses = {
        {31, 1, 250'000'000, 4096, KEPLERSHM_GPU_USE_COMPUTE | KEPLERSHM_GPU_USE_BUSY_VALID},  // published
        {77, 0, 0, 1024, KEPLERSHM_GPU_USE_GRAPHICS},                                          // not in this frame
    };
    keplershm_zone_info gpu_zone{};
    keplershm::set_text(gpu_zone.name, "gpu-0");
    gpu_zone.kind = KEPLERSHM_ZONE_GPU;
    gpu_zone.power_source = KEPLERSHM_POWER_NVML;
    options_.zones = {gpu_zone};
    options_.gpu_device_capacity = 2;
    options_.gpu_usage_capacity = 4;
    FrameInputs in;
    in.sample = &sample;
    in.gpu_devices = &devices;
    in.gpu_usage = &uses;
    const keplershm::FrameView f = publish(in);

    ASSERT_EQ(f.gpu_devices().size(), 2u);
    for (size_t i = 0; i < 2; ++i) {
        EXPECT_EQ(std::memcmp(&f.gpu_devices()[i], &devices[i], sizeof(keplershm_gpu_device)), 0) << "device " << i << " as given";
    }
    EXPECT_EQ(keplershm::get_text(f.gpu_devices()[1].uuid), "MIG-frame-test-1");
    ASSERT_EQ(f.gpu_usage().size(), 2u);
    const keplershm_gpu_usage& seen = f.gpu_usage()[0];
    EXPECT_EQ(seen.pid, 31u);
    EXPECT_EQ(seen.device, 1u);
    ASSERT_LT(seen.process_index, f.processes().size());
    EXPECT_EQ(f.processes()[seen.process_index].pid, 31u) << "process_index names the use's own process";
    EXPECT_EQ(seen.start_time_ticks, 1031u) << "the process key's start time, from the published record";
    EXPECT_EQ(seen.busy_ns, 250'000'000u);
    EXPECT_EQ(seen.memory_bytes, 4096u);
    EXPECT_EQ(seen.flags, uint32_t{KEPLERSHM_GPU_USE_COMPUTE | KEPLERSHM_GPU_USE_BUSY_VALID});
    const keplershm_gpu_usage& unseen = f.gpu_usage()[1];
    EXPECT_EQ(unseen.pid, 77u);
    EXPECT_EQ(unseen.device, 0u);
    EXPECT_EQ(unseen.process_index, 0xffffffffu) << "not among the frame's processes";
    EXPECT_EQ(unseen.start_time_ticks, 0u);
    EXPECT_EQ(unseen.memory_bytes, 1024u);
    EXPECT_EQ(unseen.flags, uint32_t{KEPLERSHM_GPU_USE_GRAPHICS});
}

}  // namespace
}  // namespace kepler::collect
