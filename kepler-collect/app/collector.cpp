// The collection loop: set-up (source, meters, metadata, writer), then one frame per interval until a
// signal, then a clean retirement of the segment.
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "support/log/log.hpp"
#include "common/text_io.hpp"
#include "energy/energy.hpp"
#include "energy/redfish/redfish_source.hpp"
#include "frame/frame_builder.hpp"
#include "frame/node_info.hpp"
#include "kepler_collect/collector.hpp"
#include "keplershm/keplershm.hpp"
#include "sources/proc_stat.hpp"
#include "sources/process_source.hpp"
#include "support/version/build_info.hpp"
#include "workloads/kube_metadata.hpp"
#include "workloads/workload_resolver.hpp"

namespace kepler::collect {

namespace {

// The header's writer_version: major << 16 | minor << 8 | patch of the project's version (CMake).
constexpr uint32_t kWriterVersion =
    (kepler::support::kBuild.major << 16) | (kepler::support::kBuild.minor << 8) | kepler::support::kBuild.patch;
constexpr std::chrono::nanoseconds kMaxHeartbeatGap = std::chrono::seconds(1);

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

/// The writer watches a predecessor's heartbeat itself and takes the name once it stood still for 3
/// periods + 1 s (PROTOCOL.md §1.3). A predecessor whose heartbeat advances refuses us (EXISTS): it may be
/// on its way out (a roll-out stops the old pod), so try again for a while before failing. nullopt when
/// a stop signal arrived meanwhile, also while the writer watched the predecessor (a planted segment's
/// header may claim a long heartbeat period: the library bounds that watch, and a signal ends it).
std::optional<keplershm::Writer> create_writer(const std::string& name, const keplershm::WriterOptions& options,
                                               const sigset_t& signals) {
    const uint64_t deadline = monotonic_now_ns() + 6'000'000'000ull;
    bool told = false;
    bool stopped = false;
    keplershm::WriterOptions w = options;
    w.stop_requested = [&signals, &stopped] {
        timespec now{0, 0};
        siginfo_t info{};
        const int sig = sigtimedwait(&signals, &info, &now);
        stopped = stopped || sig == SIGTERM || sig == SIGINT;
        return stopped;
    };
    while (true) {
        try {
            return keplershm::Writer(name, w);
        } catch (const keplershm::Error& e) {
            if (stopped) return std::nullopt;
            if (e.code() != KEPLERSHM_E_EXISTS || monotonic_now_ns() >= deadline) throw;
            if (!told) log_info("waiting up to 6 s for the live previous writer of '{}' to stop: {}", name, e.what());
            told = true;
        }
        timespec pause{0, 250'000'000};
        siginfo_t info{};
        const int sig = sigtimedwait(&signals, &info, &pause);
        if (sig == SIGTERM || sig == SIGINT) return std::nullopt;
    }
}

keplershm::WriterOptions writer_options(const CollectorOptions& o, const ProcessSource& source,
                                        const EnergyMeter& meter, const std::string& node) {
    keplershm::WriterOptions w;
    w.slot_count = o.slot_count;
    w.process_capacity = o.process_capacity;
    w.workload_capacity = o.workload_capacity;
    w.string_capacity = o.string_capacity;
    w.mode = o.segment_mode;
    w.max_segment_bytes = o.max_segment_bytes;
    w.on_warning = [](const std::string& message) { log_warn("{}", message); };
    w.heartbeat_period = std::min<std::chrono::nanoseconds>(o.interval, kMaxHeartbeatGap);
    w.metric_mask = source.metric_mask() | KEPLERSHM_METRIC_NODE_CPU | (meter.empty() ? 0 : KEPLERSHM_METRIC_ENERGY);
    w.node_name = node;
    w.cpu_model = cpu_model_from_cpuinfo(read_text_file(o.proc_root + "/cpuinfo", 4 << 20).text);
    w.cpu_count = online_cpus();
    w.zones = meter.zone_infos();  // zones belong to the header: discovered before the writer exists
    w.platform_meter_id = meter.platform_meter_id();
    w.gpu_device_capacity = static_cast<uint32_t>(meter.gpu_device_count());  // 0: frames carry no GPU sections
    w.gpu_usage_capacity = w.gpu_device_capacity != 0 ? o.gpu_usage_capacity : 0;
    w.writer_version = kWriterVersion;
    w.replace_live = o.replace_live;
    return w;
}

/// The BMC this node reads, from Kepler's configuration or the flags; nullopt when none is configured.
std::optional<BmcConfig> bmc_config(const CollectorOptions& o, const std::string& node) {
    if (o.redfish_config.empty() && o.redfish_endpoint.empty()) return std::nullopt;
    BmcConfig config;
    if (!o.redfish_config.empty()) {
        config = bmc_config_for_node(o.redfish_config, node);
    } else {
        check_bmc_endpoint(o.redfish_endpoint);
        config.endpoint = o.redfish_endpoint;
        config.id = o.redfish_bmc_id.empty() ? o.redfish_endpoint.substr(o.redfish_endpoint.find("//") + 2) : o.redfish_bmc_id;
        config.basic_auth = o.redfish_auth == "basic";
    }
    if (!o.redfish_ca_file.empty()) config.ca_file = o.redfish_ca_file;
    if (o.redfish_insecure) config.insecure = true;
    if (o.redfish_allow_plain_http) config.allow_plain_http = true;
    apply_bmc_credentials(config, o.redfish_credentials_file);
    check_bmc_transport(config);
    config.poll_interval = o.redfish_poll;
    config.request_timeout = o.redfish_timeout;
    config.max_age = o.redfish_max_age;
    return config;
}

NvmlSettings nvml_settings(const CollectorOptions& o) {
    NvmlSettings nvml;
    nvml.library = o.nvml_library;
    nvml.dcgm_endpoint = o.dcgm_endpoint;
    return nvml;
}

DrmSettings drm_settings(const CollectorOptions& o) { return DrmSettings{o.sysfs_root, o.proc_root}; }

EnergyMeter discover_meter(const CollectorOptions& o, const std::string& node) {
    EnergyMeter meter = EnergyMeter::discover(o.sysfs_root);
    if (const std::optional<BmcConfig> bmc = bmc_config(o, node)) {
        // A BMC that cannot be read at start is said clearly; the node's other meters still run. Its zones
        // belong to the segment header, so a restart is what picks the BMC up later.
        try {
            meter.add_source(make_redfish_source(*bmc));
            meter.set_platform_meter_id(bmc->id);
        } catch (const std::exception& e) {
            log_error("energy: no platform power from BMC {} this run: {}", bmc->id, e.what());
        }
    }
    if (o.gpu != "off") {
        std::string why;
        if (std::unique_ptr<GpuSource> gpus = make_nvml_source(nvml_settings(o), why)) {
            meter.add_gpu_source(std::move(gpus));
        } else {
            log_info("energy: no NVIDIA GPUs through NVML: {}", why);
        }
        if (std::unique_ptr<GpuSource> gpus = make_drm_source(drm_settings(o), why)) {
            meter.add_gpu_source(std::move(gpus));
        } else {
            log_debug("energy: no AMD or Intel GPUs: {}", why);
        }
    }
    for (const std::string& p : meter.problems()) log_warn("energy: {}", p);
    for (const std::string& n : meter.notes()) log_info("energy: {}", n);
    if (meter.empty()) {
        log_info("energy: no power meter under {} (no RAPL, no hwmon meter) and no BMC: frames say \"no measured power\"",
                 o.sysfs_root);
    }
    return meter;
}

/// GPU users that ran no CPU in the interval (a process waiting on its GPU sleeps), which the source leaves
/// out, join the sample with no CPU time: without a record of theirs in the frame, their GPU energy would
/// go to the unaccounted part instead of to them and their containers. Users gone from /proc stay pid-only.
/// A user's key is read from /proc/<pid>/stat once and kept while /proc/<pid> is the same directory (its
/// ctime: a reused pid is a new directory), so a GPU job that sleeps for hours costs a stat() an interval.
class IdleGpuUsers {
public:
    explicit IdleGpuUsers(std::string proc_root) : proc_root_(std::move(proc_root)) {}

