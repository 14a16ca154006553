#include "sources/bpf_loader.hpp"

#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <linux/perf_event.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>

#include <fmt/format.h>

#include "support/log/log.hpp"
#include "common/text_io.hpp"
#include "kepler.skel.h"
#include "sources/proc_stat.hpp"

namespace kepler::collect {

namespace {

/// One hook of kepler.bpf.c; its programs are named kepler_<name>_{btf,raw,tp}.
struct HookSpec {
    const char* name;
    const char* category;  // tracefs events/<category>/<event>
    const char* event;
    bool page_cache;       // optional: only recent kernels have both filemap events
};

constexpr HookSpec kHooks[] = {
    {"switch", "sched", "sched_switch", false},
    {"softirq", "irq", "softirq_entry", false},
    {"exit", "sched", "sched_process_exit", false},
    {"exec", "sched", "sched_process_exec", false},
    {"pages_requested", "filemap", "mm_filemap_get_pages", true},
    {"pages_added", "filemap", "mm_filemap_add_to_page_cache", true},
};

const char* program_suffix(AttachMode mode) noexcept {
    switch (mode) {
        case AttachMode::tp_btf: return "btf";
        case AttachMode::raw_tp: return "raw";
        case AttachMode::tracepoint: return "tp";
    }
    return "?";
}

bool path_exists(const char* path) noexcept {
    struct stat st {};
    return ::stat(path, &st) == 0;
}

std::string tracefs_events_dir() {
    for (const char* dir : {"/sys/kernel/tracing/events", "/sys/kernel/debug/tracing/events"}) {
        if (path_exists(dir)) return dir;
    }
    return {};
}

/// Every tracepoint has a `btf_trace_<event>` typedef in the kernel's BTF; tracefs is the fallback.
bool kernel_has_event(const btf* vmlinux, const HookSpec& hook) {
    if (vmlinux != nullptr) {
        const std::string type = fmt::format("btf_trace_{}", hook.event);
        return btf__find_by_name_kind(vmlinux, type.c_str(), BTF_KIND_TYPEDEF) >= 0;
    }
    const std::string dir = tracefs_events_dir();
    return !dir.empty() && path_exists(fmt::format("{}/{}/{}", dir, hook.category, hook.event).c_str());
}

// libbpf explains failures (verifier log, missing BTF types) through this callback: keep it at debug
// level, because failures of the first flavours in the chain are expected on some kernels.
int libbpf_to_log(enum libbpf_print_level level, const char* format, va_list args) {
    if (level == LIBBPF_DEBUG || log_level() > LogLevel::debug) return 0;
    char line[1024];
    const int n = std::vsnprintf(line, sizeof line, format, args);
    std::string_view text(line, n > 0 ? std::min<size_t>(static_cast<size_t>(n), sizeof line - 1) : 0);
    log_line(LogLevel::debug, fmt::format("libbpf: {}", trim(text)));
    return n;
}

bool has_capability(uint64_t effective, unsigned bit) noexcept { return bit < 64 && (effective >> bit) & 1u; }

// 50 Hz: a wrong "running now" record lasts at most 20 ms (see kepler_repair in kepler.bpf.c).
constexpr uint64_t kRepairPeriodNs = 20'000'000;

/// Attaches the repair program to a cpu-clock software event on every online CPU; "" on success.
std::string attach_repair(bpf_program* repair, uint32_t cpus, std::vector<bpf_link*>& links) {
    uint32_t attached = 0;
    int first_error = 0;
    for (uint32_t cpu = 0; cpu < cpus; ++cpu) {
        perf_event_attr attr{};
        attr.size = sizeof attr;
        attr.type = PERF_TYPE_SOFTWARE;
        attr.config = PERF_COUNT_SW_CPU_CLOCK;
        attr.sample_period = kRepairPeriodNs;  // cpu-clock counts nanoseconds
        const int fd = static_cast<int>(syscall(SYS_perf_event_open, &attr, -1, static_cast<int>(cpu), -1, PERF_FLAG_FD_CLOEXEC));
        if (fd < 0) {
            if (errno != ENODEV && first_error == 0) first_error = errno;  // ENODEV: CPU offline
            continue;
        }
        bpf_link* link = bpf_program__attach_perf_event(repair, fd);
        if (link == nullptr) {
            if (first_error == 0) first_error = errno;
            ::close(fd);
            continue;
        }
        links.push_back(link);  // the link closes the perf event when destroyed
        ++attached;
    }
    if (attached > 0 && first_error == 0) return {};
    return fmt::format("repair of unreported switches: {} of {} CPUs ({})", attached, cpus,
                       first_error != 0 ? std::strerror(first_error) : "no CPU online");
}

}  // namespace

const char* to_string(AttachMode mode) noexcept {
    switch (mode) {
        case AttachMode::tp_btf: return "tp_btf";
        case AttachMode::raw_tp: return "raw_tp";
        case AttachMode::tracepoint: return "tracepoint";
    }
    return "?";
}

std::optional<AttachMode> parse_attach_mode(std::string_view text) noexcept {
    if (text == "tp_btf") return AttachMode::tp_btf;
    if (text == "raw_tp") return AttachMode::raw_tp;
    if (text == "tracepoint") return AttachMode::tracepoint;
    return std::nullopt;
}

std::string bpf_prerequisite_problem() {
    if (!path_exists("/sys/kernel/btf/vmlinux")) {
        return "the kernel has no BTF (/sys/kernel/btf/vmlinux is missing; CO-RE needs CONFIG_DEBUG_INFO_BTF=y)";
    }
    // CapEff in /proc/self/status: CAP_SYS_ADMIN (21) alone, or CAP_BPF (39) + CAP_PERFMON (38) on 5.8+.
    const ReadResult status = read_text_file("/proc/self/status", 16384);
    uint64_t effective = 0;
    for (std::string_view line : split_lines(status.text)) {
        if (starts_with(line, "CapEff:")) effective = std::strtoull(std::string(trim(line.substr(7))).c_str(), nullptr, 16);
    }
    const bool sys_admin = has_capability(effective, 21);
    const bool bpf_and_perfmon = has_capability(effective, 39) && has_capability(effective, 38);
    if (!sys_admin && !bpf_and_perfmon) {
        return "not privileged for eBPF (needs CAP_BPF and CAP_PERFMON on Linux 5.8+, or CAP_SYS_ADMIN, e.g. root)";
    }
    return {};
}

std::unique_ptr<BpfProgram> BpfProgram::load(const BpfOptions& options) {
    if (std::string problem = bpf_prerequisite_problem(); !problem.empty()) throw CollectError(problem);
    if (options.max_processes == 0) throw CollectError("--bpf-max-processes must be at least 1");
    if (options.max_processes > kMaxProcessEntries) {
        throw CollectError(fmt::format("--bpf-max-processes must be at most {}", kMaxProcessEntries));
    }
    if (options.max_threads == 0) throw CollectError("--bpf-max-threads must be at least 1");
    libbpf_set_print(libbpf_to_log);

    std::unique_ptr<BpfProgram> program(new BpfProgram());
    const int cpus = libbpf_num_possible_cpus();
    if (cpus <= 0) throw CollectError(fmt::format("cannot count possible CPUs: {}", std::strerror(-cpus)));
    program->possible_cpus_ = static_cast<uint32_t>(cpus);
    program->max_processes_ = options.max_processes;
    program->max_threads_ = options.max_threads;

    if (options.hardware_counters) {
        program->counters_ = HardwareCounters::open(program->possible_cpus_);
        for (uint32_t c = 0; c < KEPLER_HW_COUNTERS; ++c) {
            if (!program->counters_.available(c)) program->degraded_.push_back(program->counters_.reason(c));
        }
    } else {
        program->degraded_.emplace_back("hardware counters: disabled by --no-hardware-counters");
    }

    btf* vmlinux = btf__load_vmlinux_btf();
    bool page_cache = true;
    for (const HookSpec& hook : kHooks) {
        if (!kernel_has_event(vmlinux, hook)) {
            if (!hook.page_cache) {
                btf__free(vmlinux);
                throw CollectError(fmt::format("the kernel has no {}/{} tracepoint", hook.category, hook.event));
            }
            page_cache = false;
            program->degraded_.push_back(
                fmt::format("page cache: the kernel has no {}/{} tracepoint", hook.category, hook.event));
        }
    }
    btf__free(vmlinux);
    program->page_cache_ = page_cache;

    std::vector<AttachMode> chain{AttachMode::tp_btf, AttachMode::raw_tp, AttachMode::tracepoint};
    if (options.attach) chain = {*options.attach};
    std::vector<std::string> failures;
    for (AttachMode mode : chain) {
        std::string why = program->try_attach(mode);
        if (why.empty()) {
            program->mode_ = mode;
            return program;
        }
        log_debug("bpf: {} flavour failed: {}", to_string(mode), why);
        failures.push_back(fmt::format("{}: {}", to_string(mode), why));
    }
    throw CollectError(fmt::format("cannot load the eBPF program ({}); --log-level debug shows libbpf's log",
                                   fmt::join(failures, "; ")));
}

void BpfProgram::size_maps(kepler_bpf* skel) const {
    skel->rodata->ns_per_tick = ns_per_tick();
    bool any_counter = false;
    for (uint32_t c = 0; c < KEPLER_HW_COUNTERS; ++c) any_counter = any_counter || counters_.available(c);
    skel->rodata->hw_counters_enabled = any_counter ? 1 : 0;
    bpf_map__set_max_entries(skel->maps.processes, max_processes_);
    bpf_map__set_max_entries(skel->maps.threads, max_threads_);
    bpf_map__set_max_entries(skel->maps.cut_marks, 2 * max_processes_);  // a mark per process and boundary parity
}

std::string BpfProgram::choose_programs(kepler_bpf* skel, AttachMode mode, std::vector<bpf_program*>& chosen) const {
    bpf_program* prog = nullptr;
    bpf_object__for_each_program(prog, skel->obj) bpf_program__set_autoload(prog, false);
    for (const HookSpec& hook : kHooks) {
        if (hook.page_cache && !page_cache_) continue;
        const std::string name = fmt::format("kepler_{}_{}", hook.name, program_suffix(mode));
        prog = bpf_object__find_program_by_name(skel->obj, name.c_str());
        if (prog == nullptr) return fmt::format("program {} missing from the object", name);
        bpf_program__set_autoload(prog, true);
        chosen.push_back(prog);
    }
    bpf_program__set_autoload(skel->progs.kepler_repair, true);  // a perf_event program: one flavour for all
    return {};
}

void BpfProgram::connect_counters(kepler_bpf* skel) const {
    bpf_map* counter_maps[KEPLER_HW_COUNTERS] = {skel->maps.hw_cycles, skel->maps.hw_instructions,
                                                 skel->maps.hw_cache_misses};
    for (uint32_t c = 0; c < KEPLER_HW_COUNTERS; ++c) {
        for (uint32_t cpu = 0; cpu < counters_.cpu_count(); ++cpu) {
            const int fd = counters_.fd(c, cpu);
            if (fd >= 0 && bpf_map_update_elem(bpf_map__fd(counter_maps[c]), &cpu, &fd, BPF_ANY) != 0) {
                log_warn("bpf: cannot put counter {} of CPU {} into its map: {}", c, cpu, std::strerror(errno));
            }
        }
    }
}

std::string BpfProgram::try_attach(AttachMode mode) {
    if (mode == AttachMode::tracepoint && tracefs_events_dir().empty()) {
        return "tracefs is not mounted (mount -t tracefs tracefs /sys/kernel/tracing)";
    }
    kepler_bpf* skel = kepler_bpf__open();
    if (skel == nullptr) return fmt::format("open: {}", std::strerror(errno));
    size_maps(skel);
    std::vector<bpf_program*> chosen;
    if (std::string why = choose_programs(skel, mode, chosen); !why.empty()) {
        kepler_bpf__destroy(skel);
        return why;
    }
    if (const int err = kepler_bpf__load(skel); err != 0) {
        kepler_bpf__destroy(skel);
        return fmt::format("load: {}", std::strerror(-err));
    }
    connect_counters(skel);

    std::vector<bpf_link*> links;
    for (bpf_program* p : chosen) {
        bpf_link* link = bpf_program__attach(p);
        if (link == nullptr) {
            const int err = errno;
            for (bpf_link* l : links) bpf_link__destroy(l);
            kepler_bpf__destroy(skel);
            return fmt::format("attach {}: {}", bpf_program__name(p), std::strerror(err));
        }
        links.push_back(link);
    }
    if (std::string why = attach_repair(skel->progs.kepler_repair, possible_cpus_, links); !why.empty()) {
        degraded_.push_back(why);  // sched_switch alone still works; only unreported switches go unrepaired
    }
    skeleton_ = skel;
    links_ = std::move(links);
    return {};
}

BpfProgram::~BpfProgram() {
    for (bpf_link* l : links_) bpf_link__destroy(l);
    if (skeleton_ != nullptr) kepler_bpf__destroy(skeleton_);
}

int BpfProgram::processes_fd() const { return bpf_map__fd(skeleton_->maps.processes); }
int BpfProgram::cpu_states_fd() const { return bpf_map__fd(skeleton_->maps.cpu_states); }
int BpfProgram::drops_fd() const { return bpf_map__fd(skeleton_->maps.drops); }
int BpfProgram::cut_marks_fd() const { return bpf_map__fd(skeleton_->maps.cut_marks); }

#ifdef KEPLER_CUT_STATS
int BpfProgram::cut_stats_fd() const { return bpf_map__fd(skeleton_->maps.cut_stats); }
#endif

void BpfProgram::publish_boundary(uint64_t boundary_ns) {
    // Through the map rather than the skeleton's mapping of .bss, which kernels without mmap-able
    // arrays do not have: the value is the whole .bss, which holds this one variable.
    skeleton_->bss->cut_boundary_ns = boundary_ns;
    const uint32_t zero = 0;
    if (bpf_map_update_elem(bpf_map__fd(skeleton_->maps.bss), &zero, skeleton_->bss, BPF_ANY) != 0) {
        throw CollectError(fmt::format("bpf: publishing the frame boundary: {}", std::strerror(errno)));
    }
    // SYNC POINT: pairs with current_boundary() in kepler_account.bpf.h. The store is visible on every
    // CPU before the caller reads the clock again to check that the boundary is still ahead.
    std::atomic_thread_fence(std::memory_order_seq_cst);
}

std::vector<uint32_t> BpfProgram::program_ids() const {
    std::vector<uint32_t> ids;
    bpf_program* prog = nullptr;
    bpf_object__for_each_program(prog, skeleton_->obj) {
        if (!bpf_program__autoload(prog)) continue;
        bpf_prog_info info{};
        uint32_t length = sizeof info;
        if (bpf_obj_get_info_by_fd(bpf_program__fd(prog), &info, &length) == 0) ids.push_back(info.id);
    }
    return ids;
}

}  // namespace kepler::collect
