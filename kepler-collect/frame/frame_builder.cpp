#include "frame/frame_builder.hpp"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <string>
#include <unordered_map>

namespace kepler::collect {

namespace {

keplershm_process to_record(const ProcessActivity& a, uint64_t cgroup_id, uint32_t workload_index) {
    keplershm_process r{};
    r.pid = a.key.pid;
    r.tgid = a.key.pid;
    r.start_time_ticks = a.key.start_time_ticks;
    r.cgroup_id = cgroup_id;
    r.workload_index = workload_index;
    r.flags = a.flags;
    std::memcpy(r.comm, a.comm.data(), sizeof r.comm);
    r.comm[sizeof r.comm - 1] = '\0';
    r.cpu_time_ns = a.cpu_time_ns;
    r.cycles = a.cycles;
    r.instructions = a.instructions;
    r.cache_misses = a.cache_misses;
    r.page_cache_hits = a.page_cache_hits;
    r.page_cache_misses = a.page_cache_misses;
    std::copy(a.softirq.begin(), a.softirq.end(), r.softirq);
    return r;
}

/// The workload record of a cgroup, with Kubernetes names when the metadata knows them.
keplershm_workload to_record(const CgroupWorkload& w, const PodIndex* pods, bool& unknown_container) {
    keplershm_workload r{};
    const WorkloadIdentity& id = w.identity;
    r.kind = id.kind;
    r.runtime = id.runtime;
    r.cgroup_id = w.cgroup_id;
    keplershm::set_text(r.container_id, id.container_id);
    keplershm::set_text(r.container_name, id.container_name);  // Kubernetes' name below wins
    keplershm::set_text(r.pod_uid, id.pod_uid);
    keplershm::set_text(r.vm_id, id.vm_id);
    keplershm::set_text(r.vm_name, id.vm_name);
    if (pods == nullptr || id.kind != KEPLERSHM_WORKLOAD_POD) return r;
    if (const auto c = pods->by_container_id.find(id.container_id); !id.container_id.empty() && c != pods->by_container_id.end()) {
        keplershm::set_text(r.container_name, c->second.container_name);
        keplershm::set_text(r.pod_name, c->second.pod_name);
        keplershm::set_text(r.pod_namespace, c->second.pod_namespace);
        if (r.runtime == KEPLERSHM_RUNTIME_UNKNOWN) r.runtime = c->second.runtime;
        return r;
    }
    if (const auto p = pods->by_pod_uid.find(id.pod_uid); p != pods->by_pod_uid.end()) {
        keplershm::set_text(r.pod_name, p->second.name);
        keplershm::set_text(r.pod_namespace, p->second.namespace_);
        // The pod is known but not this container: either the sandbox (pause) container, which the
        // API never lists, or a container that started after the last fetch.
        unknown_container = unknown_container || (!id.container_id.empty() && !id.runtime_helper);
    } else {
        unknown_container = true;
    }
    return r;
}

void fill_header(keplershm_frame& f, const FrameInputs& in) {
    f.interval_start_ns = in.interval_start_ns;
    f.interval_end_ns = in.interval_end_ns;
    f.interval_start_realtime_ns = in.interval_start_realtime_ns;
    f.interval_end_realtime_ns = in.interval_end_realtime_ns;
    f.source = in.source;
    f.power_source = in.power_source;
    f.flags = in.first ? uint32_t{KEPLERSHM_FRAME_FIRST} : 0u;
    f.process_read_time_ns = in.sample->read_time_ns;
}

/// Sample indices in publishing order: most CPU first when not everything fits, so truncation drops the
/// least significant processes (and the frame says it was truncated, and how many were wanted).
std::vector<uint32_t> publishing_order(keplershm::Draft& draft, const SourceSample& sample) {
    const size_t total = sample.processes.size();
    std::vector<uint32_t> order(total);
    std::iota(order.begin(), order.end(), 0u);
    if (total > draft.process_capacity()) {
        std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
            return sample.processes[a].cpu_time_ns > sample.processes[b].cpu_time_ns;
        });
        draft.frame().flags |= KEPLERSHM_FRAME_TRUNCATED;
        draft.set_processes_wanted(static_cast<uint32_t>(std::min<size_t>(total, UINT32_MAX)));
    }
    draft.frame().processes_seen = static_cast<uint32_t>(std::min<size_t>(total, UINT32_MAX));
    return order;
}

/// The frame's workload records, one per distinct (kind, VM, cgroup path), added as processes name them.
class WorkloadTable {
public:
    WorkloadTable(keplershm::Draft& draft, const FrameInputs& in, FrameSummary& summary)
        : draft_(draft), in_(in), summary_(summary) {}

