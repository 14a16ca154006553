#include "sources/proc_stat_files.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "common/text_io.hpp"

namespace kepler::collect {

namespace {
constexpr long kProcSuperMagic = 0x9fa0;      // statfs f_type of procfs (linux/magic.h)
constexpr rlim_t kReservedDescriptors = 256;  // left for everything else the collector opens

std::optional<uint32_t> pid_of(const char* name) noexcept {
    const std::optional<uint64_t> pid = parse_u64(name);
    if (!pid || *pid == 0 || *pid > UINT32_MAX) return std::nullopt;
    return static_cast<uint32_t>(*pid);
}

size_t descriptor_budget() noexcept {
    rlimit limit{};
    if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return 0;
    return limit.rlim_cur > kReservedDescriptors ? static_cast<size_t>(limit.rlim_cur - kReservedDescriptors) : 0;
}
}  // namespace

ProcStatFiles::ProcStatFiles(std::string proc_root) : proc_root_(std::move(proc_root)) {
    root_fd_ = ::open(proc_root_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (root_fd_ < 0) throw CollectError(fmt::format("cannot open {}: {}", proc_root_, std::strerror(errno)));
    struct statfs fs {};
    const bool rendered = fstatfs(root_fd_, &fs) == 0 && fs.f_type == kProcSuperMagic;
    budget_ = rendered ? descriptor_budget() : 0;
}

ProcStatFiles::~ProcStatFiles() {
    for (const auto& [pid, held] : files_) ::close(held.fd);
    ::close(root_fd_);
}

std::vector<ProcPidStat> ProcStatFiles::read_all() {
    // The listing gets its own descriptor: a DIR owns the one it reads, and root_fd_ anchors openat().
    const int listing_fd = ::openat(root_fd_, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR* const listing = listing_fd >= 0 ? fdopendir(listing_fd) : nullptr;
    if (listing == nullptr) {
        const int error = errno;
        if (listing_fd >= 0) ::close(listing_fd);
        throw CollectError(fmt::format("cannot list {}: {}", proc_root_, std::strerror(error)));
    }
    ++pass_;
    std::vector<ProcPidStat> result;
    result.reserve(files_.size() + 64);
    while (const dirent* entry = readdir(listing)) {
        const std::optional<uint32_t> pid = pid_of(entry->d_name);
        if (!pid || !read_one(*pid, entry->d_name)) continue;
        if (auto stat = parse_proc_pid_stat(text_)) result.push_back(std::move(*stat));
    }
    closedir(listing);
    close_unlisted();
    return result;
}

bool ProcStatFiles::read_one(uint32_t pid, const char* name) {
    const auto held = files_.find(pid);
    if (held != files_.end()) {
        held->second.pass = pass_;
        if (read_fd(held->second.fd)) return true;
        // Its process ended (ESRCH): the pid is listed again, so it names a new process now.
        ::close(held->second.fd);
        files_.erase(held);
    }
    char path[32];
    *fmt::format_to_n(path, sizeof path - 1, "{}/stat", name).out = '\0';
    const int fd = ::openat(root_fd_, path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;  // ended between the listing and the open
    const bool ok = read_fd(fd);
    if (ok && files_.size() < budget_) files_.emplace(pid, Held{fd, pass_});
    else ::close(fd);
    return ok;
}

bool ProcStatFiles::read_fd(int fd) {
    ssize_t n = 0;
    do {
        n = ::pread(fd, buffer_.data(), buffer_.size(), 0);
    } while (n < 0 && errno == EINTR);
    if (n < 0 || static_cast<size_t>(n) >= buffer_.size()) return false;  // ended, or not a stat line
    text_ = std::string_view(buffer_.data(), static_cast<size_t>(n));
    return true;
}

void ProcStatFiles::close_unlisted() {
    std::erase_if(files_, [this](const auto& entry) {
        if (entry.second.pass == pass_) return false;
        ::close(entry.second.fd);
        return true;
    });
}

}  // namespace kepler::collect
