// Node energy on fake sysfs trees: several packages and subzones, wraps, missing ranges, unreadable
// counters, mirrored zones, hwmon meters, and no meter at all.
#include <filesystem>
#include <map>

#include <gtest/gtest.h>

#include "energy/energy.hpp"
#include "keplershm/keplershm.hpp"
#include "test_support.hpp"

namespace kepler::collect {
namespace {

using testing::TempDir;

void rapl_zone(const TempDir& sys, const std::string& dir, const std::string& name, uint64_t energy,
               std::optional<uint64_t> max_range = 262143328850ull) {
    const std::string base = "class/powercap/" + dir + "/";
    sys.write(base + "name", name + "\n");
    sys.write(base + "energy_uj", std::to_string(energy) + "\n");
    if (max_range) sys.write(base + "max_energy_range_uj", std::to_string(*max_range) + "\n");
}

void set_energy(const TempDir& sys, const std::string& dir, uint64_t energy) {
    sys.write("class/powercap/" + dir + "/energy_uj", std::to_string(energy) + "\n");
}

std::map<std::string, keplershm_zone_info> by_name(const EnergyMeter& meter) {
    std::map<std::string, keplershm_zone_info> zones;
    for (const auto& z : meter.zone_infos()) zones[std::string(keplershm::get_text(z.name))] = z;
    return zones;
}

TEST(EnergyStep, PlainWrapAndUnknownRange) {
    EXPECT_EQ(energy_step(100, 250, 1000).delta_uj, 150u);
    const EnergyStep wrap = energy_step(900, 50, 1000);
    EXPECT_TRUE(wrap.valid);
    EXPECT_TRUE(wrap.wrapped);
    EXPECT_EQ(wrap.delta_uj, 150u);  // 900 → 1000, then 0 → 50
    const EnergyStep unknown = energy_step(900, 50, 0);
    EXPECT_FALSE(unknown.valid);
    EXPECT_EQ(unknown.delta_uj, 0u) << "never invent energy (Kepler 0.7 reused the previous delta)";
    EXPECT_FALSE(energy_step(5000, 50, 1000).valid) << "a previous value above the range is not a wrap";
}

TEST(Rapl, SeveralPackagesWithSubzonesAndPsys) {
    TempDir sys;
    rapl_zone(sys, "intel-rapl:0", "package-0", 1000);
    rapl_zone(sys, "intel-rapl:0:0", "core", 100);
    rapl_zone(sys, "intel-rapl:0:1", "uncore", 200);
    rapl_zone(sys, "intel-rapl:0:2", "dram", 300);
    rapl_zone(sys, "intel-rapl:1", "package-1", 2000);
    rapl_zone(sys, "intel-rapl:1:0", "core", 400);
    rapl_zone(sys, "intel-rapl:1:1", "dram", 500);
    rapl_zone(sys, "intel-rapl:2", "psys", 9000);
    sys.write("class/powercap/intel-rapl/enabled", "1\n");  // the control type directory is not a zone

    EnergyMeter meter = EnergyMeter::discover(sys.path());
    EXPECT_TRUE(meter.problems().empty());
    EXPECT_EQ(meter.power_source(), static_cast<uint32_t>(KEPLERSHM_POWER_RAPL));
    const auto zones = by_name(meter);
    ASSERT_EQ(zones.size(), 8u);
    EXPECT_EQ(zones.at("package-0").kind, static_cast<uint32_t>(KEPLERSHM_ZONE_PACKAGE));
    EXPECT_EQ(zones.at("package-1").socket, 1u);
    EXPECT_EQ(zones.at("core-1").kind, static_cast<uint32_t>(KEPLERSHM_ZONE_CORE));
    EXPECT_EQ(zones.at("core-1").socket, 1u);
    EXPECT_EQ(zones.at("uncore-0").kind, static_cast<uint32_t>(KEPLERSHM_ZONE_UNCORE));
    EXPECT_EQ(zones.at("dram-0").kind, static_cast<uint32_t>(KEPLERSHM_ZONE_DRAM));
    EXPECT_EQ(zones.at("dram-1").socket, 1u);
    EXPECT_EQ(zones.at("psys").kind, static_cast<uint32_t>(KEPLERSHM_ZONE_PSYS));
    EXPECT_EQ(zones.at("package-0").max_energy_range_uj, 262143328850ull);
    EXPECT_EQ(zones.at("package-0").power_source, static_cast<uint32_t>(KEPLERSHM_POWER_RAPL));

    set_energy(sys, "intel-rapl:0", 1500);
    set_energy(sys, "intel-rapl:1:1", 800);
    const auto infos = meter.zone_infos();
    const auto samples = meter.read();
    ASSERT_EQ(samples.size(), infos.size());
    for (size_t i = 0; i < samples.size(); ++i) {
        const std::string name(keplershm::get_text(infos[i].name));
        EXPECT_EQ(samples[i].zone_index, i);
        EXPECT_TRUE(samples[i].flags & KEPLERSHM_ZONE_VALID) << name;
        EXPECT_GT(samples[i].read_time_ns, 0u);
        const uint64_t expected = name == "package-0" ? 500 : name == "dram-1" ? 300 : 0;
        EXPECT_EQ(samples[i].energy_delta_uj, expected) << name;
        EXPECT_EQ(samples[i].energy_total_uj, expected) << name;
    }
}

TEST(Rapl, WrapInTheMiddleOfAnIntervalIsCorrected) {
    TempDir sys;
    rapl_zone(sys, "intel-rapl:0", "package-0", 999'000, 1'000'000);
    EnergyMeter meter = EnergyMeter::discover(sys.path());
    set_energy(sys, "intel-rapl:0", 999'800);
    EXPECT_EQ(meter.read()[0].energy_delta_uj, 800u);
    set_energy(sys, "intel-rapl:0", 700);  // ran to the top of the range and on from zero
    const auto wrapped = meter.read()[0];
    EXPECT_EQ(wrapped.flags, static_cast<uint32_t>(KEPLERSHM_ZONE_VALID | KEPLERSHM_ZONE_WRAPPED));
    EXPECT_EQ(wrapped.energy_delta_uj, 200u + 700u);
    EXPECT_EQ(wrapped.energy_total_uj, 800u + 900u) << "64-bit total keeps counting across the wrap";
    set_energy(sys, "intel-rapl:0", 1700);
    const auto after = meter.read()[0];
    EXPECT_EQ(after.flags, static_cast<uint32_t>(KEPLERSHM_ZONE_VALID));
    EXPECT_EQ(after.energy_total_uj, 2700u);
}

// A counter that jumps further than its zone could draw in the time between two reads (a firmware
// reset reported as a huge value, a forged sysfs tree): the interval is invalid, the total does not
// move, and counting goes on from the new value.
TEST(Rapl, ACounterJumpAboveTheZonesCeilingIsNoEnergy) {
    TempDir sys;
    rapl_zone(sys, "intel-rapl:0", "package-0", 5000, 1ull << 62);
    EnergyMeter meter = EnergyMeter::discover(sys.path());
    set_energy(sys, "intel-rapl:0", 6000);
    EXPECT_EQ(meter.read()[0].energy_delta_uj, 1000u);
    set_energy(sys, "intel-rapl:0", 6000 + 1'000'000'000'000'000ull);  // 1 TJ
    const auto jumped = meter.read()[0];
    EXPECT_FALSE(jumped.flags & KEPLERSHM_ZONE_VALID);
    EXPECT_EQ(jumped.energy_delta_uj, 0u);
    EXPECT_EQ(jumped.energy_total_uj, 1000u);
    set_energy(sys, "intel-rapl:0", 7000 + 1'000'000'000'000'000ull);
    const auto next = meter.read()[0];
    EXPECT_TRUE(next.flags & KEPLERSHM_ZONE_VALID) << "counting goes on from the new value";
    EXPECT_EQ(next.energy_delta_uj, 1000u);
    EXPECT_EQ(next.energy_total_uj, 2000u);
}

TEST(Rapl, MissingMaxEnergyRangeMarksAWrapIntervalInvalid) {
    TempDir sys;
    rapl_zone(sys, "intel-rapl:0", "package-0", 5000, std::nullopt);
    EnergyMeter meter = EnergyMeter::discover(sys.path());
    EXPECT_EQ(meter.zone_infos()[0].max_energy_range_uj, 0u);
    ASSERT_FALSE(meter.notes().empty());
    EXPECT_NE(meter.notes()[0].find("max_energy_range_uj"), std::string::npos) << meter.notes()[0];
    set_energy(sys, "intel-rapl:0", 6000);
    EXPECT_EQ(meter.read()[0].energy_delta_uj, 1000u);
    set_energy(sys, "intel-rapl:0", 10);
    const auto wrapped = meter.read()[0];
    EXPECT_FALSE(wrapped.flags & KEPLERSHM_ZONE_VALID) << "wrap with unknown range: delta unknown";
    EXPECT_EQ(wrapped.energy_delta_uj, 0u);
    EXPECT_EQ(wrapped.energy_total_uj, 1000u);
    set_energy(sys, "intel-rapl:0", 110);
    const auto next = meter.read()[0];
    EXPECT_TRUE(next.flags & KEPLERSHM_ZONE_VALID);
    EXPECT_EQ(next.energy_delta_uj, 100u);
}

TEST(Rapl, UnreadableEnergyIsAClearErrorAndTheZoneIsLeftOut) {
    TempDir sys;
    rapl_zone(sys, "intel-rapl:0", "package-0", 1000);
    rapl_zone(sys, "intel-rapl:1", "package-1", 1000);
    std::filesystem::remove(sys.path() / "class/powercap/intel-rapl:1/energy_uj");
    std::filesystem::create_directory(sys.path() / "class/powercap/intel-rapl:1/energy_uj");  // read() fails: EISDIR
    rapl_zone(sys, "intel-rapl:1:0", "dram", 1000);  // its parent is unusable: left out with it
    rapl_zone(sys, "intel-rapl:2", "package-2", 0);
    sys.write("class/powercap/intel-rapl:2/energy_uj", "garbage\n");

    EnergyMeter meter = EnergyMeter::discover(sys.path());
    const auto zones = by_name(meter);
    EXPECT_EQ(zones.size(), 1u);
    EXPECT_TRUE(zones.contains("package-0"));
    ASSERT_EQ(meter.problems().size(), 2u);
    EXPECT_NE(meter.problems()[0].find("intel-rapl:1/energy_uj"), std::string::npos) << meter.problems()[0];
    EXPECT_NE(meter.problems()[0].find("Is a directory"), std::string::npos) << meter.problems()[0];
    EXPECT_NE(meter.problems()[1].find("does not hold a number"), std::string::npos) << meter.problems()[1];
}

TEST(Rapl, CounterThatBecomesUnreadableGivesInvalidSamplesThenRecovers) {
    TempDir sys;
    rapl_zone(sys, "intel-rapl:0", "package-0", 1000);
    EnergyMeter meter = EnergyMeter::discover(sys.path());
    const auto energy = sys.path() / "class/powercap/intel-rapl:0/energy_uj";
    std::filesystem::remove(energy);
    std::filesystem::create_directory(energy);
    const auto failed = meter.read()[0];
    EXPECT_FALSE(failed.flags & KEPLERSHM_ZONE_VALID);
    EXPECT_GT(failed.read_time_ns, 0u);
    std::filesystem::remove(energy);
    set_energy(sys, "intel-rapl:0", 5000);
    EXPECT_FALSE(meter.read()[0].flags & KEPLERSHM_ZONE_VALID) << "first reading after a gap is a new baseline";
    set_energy(sys, "intel-rapl:0", 5400);
    const auto ok = meter.read()[0];
    EXPECT_TRUE(ok.flags & KEPLERSHM_ZONE_VALID);
    EXPECT_EQ(ok.energy_delta_uj, 400u);
}

TEST(Rapl, MirroredDieZonesAreCountedOnce) {
    TempDir sys;
    // Multi-die AMD: every die of package 0 shows the same socket-wide counter.
    rapl_zone(sys, "intel-rapl:0", "package-0-die-0", 123'456'789);
    rapl_zone(sys, "intel-rapl:1", "package-0-die-1", 123'456'789);
    rapl_zone(sys, "intel-rapl:2", "package-1-die-0", 555);
    rapl_zone(sys, "intel-rapl:3", "package-1-die-1", 999'999);  // a real second die counts on its own
    // The MMIO interface repeats package-1-die-0's domain under the same name.
    rapl_zone(sys, "intel-rapl-mmio:0", "package-1-die-0", 555);
    EnergyMeter meter = EnergyMeter::discover(sys.path());
    const auto zones = by_name(meter);
    EXPECT_EQ(zones.size(), 3u);
    EXPECT_TRUE(zones.contains("package-0-die-0"));
    EXPECT_FALSE(zones.contains("package-0-die-1"));
    EXPECT_TRUE(zones.contains("package-1-die-0"));
    EXPECT_TRUE(zones.contains("package-1-die-1"));
    EXPECT_EQ(zones.at("package-1-die-1").socket, 1u);
    EXPECT_EQ(meter.notes().size(), 2u);
}

TEST(Hwmon, AcpiPowerMeterIsIntegratedAndEnergyInputsCount) {
    TempDir sys;
    sys.write("class/hwmon/hwmon0/name", "power_meter\n");
    sys.write("class/hwmon/hwmon0/power1_average", "150000000\n");  // 150 W in µW
    sys.write("class/hwmon/hwmon1/name", "acpitz\n");                // a thermal sensor: no zone
    sys.write("class/hwmon/hwmon1/temp1_input", "40000\n");
    sys.write("class/hwmon/hwmon2/name", "bmc\n");
    sys.write("class/hwmon/hwmon2/energy1_input", "1000\n");
    sys.write("class/hwmon/hwmon2/energy1_label", "platform\n");

    EnergyMeter meter = EnergyMeter::discover(sys.path());
    const auto zones = by_name(meter);
    ASSERT_EQ(zones.size(), 2u);
    EXPECT_EQ(zones.at("power_meter-power1").kind, static_cast<uint32_t>(KEPLERSHM_ZONE_PLATFORM));
    EXPECT_EQ(zones.at("power_meter-power1").power_source, static_cast<uint32_t>(KEPLERSHM_POWER_ACPI));
    EXPECT_EQ(zones.at("bmc-platform").power_source, static_cast<uint32_t>(KEPLERSHM_POWER_HWMON));
    EXPECT_EQ(meter.power_source(), static_cast<uint32_t>(KEPLERSHM_POWER_ACPI));

    testing::sleep_ms(200);
    sys.write("class/hwmon/hwmon2/energy1_input", "4000\n");
    const auto infos = meter.zone_infos();
    for (const auto& s : meter.read()) {
        const std::string name(keplershm::get_text(infos[s.zone_index].name));
        EXPECT_TRUE(s.flags & KEPLERSHM_ZONE_VALID) << name;
        if (name == "bmc-platform") {
            EXPECT_EQ(s.energy_delta_uj, 3000u);
        } else {
            // 150 W for ≥ 0.2 s (the generous upper bound is the time the test may take, not a feature).
            EXPECT_GE(s.energy_delta_uj, 30'000'000u);
            EXPECT_LE(s.energy_delta_uj, 150'000'000u * 10);
        }
    }
}

TEST(Hwmon, PowerSupplyInputIsAPlatformZoneAndItsOutputsAreNot) {
    TempDir sys;
    // A PMBus power supply as the kernel's pmbus core shows it: input "pin", outputs "pout1", "pout2".
    sys.write("class/hwmon/hwmon3/name", "pmbus\n");
    sys.write("class/hwmon/hwmon3/power1_input", "420000000\n");
    sys.write("class/hwmon/hwmon3/power1_label", "pin\n");
    sys.write("class/hwmon/hwmon3/power2_input", "390000000\n");
    sys.write("class/hwmon/hwmon3/power2_label", "pout1\n");
    sys.write("class/hwmon/hwmon3/power3_input", "5000000\n");
    sys.write("class/hwmon/hwmon3/power3_label", "pout2\n");
    sys.write("class/hwmon/hwmon4/name", "power_meter\n");
    sys.write("class/hwmon/hwmon4/power1_average", "150000000\n");
    sys.write("class/hwmon/hwmon4/power1_average_interval", "1000\n");

    EnergyMeter meter = EnergyMeter::discover(sys.path());
    const auto zones = by_name(meter);
    ASSERT_EQ(zones.size(), 2u) << "one zone for the supply (its input), one for the ACPI meter";
    const keplershm_zone_info& psu = zones.at("pmbus-pin");
    EXPECT_EQ(psu.kind, static_cast<uint32_t>(KEPLERSHM_ZONE_PLATFORM));
    EXPECT_EQ(psu.power_source, static_cast<uint32_t>(KEPLERSHM_POWER_PMBUS));
    EXPECT_EQ(psu.meter_detail, static_cast<uint32_t>(KEPLERSHM_METER_POWER_SUPPLY));
    EXPECT_EQ(zones.at("power_meter-power1").meter_detail, static_cast<uint32_t>(KEPLERSHM_METER_POWER_METER));
    size_t output_notes = 0, interval_notes = 0;
    for (const std::string& n : meter.notes()) {
        output_notes += n.find("a power supply's output") != std::string::npos;
        interval_notes += n.find("averages over 1000 ms") != std::string::npos;
    }
    EXPECT_EQ(output_notes, 2u);
    EXPECT_EQ(interval_notes, 1u);
    testing::sleep_ms(100);
    for (const auto& s : meter.read()) {
        EXPECT_EQ(s.flags, static_cast<uint32_t>(KEPLERSHM_ZONE_VALID | KEPLERSHM_ZONE_INTEGRATED)) << "power integrated";
    }
}

TEST(Energy, NoMeterMeansNoZonesAndPowerSourceNone) {
    TempDir sys;
    EnergyMeter meter = EnergyMeter::discover(sys.path());
    EXPECT_TRUE(meter.empty());
    EXPECT_TRUE(meter.zone_infos().empty());
    EXPECT_EQ(meter.power_source(), static_cast<uint32_t>(KEPLERSHM_POWER_NONE));
    EXPECT_TRUE(meter.read().empty());
}

}  // namespace
}  // namespace kepler::collect
