// The collection loop: set-up (source, meters, metadata, writer), then one frame per interval until a
// signal, then a clean retirement of the segment.
#include <signal.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <optional>

#include "common/log.hpp"
#include "common/text_io.hpp"
#include "energy/energy.hpp"
#include "frame/frame_builder.hpp"
#include "frame/node_cpu.hpp"
#include "frame/node_info.hpp"
#include "kepler_collect/collector.hpp"
#include "keplershm/keplershm.hpp"
#include "sources/bpf_source.hpp"
#include "sources/procfs_source.hpp"
#include "workloads/kube_metadata.hpp"
#include "workloads/workload_resolver.hpp"

namespace kepler::collect {

namespace {

constexpr uint32_t kWriterVersion = (0u << 16) | (1u << 8) | 0u;  // 0.1.0
constexpr std::chrono::nanoseconds kMaxHeartbeatGap = std::chrono::seconds(1);

std::unique_ptr<ProcessSource> make_source(const CollectorOptions& o) {
    if (o.source == "procfs") return std::make_unique<ProcfsSource>(o.proc_root);
    BpfOptions bpf;
    bpf.max_processes = o.bpf_max_processes;
    bpf.max_threads = o.bpf_max_threads;
    bpf.hardware_counters = o.hardware_counters;
    if (o.bpf_attach != "auto") bpf.attach = parse_attach_mode(o.bpf_attach);
    if (o.source == "bpf") return std::make_unique<BpfSource>(bpf, o.proc_root);
    try {
        return std::make_unique<BpfSource>(bpf, o.proc_root);
    } catch (const CollectError& e) {
        log_warn("bpf unavailable, using procfs instead: {}", e.what());
        return std::make_unique<ProcfsSource>(o.proc_root);
    }
}

std::unique_ptr<KubeMetadata> make_metadata(const CollectorOptions& o, const std::string& node) {
    if (o.kube == "off") return nullptr;
    KubeOptions k = in_cluster_options();
    if (!o.kube_api_url.empty()) k.api_url = o.kube_api_url;
    if (!o.kubelet_url.empty()) k.kubelet_url = o.kubelet_url;
    if (!o.kube_token_file.empty()) k.token_file = o.kube_token_file;
    if (!o.kube_ca_file.empty()) k.ca_file = o.kube_ca_file;
    k.insecure_skip_verify = o.kube_insecure_skip_tls_verify;
    k.node_name = node;
    k.refresh = o.metadata_refresh;
    if (o.kube == "api") k.kubelet_url.clear();
    if (o.kube == "kubelet" && k.kubelet_url.empty()) throw CollectError("--kube kubelet needs --kubelet-url");
    if (o.kube == "api" && k.api_url.empty()) throw CollectError("--kube api needs --kube-api-url outside a cluster");
    if (k.api_url.empty() && k.kubelet_url.empty()) {
        log_info("metadata: not in a Kubernetes cluster and no --kube-api-url/--kubelet-url: pods keep UIDs only");
        return nullptr;
    }
    log_info("metadata: pods of node {} from {}", node, k.kubelet_url.empty() ? k.api_url + " (API server)" : k.kubelet_url + " (kubelet)");
    return std::make_unique<KubeMetadata>(std::move(k));
}

LogLevel parse_level(const std::string& text) {
    if (text == "debug") return LogLevel::debug;
    if (text == "warning") return LogLevel::warn;
    if (text == "error") return LogLevel::error;
    return LogLevel::info;
}

/// Sleeps until `deadline` (CLOCK_MONOTONIC ns), heartbeating at least every second; false when a
/// SIGTERM/SIGINT arrived (they are blocked and taken synchronously here).
bool wait_until(uint64_t deadline, keplershm::Writer& writer, const sigset_t& signals) {
    while (true) {
        const uint64_t now = monotonic_now_ns();
        if (now >= deadline) return true;
        const uint64_t wait = std::min<uint64_t>(deadline - now, kMaxHeartbeatGap.count());
        timespec timeout{static_cast<time_t>(wait / 1'000'000'000ull), static_cast<long>(wait % 1'000'000'000ull)};
        siginfo_t info{};
        const int sig = sigtimedwait(&signals, &info, &timeout);
        if (sig == SIGTERM || sig == SIGINT) {
            log_info("received {}, retiring the segment", sig == SIGTERM ? "SIGTERM" : "SIGINT");
            return false;
        }
        writer.heartbeat();
    }
}

/// A collector restarted right after a crash finds its predecessor's segment with a heartbeat that is
/// not stale yet: wait for it (a writer's heartbeat period is at most 1 s, stale after 3 periods + 1 s)
/// rather than fail; a predecessor that is really alive still refuses us after that. nullopt when a
/// stop signal arrived meanwhile.
std::optional<keplershm::Writer> create_writer(const std::string& name, const keplershm::WriterOptions& w,
                                               const sigset_t& signals) {
    const uint64_t deadline = monotonic_now_ns() + 6'000'000'000ull;
    bool told = false;
    while (true) {
        try {
            return keplershm::Writer(name, w);
        } catch (const keplershm::Error& e) {
            if (e.code() != KEPLERSHM_E_EXISTS || monotonic_now_ns() >= deadline) throw;
            if (!told) log_info("waiting for the previous writer of '{}' to go stale: {}", name, e.what());
            told = true;
        }
        timespec pause{0, 250'000'000};
        siginfo_t info{};
        const int sig = sigtimedwait(&signals, &info, &pause);
        if (sig == SIGTERM || sig == SIGINT) return std::nullopt;
    }
}

int collect(const CollectorOptions& o, const sigset_t& signals) {
    const std::string node = node_name(o.node_name);
    std::unique_ptr<ProcessSource> source = make_source(o);
    // The source counts from here on, so the first interval starts here, and so does node CPU time.
    NodeCpuReader node_cpu(o.proc_root);
    node_cpu.read();
    uint64_t start_ns = monotonic_now_ns();
    uint64_t start_real_ns = realtime_now_ns();
    log_info("source: {}", source->describe());

    EnergyMeter meter = EnergyMeter::discover(o.sysfs_root);
    for (const std::string& p : meter.problems()) log_warn("energy: {}", p);
    for (const std::string& n : meter.notes()) log_info("energy: {}", n);
    if (meter.empty()) {
        log_info("energy: no power meter under {} (no RAPL, no hwmon meter): frames say \"no measured power\"", o.sysfs_root);
    }
    std::unique_ptr<KubeMetadata> metadata = make_metadata(o, node);

    keplershm::WriterOptions w;
    w.slot_count = o.slot_count;
    w.process_capacity = o.process_capacity;
    w.workload_capacity = o.workload_capacity;
    w.string_capacity = o.string_capacity;
    w.mode = o.segment_mode;
    w.max_segment_bytes = o.max_segment_bytes;
    w.on_warning = [](const std::string& message) { log_warn("{}", message); };
    w.heartbeat_period = std::min<std::chrono::nanoseconds>(o.interval, kMaxHeartbeatGap);
    w.metric_mask = source->metric_mask() | KEPLERSHM_METRIC_NODE_CPU | (meter.empty() ? 0 : KEPLERSHM_METRIC_ENERGY);
    w.node_name = node;
    w.cpu_model = cpu_model_from_cpuinfo(read_text_file(o.proc_root + "/cpuinfo", 4 << 20).text);
    w.cpu_count = online_cpus();
    w.zones = meter.zone_infos();  // zones belong to the header: discovered before the writer exists
    w.writer_version = kWriterVersion;
    w.replace_live = o.replace_live;
    std::optional<keplershm::Writer> created = create_writer(o.shm_name, w, signals);
    if (!created) return 0;  // stopped by a signal while waiting for the name
    keplershm::Writer& writer = *created;
    log_info("publishing to /dev/shm/{} every {} ms (node {}, {} CPUs, {} energy zones)", o.shm_name,
             std::chrono::duration_cast<std::chrono::milliseconds>(o.interval).count(), node, w.cpu_count, w.zones.size());

    WorkloadResolver resolver(o.proc_root);
    const uint64_t interval_ns = static_cast<uint64_t>(o.interval.count());
    uint64_t deadline = start_ns + interval_ns;
    for (uint64_t frame = 0; o.frames == 0 || frame < o.frames; ++frame) {
        if (!wait_until(deadline, writer, signals)) break;
        SourceSample sample = source->sample();
        // The process boundary is the interval's end; the realtime end is the same instant.
        const uint64_t end_ns = sample.read_time_ns;
        const uint64_t end_real_ns = end_ns + (realtime_now_ns() - monotonic_now_ns());
        std::optional<NodeCpuSample> cpu;
        try {
            cpu = node_cpu.read();
        } catch (const CollectError& e) {
            log_warn("node cpu: {}", e.what());
        }
        const std::vector<keplershm_zone_sample> zones = meter.read();

        std::vector<std::shared_ptr<const CgroupWorkload>> workloads;
        workloads.reserve(sample.processes.size());
        for (ProcessActivity& p : sample.processes) workloads.push_back(resolver.resolve(p));
        resolver.end_sample();
        const std::shared_ptr<const PodIndex> pods = metadata ? metadata->snapshot() : nullptr;

        FrameInputs in;
        in.interval_start_ns = start_ns;
        in.interval_end_ns = end_ns;
        in.interval_start_realtime_ns = start_real_ns;
        in.interval_end_realtime_ns = end_real_ns;
        in.first = frame == 0;
        in.source = source->kind();
        in.power_source = meter.power_source();
        in.sample = &sample;
        in.workloads = &workloads;
        in.node_cpu = cpu ? &*cpu : nullptr;
        in.zones = &zones;
        in.pods = pods.get();
        keplershm::Draft draft = writer.begin();
        const FrameSummary summary = build_frame(draft, in);
        writer.commit(draft);
        if (summary.processes_truncated > 0) {
            log_debug("frame {}: {} processes over capacity went to the unaccounted record", draft.sequence(),
                      summary.processes_truncated);
        }
        if (summary.unknown_container && metadata) metadata->request_refresh();

        const SelfUsage self = self_usage(o.proc_root);
        writer.set_overhead(self.cpu_time_ns, self.rss_bytes);
        writer.heartbeat();
        start_ns = end_ns;
        start_real_ns = end_real_ns;
        deadline += interval_ns;
        if (const uint64_t now = monotonic_now_ns(); deadline < now) {
            log_debug("frame took longer than the interval; next one in a full interval");
            deadline = now + interval_ns;
        }
    }
    writer.close();
    return 0;
}

}  // namespace

int run_collector(const CollectorOptions& options) {
    set_log_level(parse_level(options.log_level));
    // SIGTERM/SIGINT are blocked in every thread and taken with sigtimedwait() between frames, so a
    // stop request never interrupts a frame half-written.
    sigset_t signals;
    sigemptyset(&signals);
    sigaddset(&signals, SIGTERM);
    sigaddset(&signals, SIGINT);
    pthread_sigmask(SIG_BLOCK, &signals, nullptr);
    try {
        return collect(options, signals);
    } catch (const std::exception& e) {
        log_error("{}", e.what());
        return 1;
    }
}

}  // namespace kepler::collect
