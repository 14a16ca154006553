// The command line: durations, sizes, flags and usage errors.
#include <gtest/gtest.h>

#include "kepler_collect/collector.hpp"
#include "test_support.hpp"

namespace kepler::collect {
namespace {

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