    /// The workload_index of `w` (added to the frame on first use), or KEPLERSHM_NO_WORKLOAD when the
    /// frame has no room left for it.
    uint32_t index_of(const CgroupWorkload& w) {
        const std::string key = std::to_string(w.identity.kind) + '|' + w.identity.vm_id + '|' + w.path;
        if (const auto found = index_.find(key); found != index_.end()) return found->second;
        keplershm_workload record = to_record(w, in_.pods, summary_.unknown_container);
        if (const auto offset = draft_.add_string(w.path)) {
            record.cgroup_path_offset = *offset;
            record.cgroup_path_length = static_cast<uint32_t>(w.path.size());
        } else {
            draft_.frame().flags |= KEPLERSHM_FRAME_STRINGS_TRUNCATED;
        }
        if (!draft_.add_workload(record)) {
            draft_.frame().flags |= KEPLERSHM_FRAME_WORKLOADS_TRUNCATED;
            return KEPLERSHM_NO_WORKLOAD;
        }
        const uint32_t index = draft_.raw().workload_count - 1;
        index_.emplace(key, index);
        return index;
    }

private:
    keplershm::Draft& draft_;
    const FrameInputs& in_;
    FrameSummary& summary_;
    std::unordered_map<std::string, uint32_t> index_;  // key: kind|vm_id|path
};

/// CPU time of the published processes and of those left out for lack of room.
struct PublishedTime {
    uint64_t published_ns = 0;
    uint64_t truncated_ns = 0;
};

PublishedTime add_processes(keplershm::Draft& draft, const FrameInputs& in, FrameSummary& summary) {
    const SourceSample& sample = *in.sample;
    const std::vector<uint32_t> order = publishing_order(draft, sample);
    const uint32_t capacity = draft.process_capacity();
    WorkloadTable workloads(draft, in, summary);
    PublishedTime time;
    for (size_t rank = 0; rank < order.size(); ++rank) {
        const ProcessActivity& a = sample.processes[order[rank]];
        if (rank >= capacity) {
            time.truncated_ns += a.cpu_time_ns;
            ++summary.processes_truncated;
            continue;
        }
        uint32_t index = KEPLERSHM_NO_WORKLOAD;
        uint64_t cgroup_id = a.cgroup_id;
        if (const CgroupWorkload* w = in.workloads != nullptr ? (*in.workloads)[order[rank]].get() : nullptr) {
            index = workloads.index_of(*w);
            if (cgroup_id == 0) cgroup_id = w->cgroup_id;
        }
        draft.add_process(to_record(a, cgroup_id, index));
        time.published_ns += a.cpu_time_ns;
        ++summary.processes_published;
    }
    return time;
}

}  // namespace

/// GPU devices as given, and each use with its process resolved against the processes this frame
/// published (a GPU user left out for capacity, or not seen by the source, keeps its pid only).
void add_gpus(keplershm::Draft& draft, const FrameInputs& in) {
    if (in.gpu_devices == nullptr) return;
    for (const keplershm_gpu_device& d : *in.gpu_devices) draft.add_gpu_device(d);
    if (in.gpu_usage == nullptr || in.gpu_usage->empty()) return;
    std::unordered_map<uint32_t, uint32_t> index_of_pid;
    const keplershm_draft& raw = draft.raw();
    for (uint32_t i = 0; i < raw.process_count; ++i) index_of_pid.emplace(raw.processes[i].pid, i);
    for (const GpuProcessUse& use : *in.gpu_usage) {
        keplershm_gpu_usage r{};
        r.pid = use.pid;
        r.device = use.device;
        r.flags = use.flags;
        r.busy_ns = use.busy_ns;
        r.memory_bytes = use.memory_bytes;
        r.process_index = 0xffffffffu;  // not in this frame (PROTOCOL.md §6.1)
        if (const auto it = index_of_pid.find(use.pid); it != index_of_pid.end()) {
            r.process_index = it->second;
            r.start_time_ticks = raw.processes[it->second].start_time_ticks;
        }
        if (!draft.add_gpu_usage(r)) break;  // over capacity: the rest are not published
    }
}

FrameSummary build_frame(keplershm::Draft& draft, const FrameInputs& in) {
    FrameSummary summary;
    keplershm_frame& f = draft.frame();
    fill_header(f, in);
    const SourceSample& sample = *in.sample;
    uint64_t mask = sample.metric_mask;
    const PublishedTime time = add_processes(draft, in, summary);

    if (in.zones != nullptr) {
        for (const keplershm_zone_sample& z : *in.zones) {
            draft.add_zone(z);
            if (z.flags & KEPLERSHM_ZONE_VALID) mask |= KEPLERSHM_METRIC_ENERGY;
        }
    }
    add_gpus(draft, in);
    keplershm_unaccounted& u = draft.unaccounted();
    u.truncated_processes = summary.processes_truncated;
    u.truncated_cpu_time_ns = time.truncated_ns;
    u.dropped_entries = sample.dropped_entries;
    u.exited_processes = sample.exited_processes;
    u.inexact_cuts = sample.inexact_cuts;
    if (sample.inexact_cuts != 0) f.flags |= KEPLERSHM_FRAME_CUT_INEXACT;
    u.cpu_time_ns = time.truncated_ns;  // without node CPU time, only what we know we left out
    if (in.node_cpu != nullptr) {
        mask |= KEPLERSHM_METRIC_NODE_CPU;
        for (const keplershm_cpu_sample& c : in.node_cpu->cpus) draft.add_cpu(c);
        // Node busy time minus what the published processes explain; never spread onto processes.
        const uint64_t unexplained = in.node_cpu->busy_ns > time.published_ns ? in.node_cpu->busy_ns - time.published_ns : 0;
        u.cpu_time_ns = std::max(unexplained, time.truncated_ns);
    }
    f.metric_mask = mask;
    return summary;
}

}  // namespace kepler::collect
