// proc_stat_files.hpp — every process's /proc/<pid>/stat, read once per interval by the procfs source.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "sources/proc_stat.hpp"

namespace kepler::collect {

/// Reads /proc/<pid>/stat of every pid listed in `proc_root`.
///
/// On a real procfs the files stay open between reads and are read again with pread: the kernel renders
/// the text at each read, and opening (path walk, permission check, file allocation) was more than half
/// the cost of a scan (9.1 µs → 5.0 µs per process on the CI machine: BM_ProcfsScan against
/// BM_ProcfsRereadHeldFiles). A held file stays bound to its
/// process: once that process has ended, reading it fails (ESRCH) even when its pid has been reused, so
/// the file is closed and the pid's current process opened afresh. Held files are bounded by the
/// descriptor limit (RLIMIT_NOFILE less a reserve); pids beyond it are opened for each read.
/// On a plain directory tree (tests' fake /proc) files are replaced rather than rendered, so each read
/// opens them.
class ProcStatFiles {
public:
    explicit ProcStatFiles(std::string proc_root);
    ~ProcStatFiles();
    ProcStatFiles(const ProcStatFiles&) = delete;
    ProcStatFiles& operator=(const ProcStatFiles&) = delete;

    /// Every process now in `proc_root` whose stat could be read and parsed. A process that ends between
    /// the listing and the read is left out (a normal race, not an error). Throws CollectError when the
    /// directory cannot be listed.
    [[nodiscard]] std::vector<ProcPidStat> read_all();

    /// Files held open between reads (0 on a plain directory tree).
    [[nodiscard]] size_t held() const noexcept { return files_.size(); }

private:
    struct Held {
        int fd = -1;
        uint64_t pass = 0;  // the last read_all() that listed this pid
    };
    /// The stat text of `pid` (`name` is its directory entry), through a held file where possible.
    [[nodiscard]] bool read_one(uint32_t pid, const char* name);
    [[nodiscard]] bool read_fd(int fd);
    void close_unlisted();

    std::string proc_root_;
    int root_fd_ = -1;
    size_t budget_ = 0;  // files that may be held open: 0 on a plain directory tree
    uint64_t pass_ = 0;
    std::unordered_map<uint32_t, Held> files_;
    std::array<char, 4096> buffer_{};  // a stat line is < 1 KiB: a full buffer is not a stat file
    std::string_view text_;            // the last file read, in buffer_
};

}  // namespace kepler::collect