    void add_to(SourceSample& sample, const std::vector<GpuProcessUse>& usage) {
        if (usage.empty() && known_.empty()) return;
        std::unordered_set<uint32_t> listed;
        listed.reserve(sample.processes.size());
        for (const ProcessActivity& p : sample.processes) listed.insert(p.key.pid);
        std::unordered_map<uint32_t, Known> seen;
        for (const GpuProcessUse& use : usage) {
            if (!listed.insert(use.pid).second) continue;
            const std::optional<Known> known = lookup(use.pid);
            if (!known) continue;
            ProcessActivity a;
            a.key = known->key;
            a.set_comm(known->comm);
            sample.processes.push_back(a);
            seen.emplace(use.pid, *known);
        }
        known_ = std::move(seen);
    }

private:
    struct Known {
        int64_t identity_ns = 0;
        ProcessKey key;
        std::string comm;
    };

    std::optional<Known> lookup(uint32_t pid) const {
        const std::string dir = proc_root_ + "/" + std::to_string(pid);
        struct stat st{};
        if (stat(dir.c_str(), &st) != 0) return std::nullopt;
        const int64_t identity = static_cast<int64_t>(st.st_ctim.tv_sec) * 1'000'000'000 + st.st_ctim.tv_nsec;
        if (const auto it = known_.find(pid); it != known_.end() && it->second.identity_ns == identity) return it->second;
        const std::optional<ProcPidStat> stat_line = parse_proc_pid_stat(read_text_file(dir + "/stat", 4096).text);
        if (!stat_line) return std::nullopt;
        return Known{identity, ProcessKey{stat_line->pid, stat_line->start_ticks}, stat_line->comm};
    }

