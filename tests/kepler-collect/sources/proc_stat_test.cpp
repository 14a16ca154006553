// /proc/<pid>/stat: untrusted kernel text (comm may hold anything).
#include <unistd.h>

#include <gtest/gtest.h>

#include "common/text_io.hpp"
#include "sources/proc_stat.hpp"
#include "test_support.hpp"

namespace kepler::collect {
namespace {

TEST(ProcPidStat, CommWithSpacesAndParentheses) {
    const std::string line =
        "4242 (my (weird) app) S 1 4242 4242 0 -1 4194560 500 0 0 0 123 45 67 8 20 0 3 0 987654 1000000 200 "
        "18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n";
    const auto s = parse_proc_pid_stat(line);
    ASSERT_TRUE(s);
    EXPECT_EQ(s->pid, 4242u);
    EXPECT_EQ(s->comm, "my (weird) app");
    EXPECT_EQ(s->state, 'S');
    EXPECT_EQ(s->utime_ticks, 123u);
    EXPECT_EQ(s->stime_ticks, 45u);
    EXPECT_EQ(s->children_ticks, 67u + 8u) << "cutime + cstime";
    EXPECT_EQ(s->ppid, 1u);
    EXPECT_EQ(s->start_ticks, 987654u);
    EXPECT_FALSE(s->flags & kPfKthread);
}

TEST(ProcPidStat, KernelThreadFlag) {
    const auto s = parse_proc_pid_stat("2 (kthreadd) S 0 0 0 0 -1 2129984 0 0 0 0 0 1 0 0 20 0 1 0 2 0 0 "
                                       "18446744073709551615 0 0 0 0 0 0 0 2147483647 0 0 0 0 0 0 0 0 0 0 0");
    ASSERT_TRUE(s);
    EXPECT_TRUE(s->flags & kPfKthread);
}

TEST(ProcPidStat, MalformedInputIsRejected) {
    EXPECT_FALSE(parse_proc_pid_stat(""));
    EXPECT_FALSE(parse_proc_pid_stat("12 (x"));
    EXPECT_FALSE(parse_proc_pid_stat("12 (x) S 1 2 3"));
    EXPECT_FALSE(parse_proc_pid_stat("abc (x) S 1 4242 4242 0 -1 0 0 0 0 0 1 1 0 0 20 0 1 0 5 0 0"));
    EXPECT_FALSE(parse_proc_pid_stat("12 (x) S 1 4242 4242 0 -1 0 0 0 0 0 -1 1 0 0 20 0 1 0 5 0 0"));
    EXPECT_FALSE(parse_proc_pid_stat("12 (x) S 1 4242 4242 0 -1 0 0 0 0 0 99999999999999999999999 1 0 0 20 0 1 0 5 0 0"));
}

TEST(ProcPidStat, OwnProcessParses) {
    const auto s = parse_proc_pid_stat(read_text_file_or_throw("/proc/self/stat", 4096));
    ASSERT_TRUE(s);
    EXPECT_EQ(s->pid, static_cast<uint32_t>(getpid()));
    EXPECT_GT(s->start_ticks, 0u);
}

}  // namespace
}  // namespace kepler::collect
