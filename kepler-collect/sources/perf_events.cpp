#include "sources/perf_events.hpp"

#include <linux/perf_event.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include <fmt/format.h>

namespace kepler::collect {

const std::array<PerfCounterConfig, KEPLER_HW_COUNTERS>& hardware_counter_configs() noexcept {
    static const std::array<PerfCounterConfig, KEPLER_HW_COUNTERS> configs{{
        {"cycles", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES},
        {"instructions", PERF_TYPE_HARDWARE, PERF_COUNT_HW_INSTRUCTIONS},
        {"llc-read-misses", PERF_TYPE_HW_CACHE,
         PERF_COUNT_HW_CACHE_LL | (PERF_COUNT_HW_CACHE_OP_READ << 8) | (PERF_COUNT_HW_CACHE_RESULT_MISS << 16)},
    }};
    return configs;
}

namespace {
int open_counter(const PerfCounterConfig& c, int cpu) {
    perf_event_attr attr{};
    attr.size = sizeof attr;
    attr.type = c.type;
    attr.config = c.config;
    attr.disabled = 0;
    // System-wide per-CPU counting: the program attributes deltas to whichever task ran between switches.
    return static_cast<int>(syscall(SYS_perf_event_open, &attr, -1, cpu, -1, PERF_FLAG_FD_CLOEXEC));
}

const char* explain(int error) {
    switch (error) {
        case ENOENT:
        case EOPNOTSUPP: return "no PMU for this event, typical in VMs";
        case EACCES:
        case EPERM: return "not permitted (needs CAP_PERFMON, or CAP_SYS_ADMIN before 5.8)";
        default: return "";
    }
}
}  // namespace

HardwareCounters HardwareCounters::open(uint32_t possible_cpus) {
    HardwareCounters h;
    h.cpus_ = possible_cpus;
    const auto& configs = hardware_counter_configs();
    for (uint32_t counter = 0; counter < KEPLER_HW_COUNTERS; ++counter) {
        h.fds_[counter].assign(possible_cpus, -1);
        int first_error = 0;
        for (uint32_t cpu = 0; cpu < possible_cpus; ++cpu) {
            const int fd = open_counter(configs[counter], static_cast<int>(cpu));
            if (fd >= 0) {
                h.fds_[counter][cpu] = fd;
            } else if (errno != ENODEV && first_error == 0) {  // ENODEV: CPU offline
                first_error = errno;
            }
            if (fd < 0 && (errno == ENOENT || errno == EOPNOTSUPP || errno == EACCES || errno == EPERM)) break;
        }
        if (!h.available(counter)) {
            const std::string why = explain(first_error);
            h.reasons_[counter] = fmt::format("{}: unavailable ({}{}{})", configs[counter].name, std::strerror(first_error),
                                              why.empty() ? "" : ": ", why);
        }
    }
    return h;
}

bool HardwareCounters::available(uint32_t counter) const noexcept {
    if (counter >= KEPLER_HW_COUNTERS) return false;
    for (int fd : fds_[counter]) {
        if (fd >= 0) return true;
    }
    return false;
}

int HardwareCounters::fd(uint32_t counter, uint32_t cpu) const noexcept {
    if (counter >= KEPLER_HW_COUNTERS || cpu >= fds_[counter].size()) return -1;
    return fds_[counter][cpu];
}

HardwareCounters::HardwareCounters(HardwareCounters&& other) noexcept
    : cpus_(std::exchange(other.cpus_, 0)), fds_(std::move(other.fds_)), reasons_(std::move(other.reasons_)) {
    for (auto& v : other.fds_) v.clear();
}

HardwareCounters& HardwareCounters::operator=(HardwareCounters&& other) noexcept {
    if (this != &other) {
        close_all();
        cpus_ = std::exchange(other.cpus_, 0);
        fds_ = std::move(other.fds_);
        reasons_ = std::move(other.reasons_);
        for (auto& v : other.fds_) v.clear();
    }
    return *this;
}

HardwareCounters::~HardwareCounters() { close_all(); }

void HardwareCounters::close_all() noexcept {
    for (auto& v : fds_) {
        for (int& fd : v) {
            if (fd >= 0) ::close(fd);
            fd = -1;
        }
    }
}

}  // namespace kepler::collect