    std::string proc_root_;
    std::unordered_map<uint32_t, Known> known_;  // the users added last interval
};

/// Where one interval ends and the next begins (CLOCK_MONOTONIC and realtime of the same instant).
struct IntervalEdge {
    uint64_t monotonic_ns = 0;
    uint64_t realtime_ns = 0;
};

/// The collector's stages for one interval, in data-path order: source → node CPU → energy →
/// workloads → frame. Owns everything the loop needs between frames.
class Collection {
public:
    Collection(const CollectorOptions& o, const std::string& node)
        : options_(o),
          node_(node),
          source_(make_process_source(source_settings(o))),
          edge_{monotonic_now_ns(), realtime_now_ns()},
          meter_(discover_meter(o, node)),
          metadata_(make_metadata(o, node)),
          resolver_(o.proc_root, WorkloadResolver::kDefaultRefreshSamples, o.docker_data_root),
          idle_gpu_users_(o.proc_root) {
        log_info("source: {}", source_->describe());
    }

    [[nodiscard]] const ProcessSource& source() const noexcept { return *source_; }
    [[nodiscard]] const EnergyMeter& meter() const noexcept { return meter_; }
    [[nodiscard]] uint64_t interval_start_ns() const noexcept { return edge_.monotonic_ns; }

    /// Whether the node's GPUs differ from the meter's: a device a source does not publish (a GPU added,
    /// a new MIG layout), or GPUs where there were none (a driver loaded after the collector started).
    [[nodiscard]] bool gpus_changed() {
        if (options_.gpu == "off") return false;
        if (meter_.gpu_sources_have_new_devices()) return true;
        if (!meter_.has_gpu_source("nvml") && nvml_finds_gpus(nvml_settings(options_))) return true;
        return !meter_.has_gpu_source("drm") && drm_finds_cards(drm_settings(options_));
    }
    /// Discovers the meters again (for a new segment generation: the zones belong to its header).
    void rediscover_meter() {
        meter_ = EnergyMeter();  // the old sources go first: NVML is shut down before it is loaded again
        meter_ = discover_meter(options_, node_);
        gpu_devices_.clear();
        gpu_usage_.clear();
    }

    /// Measures the interval that ends now and publishes it as one frame.
    void publish_frame(keplershm::Writer& writer, bool first) {
        SourceSample sample = source_->sample();
        // The process boundary is the interval's end; the realtime end is the same instant.
        const IntervalEdge end{sample.read_time_ns, sample.read_time_ns + (realtime_now_ns() - monotonic_now_ns())};
        const std::vector<keplershm_zone_sample> zones = meter_.read(end.monotonic_ns);
        meter_.read_gpus(gpu_devices_, gpu_usage_, end.monotonic_ns);
        idle_gpu_users_.add_to(sample, gpu_usage_);
        const std::vector<std::shared_ptr<const CgroupWorkload>> workloads = resolve_workloads(sample);
        const std::shared_ptr<const PodIndex> pods = metadata_ ? metadata_->snapshot() : nullptr;

        FrameInputs in;
        in.interval_start_ns = edge_.monotonic_ns;
        in.interval_end_ns = end.monotonic_ns;
        in.interval_start_realtime_ns = edge_.realtime_ns;
        in.interval_end_realtime_ns = end.realtime_ns;
        in.first = first;
        in.source = source_->kind();
        in.power_source = meter_.power_source();
        in.sample = &sample;
        in.workloads = &workloads;
        // Node busy time comes from the source, on its processes' clock; a source without it leaves the
        // frame without node CPU time rather than mixing in /proc/stat's tick samples.
        in.node_cpu = sample.node_cpu ? &*sample.node_cpu : nullptr;
        in.zones = &zones;
        in.pods = pods.get();
        in.gpu_devices = &gpu_devices_;
        in.gpu_usage = &gpu_usage_;
        keplershm::Draft draft = writer.begin();
        const FrameSummary summary = build_frame(draft, in);
        writer.commit(draft);
        if (summary.processes_truncated > 0) {
            log_debug("frame {}: {} processes over capacity went to the unaccounted record", draft.sequence(),
                      summary.processes_truncated);
        }
        if (summary.unknown_container && metadata_) metadata_->request_refresh();
        edge_ = end;
    }

private:
    static SourceSettings source_settings(const CollectorOptions& o) {
        SourceSettings s;
        s.kind = o.source;
        s.proc_root = o.proc_root;
        s.bpf_attach = o.bpf_attach;
        s.bpf_max_processes = o.bpf_max_processes;
        s.bpf_max_threads = o.bpf_max_threads;
        s.hardware_counters = o.hardware_counters;
        return s;
    }

