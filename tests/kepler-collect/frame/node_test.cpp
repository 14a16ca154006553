// Node facts: /proc/cpuinfo parsing.
#include <gtest/gtest.h>

#include "frame/node_info.hpp"

namespace kepler::collect {
namespace {

TEST(CpuInfo, ModelNameAndArmFallback) {
    EXPECT_EQ(cpu_model_from_cpuinfo("processor\t: 0\nmodel name\t: Intel(R) Xeon(R) Gold 6248R CPU @ 3.00GHz\n"),
              "Intel(R) Xeon(R) Gold 6248R CPU @ 3.00GHz");
    EXPECT_EQ(cpu_model_from_cpuinfo("processor\t: 0\nCPU implementer\t: 0x41\nCPU part\t: 0xd0c\n"),
              "implementer 0x41 part 0xd0c");
    EXPECT_EQ(cpu_model_from_cpuinfo(""), "unknown");
}

}  // namespace
}  // namespace kepler::collect
