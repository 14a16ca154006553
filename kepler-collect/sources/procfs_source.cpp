#include "sources/procfs_source.hpp"

#include <unistd.h>

#include <algorithm>

#include <fmt/format.h>

#include "common/text_io.hpp"

namespace kepler::collect {

ProcfsSource::ProcfsSource(std::string proc_root)
    : proc_root_(std::move(proc_root)),
      files_(proc_root_),
      cpus_(static_cast<uint32_t>(std::max(1L, sysconf(_SC_NPROCESSORS_ONLN)))) {
    previous_read_ns_ = monotonic_now_ns();
    for (const ProcPidStat& p : files_.read_all()) {
        previous_[ProcessKey{p.pid, p.start_ticks}] = Seen::of(p);
    }
}

std::string ProcfsSource::describe() const {
    return fmt::format("procfs (utime+stime of {}/<pid>/stat, {} ticks/s)", proc_root_, clock_ticks_per_second());
}

std::vector<ProcPidStat> ProcfsSource::scan(const std::string& proc_root) {
    return ProcStatFiles(proc_root).read_all();
}

SourceSample ProcfsSource::sample() {
    SourceSample out;
    out.read_time_ns = monotonic_now_ns();
    out.metric_mask = KEPLERSHM_METRIC_CPU_TIME;
    const uint64_t tick_ns = ns_per_tick();

    SeenMap current;
    const std::vector<ProcPidStat> processes = files_.read_all();
    current.reserve(processes.size());
    uint64_t busy_ns = 0;
    for (const ProcPidStat& p : processes) {
        const ProcessKey key{p.pid, p.start_ticks};
        const Seen& seen = current[key] = Seen::of(p);
        const uint64_t total = seen.own_ticks;

        ProcessActivity a;
        a.key = key;
        a.set_comm(p.comm);
        if (p.flags & kPfKthread) a.flags |= KEPLERSHM_PROC_KERNEL;
        const auto before = previous_.find(key);
        if (before == previous_.end()) {
            a.flags |= KEPLERSHM_PROC_NEW;  // started after the previous scan: all its time is in this interval
            a.cpu_time_ns = total * tick_ns;
        } else {
            a.cpu_time_ns = total > before->second.own_ticks ? (total - before->second.own_ticks) * tick_ns : 0;
        }
        busy_ns += a.cpu_time_ns;
        if (a.cpu_time_ns > 0 || (a.flags & KEPLERSHM_PROC_NEW)) out.processes.push_back(a);
    }
    for (const auto& [key, seen] : previous_) {
        if (!current.contains(key)) ++out.exited_processes;
    }
    busy_ns += ended_ticks(previous_, current) * tick_ns;
    out.node_cpu = spread_over_cpus(busy_ns, out.read_time_ns - previous_read_ns_, cpus_);
    previous_ = std::move(current);
    previous_read_ns_ = out.read_time_ns;
    return out;
}

// What processes that ended since the previous scan ran after it. A reaper's cutime + cstime grows by the
// whole run of each child it waits for (the child's own waited-for children included); the part of that
// run the previous scan had already seen (own + children's ticks then) is in earlier frames, so it is
// taken back from the parent that scan named. Kept per parent: a parent that reaped without waiting
// (SIGCHLD ignored: its cutime does not grow) loses its children's tails, not others' time. A child
// whose parent ended too was reaped by that parent (now in the grandparent's cutime) or by a subreaper
// or init after reparenting: either way some live process's growth holds it, so it is taken back from
// the node's sum.
uint64_t ProcfsSource::ended_ticks(const SeenMap& before, const SeenMap& now) {
    std::unordered_map<uint32_t, int64_t> by_parent;  // pid -> growth of its children's time
    for (const auto& [key, seen] : now) {
        const auto earlier = before.find(key);
        const uint64_t was = earlier != before.end() ? earlier->second.children_ticks : 0;  // new: 0 at fork
        by_parent[key.pid] = seen.children_ticks > was ? static_cast<int64_t>(seen.children_ticks - was) : 0;
    }
    int64_t orphans = 0;
    for (const auto& [key, seen] : before) {
        if (now.contains(key)) continue;
        const auto seen_ticks = static_cast<int64_t>(seen.own_ticks + seen.children_ticks);
        const auto parent = by_parent.find(seen.ppid);
        (parent != by_parent.end() ? parent->second : orphans) -= seen_ticks;
    }
    int64_t ticks = orphans;
    for (const auto& [pid, grown] : by_parent) ticks += std::max<int64_t>(grown, 0);
    return ticks > 0 ? static_cast<uint64_t>(ticks) : 0;
}

NodeCpuSample ProcfsSource::spread_over_cpus(uint64_t busy_ns, uint64_t wall_ns, uint32_t cpus) {
    NodeCpuSample sample;
    sample.busy_ns = busy_ns;
    sample.cpus.reserve(cpus);
    for (uint32_t cpu = 0; cpu < cpus; ++cpu) {
        keplershm_cpu_sample c{};
        c.cpu = cpu;
        c.flags = KEPLERSHM_CPU_NODE_SHARE;
        c.user_ns = busy_ns / cpus + (cpu < busy_ns % cpus ? 1 : 0);  // the shares add up to busy_ns exactly
        c.idle_ns = wall_ns > c.user_ns ? wall_ns - c.user_ns : 0;
        sample.cpus.push_back(c);
    }
    return sample;
}

}  // namespace kepler::collect