    std::vector<std::shared_ptr<const CgroupWorkload>> resolve_workloads(SourceSample& sample) {
        std::vector<std::shared_ptr<const CgroupWorkload>> workloads;
        workloads.reserve(sample.processes.size());
        for (ProcessActivity& p : sample.processes) workloads.push_back(resolver_.resolve(p));
        resolver_.end_sample();
        return workloads;
    }

    const CollectorOptions& options_;
    std::string node_;
    // Declaration order is initialisation order: the source counts from its creation on, so the first
    // interval starts right after it (before meters and metadata, which may take a while).
    std::unique_ptr<ProcessSource> source_;
    IntervalEdge edge_;
    EnergyMeter meter_;
    std::vector<keplershm_gpu_device> gpu_devices_;  // this interval's, reused across frames
    std::vector<GpuProcessUse> gpu_usage_;
    std::unique_ptr<KubeMetadata> metadata_;
    WorkloadResolver resolver_;
    IdleGpuUsers idle_gpu_users_;
};

int collect(const CollectorOptions& o, const sigset_t& signals) {
    const std::string node = node_name(o.node_name);
    Collection collection(o, node);
    std::optional<keplershm::Writer> writer = create_writer(o.shm_name, writer_options(o, collection.source(), collection.meter(), node), signals);
    if (!writer) return 0;  // stopped by a signal while waiting for the name
    log_info("publishing to /dev/shm/{} every {} ms (node {}, {} CPUs, {} energy zones)", o.shm_name,
             std::chrono::duration_cast<std::chrono::milliseconds>(o.interval).count(), node, writer->header().cpu_count,
             writer->header().zone_count);

    const uint64_t interval_ns = static_cast<uint64_t>(o.interval.count());
    const uint64_t rescan_frames = o.gpu_rescan.count() > 0 ? std::max<uint64_t>(1, static_cast<uint64_t>(o.gpu_rescan / o.interval)) : 0;
    uint64_t deadline = collection.interval_start_ns() + interval_ns;
    bool first = true;
    for (uint64_t frame = 0; o.frames == 0 || frame < o.frames; ++frame) {
        if (!wait_until(deadline, *writer, signals)) break;
        collection.publish_frame(*writer, first);
        first = false;
        const SelfUsage self = self_usage(o.proc_root);
        writer->set_overhead(self.cpu_time_ns, self.rss_bytes);
        writer->heartbeat();
        if (rescan_frames != 0 && (frame + 1) % rescan_frames == 0 && collection.gpus_changed()) {
            // The zones and GPU devices belong to the segment header: a new set is a new generation, which
            // readers follow as they follow a restart (and counters continue in the estimator's totals).
            log_info("energy: the node's GPUs changed (a GPU or MIG layout appeared, or a driver loaded): discovering "
                     "the meters again for a new generation of '{}'", o.shm_name);
            writer->close();
            writer.reset();
            collection.rediscover_meter();
            writer = create_writer(o.shm_name, writer_options(o, collection.source(), collection.meter(), node), signals);
            if (!writer) return 0;
            log_info("publishing generation {:#x} with {} energy zones", writer->generation(), writer->header().zone_count);
            first = true;
        }
        deadline += interval_ns;
        if (const uint64_t now = monotonic_now_ns(); deadline < now) {
            log_debug("frame took longer than the interval; next one in a full interval");
            deadline = now + interval_ns;
        }
    }
    writer->close();
    return 0;
}

}  // namespace

namespace {
/// The procfs source holds one /proc/<pid>/stat open per process between reads (half the cost of a
/// scan); the default soft limit of 1,024 descriptors would cap that below a busy node's process count.
void raise_descriptor_limit() {
    rlimit limit{};
    if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur >= limit.rlim_max) return;
    limit.rlim_cur = limit.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &limit) != 0) log_warn("cannot raise the descriptor limit: {}", std::strerror(errno));
}
}  // namespace

int run_collector(const CollectorOptions& options) {
    set_log_program("kepler-collect");
    set_log_level(parse_log_level(options.log_level).value_or(LogLevel::info));
    raise_descriptor_limit();
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
