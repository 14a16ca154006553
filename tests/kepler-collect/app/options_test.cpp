// The command line: durations, sizes, flags and usage errors.
#include <gtest/gtest.h>

#include "kepler_collect/collector.hpp"
#include "test_support.hpp"

namespace kepler::collect {
namespace {

std::optional<CollectorOptions> parse(std::vector<std::string> args, int& code) {
    args.insert(args.begin(), {"kepler-collect", "--shm-name", "x"});
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    return parse_command_line(static_cast<int>(argv.size()), argv.data(), code);
}

// The grammar itself is support/cli's (tests/support/cli): here, that each option takes it and keeps its range.
TEST(CommandLine, DurationsAndSizesTakeUnitsAndKeepTheirRanges) {
    int code = -1;
    auto o = parse({"--interval", "2.5s", "--metadata-refresh", "1h", "--max-segment-bytes", "1G", "--redfish-poll",
                    "500ms", "--redfish-timeout", "0.3", "--redfish-max-age", "1m"},
                   code);
    ASSERT_TRUE(o);
    EXPECT_EQ(o->interval, std::chrono::milliseconds(2500));
    EXPECT_EQ(o->metadata_refresh, std::chrono::hours(1));
    EXPECT_EQ(o->max_segment_bytes, 1ull << 30);
    EXPECT_EQ(o->redfish_poll, std::chrono::milliseconds(500));
    EXPECT_EQ(o->redfish_timeout, std::chrono::milliseconds(300)) << "rounded, not truncated to 299";
    EXPECT_EQ(o->redfish_max_age, std::chrono::minutes(1));
    o = parse({"--interval", "2"}, code);
    ASSERT_TRUE(o);
    EXPECT_EQ(o->interval, std::chrono::seconds(2)) << "a bare number is seconds";
    for (const std::vector<std::string>& bad :
         {std::vector<std::string>{"--interval", "5ms"}, {"--interval", "0s"}, {"--interval", "-1s"}, {"--interval", "2d"},
          {"--interval", "fast"}, {"--redfish-poll", "50ms"}, {"--max-segment-bytes", "lots"},
          {"--max-segment-bytes", "1K"}, {"--max-segment-bytes", "99999999999999999999Gi"},
          {"--redfish-poll", "10s", "--redfish-max-age", "5s"}}) {
        code = -1;
        EXPECT_FALSE(parse(bad, code)) << bad[0] << " " << bad[1];
        EXPECT_EQ(code, 2) << bad[0] << " " << bad[1] << ": bad usage exits 2";
    }
}

TEST(CommandLine, FlagsAndUsageErrors) {
    int code = -1;
    const auto o = parse({"--interval", "250ms", "--source", "procfs", "--no-hardware-counters", "--max-segment-bytes",
                          "64Mi", "--bpf-attach", "raw_tp"}, code);
    ASSERT_TRUE(o);
    EXPECT_EQ(code, 0);
    EXPECT_EQ(o->interval, std::chrono::milliseconds(250));
    EXPECT_EQ(o->source, "procfs");
    EXPECT_FALSE(o->hardware_counters);
    EXPECT_EQ(o->max_segment_bytes, 64ull << 20);
    EXPECT_EQ(o->bpf_attach, "raw_tp");
    EXPECT_FALSE(parse({"--interval", "soon"}, code));
    EXPECT_EQ(code, 2);
    EXPECT_FALSE(parse({"--source", "magic"}, code));
    EXPECT_EQ(code, 2);
    std::string name = "kepler-collect";
    char* bare[] = {name.data()};
    EXPECT_FALSE(parse_command_line(1, bare, code)) << "--shm-name is required";
    EXPECT_EQ(code, 2);
}

}  // namespace
}  // namespace kepler::collect
