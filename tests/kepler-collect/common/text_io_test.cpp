// Bounded reads of kernel text and strict number parsing.
#include <cerrno>

#include <gtest/gtest.h>

#include "common/text_io.hpp"
#include "test_support.hpp"

namespace kepler::collect {
namespace {

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

}  // namespace
}  // namespace kepler::collect
