#include "frame/node_info.hpp"

#include <sys/utsname.h>
#include <unistd.h>

#include <cstdlib>
#include <ctime>

#include "common/text_io.hpp"

namespace kepler::collect {

std::string cpu_model_from_cpuinfo(std::string_view cpuinfo) {
    std::string implementer, part;
    for (std::string_view line : split_lines(cpuinfo)) {
        const size_t colon = line.find(':');
        if (colon == std::string_view::npos) continue;
        const std::string_view key = trim(line.substr(0, colon));
        const std::string_view value = trim(line.substr(colon + 1));
        if ((key == "model name" || key == "Hardware") && !value.empty()) return std::string(value.substr(0, 127));
        if (key == "CPU implementer" && implementer.empty()) implementer = value;
        if (key == "CPU part" && part.empty()) part = value;
    }
    if (!implementer.empty()) return "implementer " + implementer + " part " + part;
    return "unknown";
}

std::string node_name(const std::string& flag) {
    if (!flag.empty()) return flag;
    if (const char* env = std::getenv("NODE_NAME"); env != nullptr && *env != '\0') return env;
    utsname u{};
    return uname(&u) == 0 ? std::string(u.nodename) : std::string("unknown");
}

uint32_t online_cpus() noexcept {
    const long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? static_cast<uint32_t>(n) : 1;
}

SelfUsage self_usage(const std::string& proc_root) {
    SelfUsage u;
    timespec ts{};
    if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts) == 0) {
        u.cpu_time_ns = static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
    }
    // statm: size resident shared ... in pages.
    const ReadResult statm = read_text_file(proc_root + "/self/statm", 256);
    const auto fields = split_fields(statm.text);  // views into statm.text
    if (fields.size() >= 2) {
        if (const auto pages = parse_u64(fields[1])) u.rss_bytes = *pages * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
    }
    return u;
}

}  // namespace kepler::collect
