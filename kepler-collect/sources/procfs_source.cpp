#include "sources/procfs_source.hpp"

#include <dirent.h>

#include <cerrno>
#include <cstring>
#include <memory>

#include <fmt/format.h>

#include "common/text_io.hpp"

namespace kepler::collect {

namespace {
bool all_digits(const char* name) noexcept {
    if (*name == '\0') return false;
    for (; *name != '\0'; ++name) {
        if (*name < '0' || *name > '9') return false;
    }
    return true;
}
}  // namespace

ProcfsSource::ProcfsSource(std::string proc_root) : proc_root_(std::move(proc_root)) {
    for (const ProcPidStat& p : scan(proc_root_)) {
        previous_ticks_[ProcessKey{p.pid, p.start_ticks}] = p.utime_ticks + p.stime_ticks;
    }
}

std::string ProcfsSource::describe() const {
    return fmt::format("procfs (utime+stime of {}/<pid>/stat, {} ticks/s)", proc_root_, clock_ticks_per_second());
}

std::vector<ProcPidStat> ProcfsSource::scan(const std::string& proc_root) {
    std::unique_ptr<DIR, int (*)(DIR*)> dir(opendir(proc_root.c_str()), closedir);
    if (!dir) throw CollectError(fmt::format("cannot list {}: {}", proc_root, std::strerror(errno)));
    std::vector<ProcPidStat> result;
    std::string path;
    while (const dirent* entry = readdir(dir.get())) {
        if (!all_digits(entry->d_name)) continue;
        path.assign(proc_root).append("/").append(entry->d_name).append("/stat");
        // A process may end between readdir and read: that is a normal race, not an error.
        const ReadResult r = read_text_file(path, 4096);
        if (!r.ok()) continue;
        if (auto stat = parse_proc_pid_stat(r.text)) result.push_back(std::move(*stat));
    }
    return result;
}

SourceSample ProcfsSource::sample() {
    SourceSample out;
    out.read_time_ns = monotonic_now_ns();
    out.metric_mask = KEPLERSHM_METRIC_CPU_TIME;
    const uint64_t tick_ns = ns_per_tick();

    std::unordered_map<ProcessKey, uint64_t, ProcessKeyHash> current;
    const std::vector<ProcPidStat> processes = scan(proc_root_);
    current.reserve(processes.size());
    for (const ProcPidStat& p : processes) {
        const ProcessKey key{p.pid, p.start_ticks};
        const uint64_t total = p.utime_ticks + p.stime_ticks;
        current[key] = total;

        ProcessActivity a;
        a.key = key;
        a.set_comm(p.comm);
        if (p.flags & kPfKthread) a.flags |= KEPLERSHM_PROC_KERNEL;
        const auto before = previous_ticks_.find(key);
        if (before == previous_ticks_.end()) {
            a.flags |= KEPLERSHM_PROC_NEW;  // started after the previous scan: all its time is in this interval
            a.cpu_time_ns = total * tick_ns;
        } else {
            a.cpu_time_ns = total > before->second ? (total - before->second) * tick_ns : 0;
        }
        if (a.cpu_time_ns > 0 || (a.flags & KEPLERSHM_PROC_NEW)) out.processes.push_back(a);
    }
    for (const auto& [key, ticks] : previous_ticks_) {
        if (!current.contains(key)) ++out.exited_processes;
    }
    previous_ticks_ = std::move(current);
    return out;
}

}  // namespace kepler::collect
