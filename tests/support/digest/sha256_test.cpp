#include "support/digest/sha256.hpp"

#include <gtest/gtest.h>

namespace kepler::support {
namespace {

constexpr const char* kAbc = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";  // FIPS 180-2, "abc"

TEST(Sha256, MatchesThePublishedTestVectors) {
    EXPECT_EQ(sha256_hex("abc"), kAbc);
    EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

TEST(Sha256, ADigestIsComparedInEitherCaseAndOnlyWhenWellFormed) {
    EXPECT_TRUE(sha256_matches("abc", kAbc));
    EXPECT_TRUE(sha256_matches("abc", "BA7816BF8F01CFEA414140DE5DAE2223B00361A396177A9CB410FF61F20015AD"));
    EXPECT_FALSE(sha256_matches("abd", kAbc));
    EXPECT_FALSE(sha256_matches("abc", std::string(kAbc).substr(0, 63))) << "a prefix is not a digest";
    EXPECT_FALSE(sha256_matches("abc", "")) << "nothing pinned matches nothing";
    EXPECT_FALSE(is_sha256_hex(std::string(64, 'g')));
    EXPECT_TRUE(is_sha256_hex(kAbc));
}

}  // namespace
}  // namespace kepler::support
