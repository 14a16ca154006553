// Node facts and node CPU time: /proc/stat and /proc/cpuinfo parsing.
#include <gtest/gtest.h>

#include "common/text_io.hpp"
#include "frame/node_cpu.hpp"
#include "frame/node_info.hpp"
#include "test_support.hpp"

namespace kepler::collect {
namespace {

TEST(ProcStat, PerCpuLinesAndDeltas) {
    const std::string before =
        "cpu  300 0 150 10000 5 0 2 0 0 0\n"
        "cpu0 100 0 50 5000 5 0 1 0 0 0\n"
        "cpu1 200 0 100 5000 0 0 1 0 0 0\n"
        "intr 12345 0 0\nctxt 999\n";
    const std::string after =
        "cpu  410 0 170 10180 3 0 4 0 0 0\n"
        "cpu0 150 10 60 5090 3 2 2 1 0 0\n"
        "cpu1 260 0 110 5090 0 0 2 0 0 0\n";
    const auto a = parse_proc_stat_cpus(before);
    const auto b = parse_proc_stat_cpus(after);
    ASSERT_EQ(a.size(), 2u);
    EXPECT_EQ(a[1].cpu, 1u);
    const NodeCpuSample d = NodeCpuReader::difference(a, b, 10'000'000);
    ASSERT_EQ(d.cpus.size(), 2u);
    EXPECT_EQ(d.cpus[0].user_ns, 500'000'000u);
    EXPECT_EQ(d.cpus[0].nice_ns, 100'000'000u);
    EXPECT_EQ(d.cpus[0].iowait_ns, 0u) << "iowait went backwards: no underflow";
    EXPECT_EQ(d.cpus[0].steal_ns, 10'000'000u);
    // busy = user + nice + system + irq + softirq + steal
    EXPECT_EQ(d.busy_ns, (50 + 10 + 10 + 2 + 1 + 1 + 60 + 10 + 1) * 10'000'000ull);
    EXPECT_THROW((void)parse_proc_stat_cpus("cpu0 1 2 3\n"), CollectError);
    EXPECT_THROW((void)parse_proc_stat_cpus("cpu0 1 2 3 x 5 6 7 8\n"), CollectError);
}

TEST(ProcStat, RealNodeReadsEveryCpu) {
    NodeCpuReader reader;
    reader.read();
    testing::sleep_ms(50);
    const NodeCpuSample s = reader.read();
    EXPECT_EQ(s.cpus.size(), online_cpus());
}

TEST(CpuInfo, ModelNameAndArmFallback) {
    EXPECT_EQ(cpu_model_from_cpuinfo("processor\t: 0\nmodel name\t: Intel(R) Xeon(R) Gold 6248R CPU @ 3.00GHz\n"),
              "Intel(R) Xeon(R) Gold 6248R CPU @ 3.00GHz");
    EXPECT_EQ(cpu_model_from_cpuinfo("processor\t: 0\nCPU implementer\t: 0x41\nCPU part\t: 0xd0c\n"),
              "implementer 0x41 part 0xd0c");
    EXPECT_EQ(cpu_model_from_cpuinfo(""), "unknown");
}

}  // namespace
}  // namespace kepler::collect
