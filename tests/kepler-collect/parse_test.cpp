// Parsers of untrusted kernel text and of the command line.
#include <unistd.h>

#include <cerrno>

#include <gtest/gtest.h>

#include "kepler_collect/collector.hpp"
#include "node_cpu.hpp"
#include "node_info.hpp"
#include "proc_stat.hpp"
#include "test_support.hpp"
#include "text_io.hpp"

namespace kepler::collect {
namespace {

TEST(ProcPidStat, CommWithSpacesAndParentheses) {
    const std::string line =
        "4242 (my (weird) app) S 1 4242 4242 0 -1 4194560 500 0 0 0 123 45 0 0 20 0 3 0 987654 1000000 200 "
        "18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n";
    const auto s = parse_proc_pid_stat(line);
    ASSERT_TRUE(s);
    EXPECT_EQ(s->pid, 4242u);
    EXPECT_EQ(s->comm, "my (weird) app");
    EXPECT_EQ(s->state, 'S');
    EXPECT_EQ(s->utime_ticks, 123u);
    EXPECT_EQ(s->stime_ticks, 45u);
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

TEST(TextIo, BoundedReadsAndStrictNumbers) {
    testing::TempDir dir;
    dir.write("small", "12345\n");
    dir.write("big", std::string(10000, 'x'));
    EXPECT_EQ(read_text_file((dir.path() / "small").string(), 16).text, "12345\n");
    const ReadResult big = read_text_file((dir.path() / "big").string(), 100);
    EXPECT_FALSE(big.ok());
    EXPECT_NE(big.message.find("larger than"), std::string::npos);
    const ReadResult missing = read_text_file((dir.path() / "none").string());
    EXPECT_EQ(missing.error, ENOENT);
    EXPECT_NE(missing.message.find("none"), std::string::npos);
    EXPECT_EQ(parse_u64(" 42\n"), 42u);
    EXPECT_FALSE(parse_u64("-1"));
    EXPECT_FALSE(parse_u64("42abc"));
    EXPECT_FALSE(parse_u64("18446744073709551616"));
    EXPECT_THROW((void)parse_u64_or_throw("x", "energy_uj"), CollectError);
}

TEST(CpuInfo, ModelNameAndArmFallback) {
    EXPECT_EQ(cpu_model_from_cpuinfo("processor\t: 0\nmodel name\t: Intel(R) Xeon(R) Gold 6248R CPU @ 3.00GHz\n"),
              "Intel(R) Xeon(R) Gold 6248R CPU @ 3.00GHz");
    EXPECT_EQ(cpu_model_from_cpuinfo("processor\t: 0\nCPU implementer\t: 0x41\nCPU part\t: 0xd0c\n"),
              "implementer 0x41 part 0xd0c");
    EXPECT_EQ(cpu_model_from_cpuinfo(""), "unknown");
}

TEST(CommandLine, DurationsAndSizes) {
    EXPECT_EQ(parse_duration("1s"), std::chrono::seconds(1));
    EXPECT_EQ(parse_duration("500ms"), std::chrono::milliseconds(500));
    EXPECT_EQ(parse_duration("2.5s"), std::chrono::milliseconds(2500));
    EXPECT_EQ(parse_duration("2"), std::chrono::seconds(2));
    EXPECT_EQ(parse_duration("1m"), std::chrono::seconds(60));
    EXPECT_FALSE(parse_duration("0s"));
    EXPECT_FALSE(parse_duration("fast"));
    EXPECT_FALSE(parse_duration("1h"));
    EXPECT_FALSE(parse_duration("-1s"));
    EXPECT_EQ(parse_byte_size("256Mi"), 256ull << 20);
    EXPECT_EQ(parse_byte_size("4096"), 4096u);
    EXPECT_EQ(parse_byte_size("1G"), 1ull << 30);
    EXPECT_FALSE(parse_byte_size("lots"));
    EXPECT_FALSE(parse_byte_size("99999999999999999999Gi"));
}

TEST(CommandLine, FlagsAndUsageErrors) {
    auto parse = [](std::vector<std::string> args, int& code) {
        std::vector<char*> argv;
        for (std::string& a : args) argv.push_back(a.data());
        return parse_command_line(static_cast<int>(argv.size()), argv.data(), code);
    };
    int code = -1;
    const auto o = parse({"kepler-collect", "--shm-name", "x", "--interval", "250ms", "--source", "procfs",
                          "--no-hardware-counters", "--max-segment-bytes", "64Mi", "--bpf-attach", "raw_tp"}, code);
    ASSERT_TRUE(o);
    EXPECT_EQ(code, 0);
    EXPECT_EQ(o->interval, std::chrono::milliseconds(250));
    EXPECT_EQ(o->source, "procfs");
    EXPECT_FALSE(o->hardware_counters);
    EXPECT_EQ(o->max_segment_bytes, 64ull << 20);
    EXPECT_EQ(o->bpf_attach, "raw_tp");
    EXPECT_FALSE(parse({"kepler-collect", "--shm-name", "x", "--interval", "soon"}, code));
    EXPECT_EQ(code, 2);
    EXPECT_FALSE(parse({"kepler-collect", "--shm-name", "x", "--source", "magic"}, code));
    EXPECT_NE(code, 0);
    EXPECT_FALSE(parse({"kepler-collect"}, code)) << "--shm-name is required";
    EXPECT_NE(code, 0);
}

}  // namespace
}  // namespace kepler::collect
