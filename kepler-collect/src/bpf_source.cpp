#include "bpf_source.hpp"

#include <bpf/bpf.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <unordered_set>

#include <fmt/format.h>

#include "log.hpp"
#include "proc_stat.hpp"
#include "text_io.hpp"

namespace kepler::collect {

namespace {

constexpr uint32_t kStaleCheckEvery = 60;   // samples between checks for entries whose process vanished
constexpr int kStateReadAttempts = 4;       // re-reads of the per-CPU state when a copy was torn

uint64_t grown(uint64_t after, uint64_t before) noexcept { return after > before ? after - before : 0; }

constexpr uint32_t kValidFlag[KEPLER_HW_COUNTERS] = {KEPLERSHM_PROC_CYCLES_VALID, KEPLERSHM_PROC_INSTRUCTIONS_VALID,
                                                     KEPLERSHM_PROC_CACHE_MISSES_VALID};
constexpr uint64_t kMetricBit[KEPLER_HW_COUNTERS] = {KEPLERSHM_METRIC_CYCLES, KEPLERSHM_METRIC_INSTRUCTIONS,
                                                     KEPLERSHM_METRIC_CACHE_MISSES};

ProcessKey to_key(const kepler_proc_key& k) noexcept { return ProcessKey{k.tgid, k.start_ticks}; }
kepler_proc_key to_bpf_key(const ProcessKey& k) noexcept { return kepler_proc_key{k.tgid, 0, k.start_ticks}; }

}  // namespace

BpfSource::BpfSource(const BpfOptions& options, std::string proc_root)
    : program_(BpfProgram::load(options)),
      proc_root_(std::move(proc_root)),
      keys_(new kepler_proc_key[program_->max_processes()]),
      values_(new kepler_proc_stats[program_->max_processes()]) {}

BpfSource::~BpfSource() = default;

std::string BpfSource::describe() const {
    std::string text = fmt::format("bpf (sched_switch via {}, {} process entries)", to_string(program_->mode()),
                                   program_->max_processes());
    for (const std::string& d : program_->degraded()) text += fmt::format("; {}", d);
    return text;
}

uint64_t BpfSource::metric_mask() const {
    uint64_t mask = KEPLERSHM_METRIC_CPU_TIME | KEPLERSHM_METRIC_SOFTIRQ;
    if (program_->page_cache_attached()) mask |= KEPLERSHM_METRIC_PAGE_CACHE;
    for (uint32_t c = 0; c < KEPLER_HW_COUNTERS; ++c) {
        if (program_->counters().available(c)) mask |= kMetricBit[c];
    }
    return mask;
}

size_t BpfSource::read_entries() {
    const int fd = program_->processes_fd();
    const uint32_t capacity = program_->max_processes();
    size_t total = 0;
    uint64_t token = 0;  // hash maps use a u32 bucket index as the batch token
    bool first = true;
    while (total < capacity) {
        uint32_t count = static_cast<uint32_t>(capacity - total);
        uint64_t next_token = 0;
        const int err = bpf_map_lookup_batch(fd, first ? nullptr : &token, &next_token, keys_.get() + total,
                                             values_.get() + total, &count, nullptr);
        if (err == 0 || err == -ENOENT) total += count;  // ENOENT: this was the last chunk
        if (err == -ENOENT) return total;
        if (err == -ENOSPC) {  // one bucket holds more entries than the buffer has room left for
            log_warn("bpf: map read stopped early ({} of its entries read): buffer full", total);
            return total;
        }
        if (err != 0) {
            if (!first) throw CollectError(fmt::format("bpf: reading the processes map: {}", std::strerror(-err)));
            break;  // no batch support (kernels before 5.6): walk the keys instead
        }
        token = next_token;
        first = false;
    }
    if (!first) return total;

    kepler_proc_key key{};
    kepler_proc_key next{};
    bool more = bpf_map_get_next_key(fd, nullptr, &next) == 0;
    while (more && total < capacity) {
        if (bpf_map_lookup_elem(fd, &next, &values_[total]) == 0) keys_[total++] = next;
        key = next;
        more = bpf_map_get_next_key(fd, &key, &next) == 0;
    }
    return total;
}

std::unordered_map<ProcessKey, uint64_t, ProcessKeyHash> BpfSource::read_in_flight(uint64_t& boundary_ns) {
    const uint32_t cpus = program_->possible_cpus();
    const size_t stride = (sizeof(kepler_cpu_state) + 7) & ~size_t{7};  // per-CPU values are 8-byte aligned
    std::vector<uint8_t> buffer(stride * cpus);
    std::vector<kepler_cpu_state> states(cpus);
    std::vector<bool> settled(cpus, false);
    const uint32_t zero = 0;

    for (int attempt = 0; attempt < kStateReadAttempts; ++attempt) {
        if (bpf_map_lookup_elem(program_->cpu_states_fd(), &zero, buffer.data()) != 0) {
            throw CollectError(fmt::format("bpf: reading the per-CPU state: {}", std::strerror(errno)));
        }
        boundary_ns = monotonic_now_ns();  // SYNC POINT: pairs with the version stores in on_switch()
        bool all = true;
        for (uint32_t cpu = 0; cpu < cpus; ++cpu) {
            kepler_cpu_state s;
            std::memcpy(&s, buffer.data() + cpu * stride, sizeof s);
            // A copy is whole when both version words agree (see kepler.h). Keep a whole copy from an
            // earlier attempt only if this attempt tore: a later whole copy is closer to the boundary.
            if (s.version_end == s.version_begin) {
                states[cpu] = s;
                settled[cpu] = true;
            } else {
                settled[cpu] = false;
                all = false;
            }
        }
        if (all) break;
    }

    std::unordered_map<ProcessKey, uint64_t, ProcessKeyHash> in_flight;
    for (uint32_t cpu = 0; cpu < cpus; ++cpu) {
        const kepler_cpu_state& s = states[cpu];
        // Unsettled: the CPU switched while we copied; its slice is credited at the next boundary.
        if (!settled[cpu] || s.running_since_ns == 0 || s.tid == 0 || boundary_ns <= s.running_since_ns) continue;
        // A thread that ended meanwhile resolves to nothing: its last slice was charged at its exit.
        const ProcessKey key = resolve_thread(s.tid);
        if (key.tgid == 0) continue;
        in_flight[key] += boundary_ns - s.running_since_ns;
    }
    return in_flight;
}

// The per-CPU record holds only the thread id (cheaper for every context switch): find its process.
ProcessKey BpfSource::resolve_thread(uint32_t tid) const {
    const ReadResult status = read_text_file(fmt::format("{}/{}/status", proc_root_, tid), 16384);
    uint64_t tgid = 0;
    for (std::string_view line : split_lines(status.text)) {
        if (starts_with(line, "Tgid:")) tgid = parse_u64(line.substr(5)).value_or(0);
    }
    if (tgid == 0 || tgid > UINT32_MAX) return {};
    const ReadResult stat = read_text_file(fmt::format("{}/{}/stat", proc_root_, tgid), 4096);
    const auto parsed = parse_proc_pid_stat(stat.text);
    return parsed ? ProcessKey{static_cast<uint32_t>(tgid), parsed->start_ticks} : ProcessKey{};
}

uint64_t BpfSource::read_drops() {
    const uint32_t cpus = program_->possible_cpus();
    std::vector<uint64_t> per_cpu(cpus);
    const uint32_t index = KEPLER_DROP_MAP_FULL;
    if (bpf_map_lookup_elem(program_->drops_fd(), &index, per_cpu.data()) != 0) return drops_seen_;
    uint64_t total = 0;
    for (uint64_t v : per_cpu) total += v;
    return total;
}

void BpfSource::delete_entry(const ProcessKey& key) {
    const kepler_proc_key k = to_bpf_key(key);
    bpf_map_delete_elem(program_->processes_fd(), &k);  // ENOENT is fine: already gone
    ledger_.erase(key);
}

ProcessActivity BpfSource::account(const ProcessKey& key, const kepler_proc_stats& stats, uint64_t in_flight_ns,
                                   bool in_map, SourceSample& out) {
    auto [it, inserted] = ledger_.try_emplace(key);
    Ledger& L = it->second;
    ProcessActivity a;
    a.key = key;
    a.cgroup_id = stats.cgroup_id;
    a.set_comm(std::string_view(stats.comm, strnlen(stats.comm, sizeof stats.comm)));
    if (inserted) a.flags |= KEPLERSHM_PROC_NEW;
    if (stats.flags & KEPLER_STATS_KTHREAD) a.flags |= KEPLERSHM_PROC_KERNEL;

    // Never below what was already published: a slice seen in flight last time is in the map now.
    const uint64_t effective = stats.cpu_time_ns + in_flight_ns;
    a.cpu_time_ns = grown(effective, L.effective_cpu_ns);
    L.effective_cpu_ns = std::max(L.effective_cpu_ns, effective);

    for (uint32_t c = 0; c < KEPLER_HW_COUNTERS; ++c) {
        const bool valid = program_->counters().available(c) && stats.hw_unavailable[c] == L.last.hw_unavailable[c];
        if (!valid) continue;  // a failed read means unknown, which is not zero
        a.flags |= kValidFlag[c];
        const uint64_t d = grown(stats.hw[c], L.last.hw[c]);
        (c == KEPLER_HW_CYCLES ? a.cycles : c == KEPLER_HW_INSTRUCTIONS ? a.instructions : a.cache_misses) = d;
    }
    if (program_->page_cache_attached()) {
        a.flags |= KEPLERSHM_PROC_PAGE_CACHE_VALID;
        const uint64_t requested = grown(stats.page_cache_requested, L.last.page_cache_requested);
        const uint64_t added = grown(stats.page_cache_added, L.last.page_cache_added);
        a.page_cache_hits = grown(requested, added);  // hits ≈ requested − inserted (writes insert too)
        a.page_cache_misses = added;
    }
    a.flags |= KEPLERSHM_PROC_SOFTIRQ_VALID;
    for (size_t v = 0; v < a.softirq.size(); ++v) a.softirq[v] = grown(stats.softirq[v], L.last.softirq[v]);
    if (in_map) L.last = stats;

    if ((stats.flags & KEPLER_STATS_EXITED) && !L.exit_reported) {
        a.flags |= KEPLERSHM_PROC_EXITED;
        L.exit_reported = true;
        delete_next_.push_back(key);  // its last slice may still be added: delete after one more interval
        ++out.exited_processes;
    }
    return a;
}

SourceSample BpfSource::sample() {
    for (const ProcessKey& key : delete_next_) delete_entry(key);
    delete_next_.clear();

    SourceSample out;
    const size_t entries = read_entries();  // first the map, then the CPUs: see the class comment
    std::unordered_map<ProcessKey, uint64_t, ProcessKeyHash> in_flight = read_in_flight(out.read_time_ns);
    const uint64_t drops = read_drops();
    out.dropped_entries = grown(drops, drops_seen_);
    drops_seen_ = std::max(drops_seen_, drops);
    out.metric_mask = metric_mask();

    std::unordered_set<ProcessKey, ProcessKeyHash> seen;
    seen.reserve(entries + in_flight.size());
    std::vector<ProcessKey> quiet;
    for (size_t i = 0; i < entries; ++i) {
        const ProcessKey key = to_key(keys_[i]);
        const auto running = in_flight.find(key);
        const uint64_t running_ns = running != in_flight.end() ? running->second : 0;
        if (running != in_flight.end()) in_flight.erase(running);
        ProcessActivity a = account(key, values_[i], running_ns, true, out);
        seen.insert(key);
        const bool active = a.cpu_time_ns || a.cycles || a.instructions || a.page_cache_hits ||
                            a.page_cache_misses || (a.flags & (KEPLERSHM_PROC_NEW | KEPLERSHM_PROC_EXITED)) ||
                            std::any_of(a.softirq.begin(), a.softirq.end(), [](uint64_t v) { return v != 0; });
        Ledger& L = ledger_[key];
        L.quiet_samples = active ? 0 : L.quiet_samples + 1;
        if (active) {
            out.processes.push_back(a);
        } else if (L.quiet_samples >= kStaleCheckEvery && !L.exit_reported) {
            quiet.push_back(key);
        }
    }
    // Running since its first switch-in and never switched out yet: not in the map, only on a CPU.
    for (const auto& [key, running_ns] : in_flight) {
        kepler_proc_stats none{};
        const ReadResult comm = read_text_file(fmt::format("{}/{}/comm", proc_root_, key.tgid), 256);
        std::string_view name = trim(comm.text);
        std::memcpy(none.comm, name.data(), std::min(name.size(), sizeof none.comm - 1));
        ProcessActivity a = account(key, none, running_ns, false, out);
        seen.insert(key);
        out.processes.push_back(a);
    }
    // Entries we deleted leave the ledger with them.
    std::erase_if(ledger_, [&](const auto& item) { return !seen.contains(item.first); });
    if (++samples_ % kStaleCheckEvery == 0) collect_stale(quiet);
    return out;
}

// Safety net: an entry whose process is gone but was never flagged EXITED (e.g. the exit happened
// while the map was full) would otherwise occupy the map for ever.
void BpfSource::collect_stale(const std::vector<ProcessKey>& quiet) {
    for (const ProcessKey& key : quiet) {
        const ReadResult stat = read_text_file(fmt::format("{}/{}/stat", proc_root_, key.tgid), 4096);
        const auto parsed = parse_proc_pid_stat(stat.text);
        if (!parsed || parsed->start_ticks != key.start_ticks) delete_entry(key);
    }
}

}  // namespace kepler::collect
