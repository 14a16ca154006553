#include "support/test_frames.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <stdexcept>

namespace estimate_test {

keplershm_zone_info zone_info(const std::string& name, uint32_t kind, uint32_t socket) {
    keplershm_zone_info z{};
    keplershm::set_text(z.name, name);
    z.kind = kind;
    z.socket = socket;
    z.power_source = KEPLERSHM_POWER_RAPL;
    z.max_energy_range_uj = 262143328850ull;
    return z;
}

keplershm::WriterOptions node_options(uint32_t cpu_count, uint64_t metric_mask, std::vector<keplershm_zone_info> zones,
                                      std::string cpu_model) {
    keplershm::WriterOptions o;
    o.cpu_count = cpu_count;
    o.cpu_capacity = cpu_count;
    o.metric_mask = metric_mask | (zones.empty() ? 0 : KEPLERSHM_METRIC_ENERGY);
    o.zones = std::move(zones);
    o.cpu_model = std::move(cpu_model);
    o.node_name = "test-node";
    o.process_capacity = 256;
    o.workload_capacity = 64;
    o.string_capacity = 4096;
    o.slot_count = 8;
    return o;
}

std::string unique_segment_name(const std::string& stem) {
    static std::atomic<int> counter{0};
    return "kepest-" + stem + "-" + std::to_string(getpid()) + "-" + std::to_string(counter++);
}

TestWriter::TestWriter(const std::string& name, const keplershm::WriterOptions& options) : writer_(name, options) {}

void TestWriter::write(const TestFrame& in) {
    keplershm::Draft d = writer_.begin();
    keplershm_frame& f = d.frame();
    f.interval_start_ns = in.start_ns;
    f.interval_end_ns = in.end_ns;
    f.interval_start_realtime_ns = in.start_ns;
    f.interval_end_realtime_ns = in.end_ns;
    f.process_read_time_ns = in.end_ns;
    f.metric_mask = writer_.header().metric_mask;
    f.source = KEPLERSHM_SOURCE_SYNTHETIC;
    f.power_source = in.zones.empty() ? KEPLERSHM_POWER_NONE : KEPLERSHM_POWER_RAPL;
    for (const TestProcess& p : in.processes) {
        keplershm_process r{};
        r.pid = r.tgid = p.pid;
        r.start_time_ticks = p.start_time_ticks;
        r.cpu_time_ns = p.cpu_time_ns;
        r.workload_index = p.workload;
        r.flags = p.extra_flags;
        keplershm::set_text(r.comm, p.comm);
        if (p.cache_misses) {
            r.cache_misses = *p.cache_misses;
            r.flags |= KEPLERSHM_PROC_CACHE_MISSES_VALID;
        }
        if (p.cycles) {
            r.cycles = *p.cycles;
            r.flags |= KEPLERSHM_PROC_CYCLES_VALID;
        }
        if (!d.add_process(r)) throw std::runtime_error("test frame: too many processes");
    }
    for (const TestWorkload& w : in.workloads) {
        keplershm_workload r{};
        r.kind = w.kind;
        r.cgroup_id = w.cgroup_id;
        keplershm::set_text(r.container_id, w.container_id);
        keplershm::set_text(r.container_name, w.container_name);
        keplershm::set_text(r.pod_uid, w.pod_uid);
        keplershm::set_text(r.pod_name, w.pod_name);
        keplershm::set_text(r.pod_namespace, w.pod_namespace);
        keplershm::set_text(r.vm_id, w.vm_id);
        keplershm::set_text(r.vm_name, w.vm_name);
        if (!d.add_workload(r)) throw std::runtime_error("test frame: too many workloads");
    }
    for (const TestZone& z : in.zones) {
        keplershm_zone_sample s{};
        s.zone_index = z.zone_index;
        s.flags = z.valid ? KEPLERSHM_ZONE_VALID : 0;
        s.read_time_ns = in.end_ns;
        s.energy_delta_uj = z.delta_uj;
        if (!d.add_zone(s)) throw std::runtime_error("test frame: too many zones");
    }
    for (size_t c = 0; c < in.cpu_busy_ns.size(); ++c) {
        keplershm_cpu_sample s{};
        s.cpu = static_cast<uint32_t>(c);
        s.user_ns = in.cpu_busy_ns[c];
        s.idle_ns = c < in.cpu_idle_ns.size() ? in.cpu_idle_ns[c] : 0;
        s.irq_ns = c < in.cpu_irq_ns.size() ? in.cpu_irq_ns[c] : 0;
        if (!d.add_cpu(s)) throw std::runtime_error("test frame: too many cpus");
    }
    for (const keplershm_gpu_device& g : in.gpu_devices) {
        if (!d.add_gpu_device(g)) throw std::runtime_error("test frame: too many GPU devices");
    }
    for (const keplershm_gpu_usage& u : in.gpu_usage) {
        if (!d.add_gpu_usage(u)) throw std::runtime_error("test frame: too many GPU usage records");
    }
    d.unaccounted().cpu_time_ns = in.unaccounted_cpu_ns;
    d.unaccounted().truncated_cpu_time_ns = in.truncated_cpu_ns;
    d.frame().flags |= in.frame_flags;
    writer_.commit(d);
}

void record_frames(const std::filesystem::path& path, const keplershm::WriterOptions& options, const std::vector<TestFrame>& frames) {
    const std::string name = unique_segment_name("rec");
    TestWriter writer(name, options);
    keplershm::Reader reader = keplershm::Reader::open(name);
    keplershm::Recorder recorder(path.string());
    keplershm::FrameView view;
    for (const TestFrame& f : frames) {
        writer.write(f);
        if (reader.next(std::chrono::milliseconds(1000), view) != keplershm::Status::ok) throw std::runtime_error("recording: frame lost");
        recorder.append(reader, view);
    }
    recorder.close();
}

const keplershm::FrameView& FrameBuffer::roundtrip(TestWriter& writer, keplershm::Reader& reader, const TestFrame& frame) {
    writer.write(frame);
    if (reader.next(std::chrono::milliseconds(1000), view_) != keplershm::Status::ok) throw std::runtime_error("frame not read back");
    return view_;
}

Feed::Feed(const keplershm::WriterOptions& options, const std::string& stem)
    : name_(unique_segment_name(stem)), writer_(name_, options), reader_(keplershm::Reader::open(name_)) {}

TestFrame simple_frame(uint64_t start_ns, uint64_t interval_ns, const std::vector<uint64_t>& cpu_ns,
                       const std::vector<uint64_t>& zones_uj, uint32_t cpus) {
    TestFrame f;
    f.start_ns = start_ns;
    f.end_ns = start_ns + interval_ns;
    uint64_t busy = 0;
    for (size_t i = 0; i < cpu_ns.size(); ++i) {
        f.processes.push_back(TestProcess{.pid = static_cast<uint32_t>(100 + i), .start_time_ticks = 1000 + i, .cpu_time_ns = cpu_ns[i]});
        busy += cpu_ns[i];
    }
    for (size_t i = 0; i < zones_uj.size(); ++i) f.zones.push_back(TestZone{static_cast<uint32_t>(i), zones_uj[i], true});
    f.cpu_busy_ns.assign(cpus, 0);
    f.cpu_idle_ns.assign(cpus, 0);
    for (uint32_t c = 0; c < cpus; ++c) {
        f.cpu_busy_ns[c] = std::min<uint64_t>(busy, interval_ns);
        busy -= f.cpu_busy_ns[c];
        f.cpu_idle_ns[c] = interval_ns - f.cpu_busy_ns[c];
    }
    return f;
}

SegmentCleanup::~SegmentCleanup() { shm_unlink(("/" + name).c_str()); }

TempDir::TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "kepest-XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
}

TempDir::~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
}

}  // namespace estimate_test
