#include "sources/bpf_source.hpp"

#include <bpf/bpf.h>

#include <algorithm>
#include <time.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <unordered_set>

#include <fmt/format.h>

#include "support/log/log.hpp"
#include "common/text_io.hpp"
#include "sources/proc_stat.hpp"

namespace kepler::collect {

namespace {

constexpr uint32_t kStaleCheckEvery = 60;   // samples between checks for entries whose process vanished
constexpr int kSpinningReads = 8;           // re-reads of the per-CPU states before waiting between them
constexpr long kWaitStepNs = 20'000;         // then one re-read every 20 µs, up to the patience

// log2 bucket of `ns` in µs (see CutStats::read_delay_us).
size_t delay_bucket(uint64_t ns) noexcept {
    size_t bucket = 0;
    for (uint64_t us = ns / 1000; us != 0 && bucket + 1 < CutStats::kBuckets; us >>= 1) ++bucket;
    return bucket;
}

uint64_t grown(uint64_t after, uint64_t before) noexcept { return after > before ? after - before : 0; }

// The part before `boundary` of the slice a CPU's state shows still running (0: none, or the idle task).
// It has run without a switch since its start, or the state would name another task.
uint64_t running_part_before(const kepler_cpu_state& s, uint64_t boundary) noexcept {
    const bool running = s.tid != 0 && s.running_since_ns != 0 && s.running_since_ns < boundary;
    return running ? boundary - s.running_since_ns : 0;
}

constexpr uint32_t kValidFlag[KEPLER_HW_COUNTERS] = {KEPLERSHM_PROC_CYCLES_VALID, KEPLERSHM_PROC_INSTRUCTIONS_VALID,
                                                     KEPLERSHM_PROC_CACHE_MISSES_VALID};
constexpr uint64_t kMetricBit[KEPLER_HW_COUNTERS] = {KEPLERSHM_METRIC_CYCLES, KEPLERSHM_METRIC_INSTRUCTIONS,
                                                     KEPLERSHM_METRIC_CACHE_MISSES};

ProcessKey to_key(const kepler_proc_key& k) noexcept { return ProcessKey{k.tgid, k.start_ticks}; }
kepler_proc_key to_bpf_key(const ProcessKey& k) noexcept { return kepler_proc_key{k.pid, 0, k.start_time_ticks}; }

/// Copies a hash map keyed by process into `keys`/`values` (at most `capacity` entries); returns the count.
/// Batch lookups copy each bucket under its lock, so an element replaced whole by the program (a cut
/// mark) is never seen half-written.
template <class Value>
size_t read_process_map(int fd, kepler_proc_key* keys, Value* values, uint32_t capacity, const char* what) {
    size_t total = 0;
    uint64_t token = 0;  // hash maps use a u32 bucket index as the batch token
    bool first = true;
    while (total < capacity) {
        uint32_t count = static_cast<uint32_t>(capacity - total);
        uint64_t next_token = 0;
        const int err = bpf_map_lookup_batch(fd, first ? nullptr : &token, &next_token, keys + total, values + total,
                                             &count, nullptr);
        if (err == 0 || err == -ENOENT) total += count;  // ENOENT: this was the last chunk
        if (err == -ENOENT) return total;
        if (err == -ENOSPC) {  // one bucket holds more entries than the buffer has room left for
            log_warn("bpf: {} map read stopped early ({} of its entries read): buffer full", what, total);
            return total;
        }
        if (err != 0) {
            if (!first) throw CollectError(fmt::format("bpf: reading the {} map: {}", what, std::strerror(-err)));
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
        if (bpf_map_lookup_elem(fd, &next, &values[total]) == 0) keys[total++] = next;
        key = next;
        more = bpf_map_get_next_key(fd, &key, &next) == 0;
    }
    return total;
}

/// CLOCK_MONOTONIC of this process's time namespace minus the kernel's own (bpf_ktime_get_ns()), from
/// /proc/self/timens_offsets; 0 outside a time namespace or on kernels without them.
int64_t time_namespace_offset_ns() {
    const ReadResult offsets = read_text_file("/proc/self/timens_offsets", 4096);
    for (std::string_view line : split_lines(offsets.text)) {
        if (!starts_with(line, "monotonic")) continue;
        long long seconds = 0;
        long long nanoseconds = 0;
        if (std::sscanf(std::string(line).c_str(), "monotonic %lld %lld", &seconds, &nanoseconds) == 2) {
            return seconds * 1'000'000'000LL + nanoseconds;
        }
    }
    return 0;
}


}  // namespace

BpfSource::BpfSource(const BpfOptions& options, std::string proc_root)
    : program_(BpfProgram::load(options)),
      proc_root_(std::move(proc_root)),
      keys_(new kepler_proc_key[program_->max_processes()]),
      values_(new kepler_proc_stats[program_->max_processes()]),
      mark_keys_(new kepler_proc_key[2 * size_t{program_->max_processes()}]),
      marks_(new kepler_cut_mark[2 * size_t{program_->max_processes()}]),
      clock_offset_ns_(time_namespace_offset_ns()),
      cpu_task_ns_(program_->possible_cpus(), 0),
      previous_boundary_ns_(kernel_now_ns()) {}

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


uint64_t BpfSource::kernel_now_ns() const noexcept {
    return static_cast<uint64_t>(static_cast<int64_t>(monotonic_now_ns()) - clock_offset_ns_);
}

uint64_t BpfSource::user_clock_ns(uint64_t kernel_ns) const noexcept {
    return static_cast<uint64_t>(static_cast<int64_t>(kernel_ns) + clock_offset_ns_);
}

// The boundary is published ahead of time, so that every charge at or after it sees it, and the maps
// are read only once it has passed (see cut_boundary_ns in kepler.bpf.c).
uint64_t BpfSource::draw_boundary() {
    constexpr uint64_t kLead = 1'000'000;  // how far ahead the boundary is published
    // Still ahead after the publication, or drawn again. SYNC POINT (on_switch() in kepler_account.bpf.h):
    // a switch stamped with the translated scheduler clock before it loads this boundary may be stamped
    // late by a clock sample's lag (µs); the margin keeps such a stamp before a boundary it did not see.
    constexpr uint64_t kMargin = 500'000;
    constexpr int kAttempts = 8;
    uint64_t boundary = 0;
    for (int attempt = 0; attempt < kAttempts; ++attempt) {
        boundary = ((kernel_now_ns() + kLead) & ~uint64_t{1}) | boundary_parity_;  // see cut_boundary_ns
        program_->publish_boundary(boundary);
        if (kernel_now_ns() + kMargin <= boundary) break;
        // Preempted while publishing: a charge after the boundary may have missed it. Draw a later one.
        if (attempt + 1 == kAttempts) log_warn("bpf: frame boundary published late {} times in a row", kAttempts);
    }
    const uint64_t user_boundary = user_clock_ns(boundary);
    const timespec until{static_cast<time_t>(user_boundary / 1'000'000'000),
                         static_cast<long>(user_boundary % 1'000'000'000)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &until, nullptr) == EINTR) {
    }
    boundary_parity_ ^= 1;
    return boundary;
}

size_t BpfSource::read_entries() {
    return read_process_map(program_->processes_fd(), keys_.get(), values_.get(), program_->max_processes(),
                            "processes");
}

BpfSource::ProcessTimes BpfSource::read_marks(uint64_t boundary) {
    const size_t count = read_process_map(program_->cut_marks_fd(), mark_keys_.get(), marks_.get(),
                                          2 * program_->max_processes(), "cut marks");
    ProcessTimes at_boundary;
    std::vector<kepler_proc_key> previous;  // the last boundary's (the other parity), read a frame ago
    for (size_t i = 0; i < count; ++i) {
        if (marks_[i].boundary_ns == boundary) {
            at_boundary[to_key(mark_keys_[i])] = marks_[i].cpu_time_ns;
        } else {
            previous.push_back(mark_keys_[i]);
        }
    }
    delete_marks(previous);
    return at_boundary;
}

// Before the next boundary of their parity is published, so that its first charger of each process
// inserts afresh (see mark_boundary() in kepler_account.bpf.h). No program writes a mark of the last
// boundary any more: every charge stamped before this boundary has been stored (read_cpu_states()).
void BpfSource::delete_marks(const std::vector<kepler_proc_key>& keys) {
    if (keys.empty()) return;
    auto count = static_cast<uint32_t>(keys.size());
    if (bpf_map_delete_batch(program_->cut_marks_fd(), keys.data(), &count, nullptr) == 0) return;
    for (const kepler_proc_key& key : keys) bpf_map_delete_elem(program_->cut_marks_fd(), &key);  // before 5.6
}

// A copy is torn while a program on that CPU is between begin_state_write() and end_state_write(). The
// program runs with interrupts off for about a microsecond, but a hypervisor can stop the vCPU inside it
// for milliseconds, and until it resumes, that CPU's charges from before the boundary may not be in the
// maps. So a CPU still torn after a few re-reads is waited for, up to `patience`.
BpfSource::CpuStates BpfSource::read_cpu_states(std::chrono::nanoseconds patience) const {
    const uint32_t cpus = program_->possible_cpus();
    const size_t stride = (sizeof(kepler_cpu_state) + 7) & ~size_t{7};  // per-CPU values are 8-byte aligned
    std::vector<uint8_t> buffer(stride * cpus);
    CpuStates states(cpus);
    const uint32_t zero = 0;
    const uint64_t start = monotonic_now_ns();
    const uint64_t deadline = start + static_cast<uint64_t>(patience.count());
    for (int attempt = 0;; ++attempt) {
        if (bpf_map_lookup_elem(program_->cpu_states_fd(), &zero, buffer.data()) != 0) {
            throw CollectError(fmt::format("bpf: reading the per-CPU state: {}", std::strerror(errno)));
        }
        bool all = true;
        for (uint32_t cpu = 0; cpu < cpus; ++cpu) {
            if (states[cpu]) continue;
            kepler_cpu_state s;
            std::memcpy(&s, buffer.data() + cpu * stride, sizeof s);
            // SYNC POINT: pairs with begin_state_write()/end_state_write() in kepler_account.bpf.h: a copy
            // is whole when both version words agree (see kepler.h).
            if (s.version_end == s.version_begin) {
                states[cpu] = s;
            } else {
                all = false;
                ++cut_stats_.torn_copies;
            }
        }
        const uint64_t now = monotonic_now_ns();
        if (all || now >= deadline) {
            if (attempt >= kSpinningReads) {
                ++cut_stats_.writer_waits;
                cut_stats_.max_writer_wait_ns = std::max(cut_stats_.max_writer_wait_ns, now - start);
            }
            break;
        }
        if (attempt >= kSpinningReads) {
            const timespec step{0, kWaitStepNs};
            nanosleep(&step, nullptr);
        }
    }
    return states;  // a CPU still torn: its spanning slice and clocks show in the next frame, flagged
}

// Each CPU's slice that was running at the boundary: ended since (the program kept its part before the
// boundary) or still running (its part is the boundary minus its start: it has run without a switch
// since, or the state would name another task).
BpfSource::ProcessTimes BpfSource::read_spanning(const CpuStates& states, uint64_t boundary) {
    ProcessTimes before_boundary;
    for (const std::optional<kepler_cpu_state>& state : states) {
        if (!state) continue;
        const kepler_cpu_state& s = *state;
        if (s.spanned_boundary_ns == boundary) {
            before_boundary[to_key(s.spanned_process)] += s.spanned_before_ns;
        } else if (const uint64_t running = running_part_before(s, boundary); running != 0) {
            // A thread that ended meanwhile resolves to nothing: its last slice was charged at its exit.
            const ProcessKey key = resolve_thread(s.tid);
            if (key.pid != 0) before_boundary[key] += running;
        }
    }
    return before_boundary;
}

// Each CPU's task time since the previous boundary, on the processes' clock (see the class comment). The
// slice running at the boundary is split there exactly as read_spanning() splits it.
NodeCpuSample BpfSource::node_cpu_time(const CpuStates& states, uint64_t boundary) {
    const uint64_t wall = grown(boundary, previous_boundary_ns_);
    previous_boundary_ns_ = boundary;
    NodeCpuSample sample;
    for (uint32_t cpu = 0; cpu < states.size(); ++cpu) {
        if (!states[cpu]) continue;  // torn: its time stays in its baseline and shows in the next frame
        const kepler_cpu_state& s = *states[cpu];
        // A slice ended since the boundary: the program cut it; none since: the running task's part.
        const uint64_t task_ns = s.marked_boundary_ns == boundary ? s.task_at_mark_ns
                                                                  : s.task_ns + running_part_before(s, boundary);
        uint64_t& before_ns = cpu_task_ns_[cpu];
        if (s.running_since_ns != 0 || s.task_ns != 0) {  // else the CPU has not switched since load
            keplershm_cpu_sample c{};
            c.cpu = cpu;
            c.user_ns = grown(task_ns, before_ns);
            c.idle_ns = grown(wall, c.user_ns);
            sample.busy_ns += c.user_ns;
            sample.cpus.push_back(c);
        }
        // Never below what was already published (as a process's total): the part of a running slice
        // before a boundary is wall time, which the scheduler's count of the whole slice can undercut.
        before_ns = std::max(before_ns, task_ns);
    }
    return sample;
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

uint64_t BpfSource::read_drop_counter(uint32_t index) const {
    std::vector<uint64_t> per_cpu(program_->possible_cpus());
    if (bpf_map_lookup_elem(program_->drops_fd(), &index, per_cpu.data()) != 0) {
        return 0;  // never seen: the array always has the slot; the counts stay as they were
    }
    uint64_t total = 0;
    for (uint64_t v : per_cpu) total += v;
    return total;
}

void BpfSource::count_inexact(const CpuStates& states, SourceSample& out) {
    const auto torn = static_cast<uint64_t>(std::count(states.begin(), states.end(), std::nullopt));
    const uint64_t lost = read_drop_counter(KEPLER_DROP_CUT_MARK);
    const uint64_t late = read_drop_counter(KEPLER_DROP_CUT_LATE);
    out.inexact_cuts = torn + grown(lost, lost_marks_seen_) + grown(late, late_charges_seen_);
    cut_stats_.inexact_cpus += torn;
    cut_stats_.lost_marks += grown(lost, lost_marks_seen_);
    cut_stats_.late_charges += grown(late, late_charges_seen_);
    lost_marks_seen_ = std::max(lost_marks_seen_, lost);
    late_charges_seen_ = std::max(late_charges_seen_, late);
}

void BpfSource::delete_entry(const ProcessKey& key) {
    const kepler_proc_key k = to_bpf_key(key);
    bpf_map_delete_elem(program_->processes_fd(), &k);  // ENOENT is fine: already gone
    for (uint32_t parity : {0u, 1u}) {
        const kepler_proc_key mark{k.tgid, parity, k.start_ticks};
        bpf_map_delete_elem(program_->cut_marks_fd(), &mark);
    }
    ledger_.erase(key);
}

ProcessActivity BpfSource::account(const ProcessKey& key, const kepler_proc_stats& stats, uint64_t cpu_time_ns,
                                   bool in_map, SourceSample& out) {
    auto [it, inserted] = ledger_.try_emplace(key);
    Ledger& L = it->second;
    ProcessActivity a;
    a.key = key;
    a.cgroup_id = stats.cgroup_id;
    a.set_comm(std::string_view(stats.comm, strnlen(stats.comm, sizeof stats.comm)));
    if (inserted) a.flags |= KEPLERSHM_PROC_NEW;
    if (stats.flags & KEPLER_STATS_KTHREAD) a.flags |= KEPLERSHM_PROC_KERNEL;

    // Never below what was already published: the part of a slice before the last boundary was wall
    // time, and the scheduler's count of the whole slice can be a little less (hypervisor steal).
    a.cpu_time_ns = grown(cpu_time_ns, L.effective_cpu_ns);
    L.effective_cpu_ns = std::max(L.effective_cpu_ns, cpu_time_ns);

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
    const uint64_t boundary = draw_boundary();
    out.read_time_ns = user_clock_ns(boundary);
    const CpuStates states = read_cpu_states();
    const uint64_t read_delay = grown(kernel_now_ns(), boundary);
    ++cut_stats_.frames;
    ++cut_stats_.read_delay_us[delay_bucket(read_delay)];
    cut_stats_.max_read_delay_ns = std::max(cut_stats_.max_read_delay_ns, read_delay);
    ProcessTimes in_flight = read_spanning(states, boundary);
    out.node_cpu = node_cpu_time(states, boundary);
    const size_t entries = read_entries();
    const ProcessTimes marks = read_marks(boundary);  // after the entries: see mark_boundary()
    count_inexact(states, out);
    const uint64_t drops = read_drop_counter(KEPLER_DROP_MAP_FULL);
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
        const auto mark = marks.find(key);
        const uint64_t at_boundary_ns = mark != marks.end() ? mark->second : values_[i].cpu_time_ns;
        ProcessActivity a = account(key, values_[i], at_boundary_ns + running_ns, true, out);
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
        const ReadResult comm = read_text_file(fmt::format("{}/{}/comm", proc_root_, key.pid), 256);
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
        const ReadResult stat = read_text_file(fmt::format("{}/{}/stat", proc_root_, key.pid), 4096);
        const auto parsed = parse_proc_pid_stat(stat.text);
        if (!parsed || parsed->start_ticks != key.start_time_ticks) delete_entry(key);
    }
}

}  // namespace kepler::collect
