// ProcStatFiles: every process's stat, through files held open on a real procfs (re-read in place each
// interval), opened afresh on a plain directory tree, within the descriptor limit.
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <vector>

#include <gtest/gtest.h>

#include "common/text_io.hpp"
#include "sources/proc_stat_files.hpp"
#include "test_support.hpp"

namespace kepler::collect {
namespace {

using testing::BusyChild;

const ProcPidStat* find(const std::vector<ProcPidStat>& all, pid_t pid) {
    const auto it = std::find_if(all.begin(), all.end(), [pid](const ProcPidStat& p) { return p.pid == static_cast<uint32_t>(pid); });
    return it != all.end() ? &*it : nullptr;
}

std::string stat_line(uint32_t pid, uint64_t utime) { return testing::proc_stat_line(pid, "p" + std::to_string(pid), utime, 0, 500); }

TEST(ProcStatFiles, APlainTreeIsReadAfreshEveryTimeAndOnlyPidsAreRead) {
    testing::TempDir proc;
    proc.write("7/stat", stat_line(7, 10));
    proc.write("8/stat", stat_line(8, 20));
    proc.write("self/stat", stat_line(9, 1));        // not a pid
    proc.write("0/stat", stat_line(0, 1));           // pid 0 is no process
    proc.write("12abc/stat", stat_line(12, 1));      // not a number
    proc.write("9/stat", std::string(5000, 'x'));    // too long to be a stat line
    ProcStatFiles files(proc.path().string());
    std::vector<ProcPidStat> all = files.read_all();
    ASSERT_EQ(all.size(), 2u);
    EXPECT_EQ(find(all, 7)->utime_ticks, 10u);
    EXPECT_EQ(files.held(), 0u);  // a fake tree's files are replaced, so none is kept

    proc.write("7/stat", stat_line(7, 15));
    std::filesystem::remove_all(proc.path() / "8");
    all = files.read_all();
    ASSERT_EQ(all.size(), 1u);
    EXPECT_EQ(all[0].utime_ticks, 15u);
}

TEST(ProcStatFiles, HeldFilesAreReadAgainInPlaceAndClosedWhenTheirProcessEnds) {
    BusyChild child(0, 1.0);
    ProcStatFiles files("/proc");
    const std::vector<ProcPidStat> first = files.read_all();
    ASSERT_NE(find(first, child.pid()), nullptr);
    EXPECT_GT(files.held(), 0u);
    const size_t held = files.held();

    // The held file renders the process's current times: what a fresh open reads, before and after.
    const uint64_t before = find(first, child.pid())->utime_ticks + find(first, child.pid())->stime_ticks;
    while (testing::proc_times(child.pid()).cpu_ns < (before + 5) * ns_per_tick()) usleep(2000);
    const std::vector<ProcPidStat> second = files.read_all();
    const ProcPidStat* again = find(second, child.pid());
    ASSERT_NE(again, nullptr);
    EXPECT_GE(again->utime_ticks + again->stime_ticks, before + 5);
    EXPECT_EQ(again->start_ticks, find(first, child.pid())->start_ticks);

    const pid_t gone = child.pid();
    child.stop();
    const std::vector<ProcPidStat> third = files.read_all();
    EXPECT_EQ(find(third, gone), nullptr);
    EXPECT_LE(files.held(), held + 16);  // the ended child's file is closed (others may come and go)
    EXPECT_NE(find(third, getpid()), nullptr);
}

TEST(ProcStatFiles, HeldFilesStayWithinTheDescriptorLimitAndTheRestIsStillRead) {
    EXPECT_EXIT(
        {
            // 256 descriptors are left for the rest of the process: a limit of 258 allows two held files.
            rlimit limit{};
            getrlimit(RLIMIT_NOFILE, &limit);
            limit.rlim_cur = 258;
            if (setrlimit(RLIMIT_NOFILE, &limit) != 0) _exit(2);
            ProcStatFiles files("/proc");
            const std::vector<ProcPidStat> all = files.read_all();
            const bool ok = files.held() == 2 && all.size() > 2 && find(all, getpid()) != nullptr &&
                            files.read_all().size() > 2;
            _exit(ok ? 0 : 1);
        },
        ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace kepler::collect
