// A small test writer: frames described as plain structs, published through keplershm::Writer, so
// the estimator is tested on the same bytes a collector produces.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "keplershm/keplershm.hpp"

namespace estimate_test {

struct TestProcess {
    uint32_t pid = 0;
    uint64_t start_time_ticks = 0;
    uint64_t cpu_time_ns = 0;
    uint32_t workload = KEPLERSHM_NO_WORKLOAD;
    std::string comm = "proc";
    std::optional<uint64_t> cache_misses{};  // set: CACHE_MISSES_VALID
    std::optional<uint64_t> cycles{};        // set: CYCLES_VALID
    uint32_t extra_flags = 0;
};

struct TestWorkload {
    uint32_t kind = KEPLERSHM_WORKLOAD_POD;
    std::string container_id{}, container_name{}, pod_uid{}, pod_name{}, pod_namespace{}, vm_id{}, vm_name{};
    uint64_t cgroup_id = 0;
};

struct TestZone {
    uint32_t zone_index = 0;
    uint64_t delta_uj = 0;
    bool valid = true;
};

struct TestFrame {
    uint64_t start_ns = 0;
    uint64_t end_ns = 0;
    std::vector<TestProcess> processes;
    std::vector<TestWorkload> workloads;
    std::vector<TestZone> zones;
    uint64_t unaccounted_cpu_ns = 0;
    std::vector<uint64_t> cpu_busy_ns;  // per CPU (user time)
    std::vector<uint64_t> cpu_idle_ns;
    std::vector<uint64_t> cpu_irq_ns;   // per CPU: busy time no task explains (kernel time)
    uint64_t truncated_cpu_ns = 0;      // of unaccounted_cpu_ns: processes left out for capacity
    uint32_t frame_flags = 0;           // keplershm_frame_flag bits the collector sets (FIRST, TRUNCATED: by the writer)
    std::vector<keplershm_gpu_device> gpu_devices;  // 1.4 (the writer needs gpu capacities)
    std::vector<keplershm_gpu_usage> gpu_usage;
};

/// Metrics a typical procfs collector publishes.
inline constexpr uint64_t kProcfsMetrics = KEPLERSHM_METRIC_CPU_TIME | KEPLERSHM_METRIC_NODE_CPU;

/// Options for a node: `zones` empty means no meter (a VM).
keplershm::WriterOptions node_options(uint32_t cpu_count, uint64_t metric_mask, std::vector<keplershm_zone_info> zones = {},
                                      std::string cpu_model = "Test CPU @ 1.00GHz");
keplershm_zone_info zone_info(const std::string& name, uint32_t kind, uint32_t socket);

/// A segment name no other test or test run uses.
std::string unique_segment_name(const std::string& stem);

/// Publishes TestFrames. Not thread-safe.
class TestWriter {
public:
    TestWriter(const std::string& name, const keplershm::WriterOptions& options);
    void write(const TestFrame& frame);
    keplershm::Writer& writer() { return writer_; }

private:
    keplershm::Writer writer_;
};

/// Writes `frames` to a segment and records them into `path` (the recorder's own format).
void record_frames(const std::filesystem::path& path, const keplershm::WriterOptions& options, const std::vector<TestFrame>& frames);

/// Copies of frames read back from a segment through the reader (for pipeline tests in-process).
/// Not thread-safe.
class FrameBuffer {
public:
    /// Writes `frame` with `writer` and returns it as the reader sees it.
    const keplershm::FrameView& roundtrip(TestWriter& writer, keplershm::Reader& reader, const TestFrame& frame);

private:
    keplershm::FrameView view_;
};

/// A writer and a reader on one fresh segment: frames go in as TestFrames and come back as the
/// reader sees them. Not thread-safe.
class Feed {
public:
    explicit Feed(const keplershm::WriterOptions& options, const std::string& stem = "feed");
    const keplershm::FrameView& frame(const TestFrame& f) { return buffer_.roundtrip(writer_, reader_, f); }
    TestWriter& writer() { return writer_; }

private:
    std::string name_;
    TestWriter writer_;
    keplershm::Reader reader_;
    FrameBuffer buffer_;
};

/// A frame of `interval_ns` starting at `start_ns` with one busy process per entry of cpu_ns
/// (pid 100+i), node CPU busy = sum, and the given meter readings (zone index i gets zones_uj[i]).
TestFrame simple_frame(uint64_t start_ns, uint64_t interval_ns, const std::vector<uint64_t>& cpu_ns,
                       const std::vector<uint64_t>& zones_uj = {}, uint32_t cpus = 4);

/// Removes a segment name at destruction: for segments another program (the collector) may leave.
struct SegmentCleanup {
    std::string name;
    ~SegmentCleanup();
};

/// A temporary directory removed at destruction.
class TempDir {
public:
    TempDir();
    ~TempDir();
    const std::filesystem::path& path() const { return path_; }

private:
    std::filesystem::path path_;
};

}  // namespace estimate_test
