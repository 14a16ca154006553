// Fault: missing, unreadable and broken sysfs energy files (fake --sysfs-root trees). The collector must
// say which zone is broken and why, publish the good zones only (or none), mark a zone invalid while its
// file is broken at run time, and never let a zone's cumulative energy go backwards.
#include <sys/stat.h>
#include <unistd.h>

#include <map>

#include <gtest/gtest.h>

#include "support/frames.hpp"
#include "support/process.hpp"

namespace {

using namespace std::chrono_literals;
using e2e::Child;
namespace fs = std::filesystem;

constexpr const char* kRange = "262143328850";

/// One powercap zone directory under root/class/powercap; a null value leaves that file out.
void zone(const fs::path& root, const std::string& dir, const char* name, const char* energy, const char* range = kRange) {
    const fs::path d = root / "class" / "powercap" / dir;
    fs::create_directories(d);
    if (name != nullptr) e2e::write_file(d / "name", std::string(name) + "\n");
    if (energy != nullptr) e2e::write_file(d / "energy_uj", std::string(energy) + "\n");
    if (range != nullptr) e2e::write_file(d / "max_energy_range_uj", std::string(range) + "\n");
}

/// Replaces a file's content in one step, as sysfs attributes read: never empty or half written.
void replace_atomically(const fs::path& path, const std::string& text) {
    e2e::write_file(path.string() + ".new", text);
    fs::rename(path.string() + ".new", path);
}

std::vector<std::string> collector(const std::string& name, const fs::path& sysfs, std::vector<std::string> extra = {}) {
    std::vector<std::string> argv{COLLECT_BINARY, "--shm-name", name, "--source", "procfs", "--kube", "off",
                                  "--interval", "200ms", "--sysfs-root", sysfs.string(), "--slots", "32"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return argv;
}

std::vector<std::string> zone_names(const keplershm_header& h) {
    std::vector<std::string> names;
    for (uint32_t i = 0; i < h.zone_count && i < KEPLERSHM_MAX_ZONES; ++i) names.emplace_back(keplershm::get_text(h.zones[i].name));
    return names;
}

TEST(Sysfs, BrokenZonesAreNamedAndLeftOutTheRestIsPublished) {
    e2e::TempDir tmp;
    const fs::path sysfs = tmp / "sys";
    zone(sysfs, "intel-rapl:0", "package-0", "1000000");
    zone(sysfs, "intel-rapl:0:0", "core", nullptr);        // energy_uj missing
    zone(sysfs, "intel-rapl:0:1", "dram", "not a number");  // garbage
    zone(sysfs, "intel-rapl:1", nullptr, "5000");           // name missing
    zone(sysfs, "intel-rapl:2", "", "5000");                // empty name
    zone(sysfs, "intel-rapl:3", "package-3", nullptr);
    fs::create_directories(sysfs / "class/powercap/intel-rapl:3/energy_uj");  // a directory, not a file
    zone(sysfs, "intel-rapl:4", "psys", "7000", "-1");      // unusable range: wraps cannot be corrected
    zone(sysfs, "intel-rapl:5", "package-5", "18446744073709551616");  // beyond 64 bits
    fs::create_directories(sysfs / "class/hwmon/hwmon0");
    e2e::write_file(sysfs / "class/hwmon/hwmon0/name", "power_meter\n");
    e2e::write_file(sysfs / "class/hwmon/hwmon0/power1_average", "lots\n");

    const std::string name = e2e::unique_name("sysfs-broken");
    Child c(collector(name, sysfs), tmp / "collect.log");
    auto reader = e2e::open_when_present(name, 30s);
    ASSERT_TRUE(reader) << c.log();
    std::vector<e2e::FrameSummary> frames;
    e2e::read_frames(*reader, frames, [&] { return frames.size() >= 4; }, 30s);
    const std::vector<std::string> published = zone_names(*reader->info().header);
    EXPECT_EQ(c.stop().code, 0) << c.log();

    EXPECT_EQ(published, (std::vector<std::string>{"package-0", "psys"})) << c.log();
    const std::string log = c.log();
    for (const char* expected : {"intel-rapl:0:0 (core)", "intel-rapl:0:1 (dram)", "does not hold a number",
                                 "intel-rapl:1", "intel-rapl:2", "intel-rapl:3 (package-3)", "intel-rapl:5 (package-5)",
                                 "no usable max_energy_range_uj", "hwmon0/power1_average (power_meter)"}) {
        EXPECT_NE(log.find(expected), std::string::npos) << "the log names: " << expected << "\n" << log;
    }
    ASSERT_GE(frames.size(), 4u);
    for (const e2e::FrameSummary& f : frames) {
        ASSERT_EQ(f.zones.size(), 2u);
        for (const keplershm_zone_sample& z : f.zones) EXPECT_TRUE(z.flags & KEPLERSHM_ZONE_VALID) << "frame " << f.sequence;
    }
}

TEST(Sysfs, RootOnlyEnergyFilesReadAsAnotherUserAreExplained) {
    if (geteuid() != 0) GTEST_SKIP() << "needs root to create root-only files and run the collector as nobody";
    e2e::TempDir tmp;
    fs::permissions(tmp.path(), fs::perms::all);  // nobody may traverse to its tree and write its log
    const fs::path sysfs = tmp / "sys";
    zone(sysfs, "intel-rapl:0", "package-0", "1000000");
    chmod((sysfs / "class/powercap/intel-rapl:0/energy_uj").c_str(), 0400);  // as since CVE-2020-8694
    const std::string name = e2e::unique_name("sysfs-eacces");
    std::vector<std::string> argv{"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"};
    const auto c = collector(name, sysfs, {"--frames", "3"});
    argv.insert(argv.end(), c.begin(), c.end());
    const e2e::Result r = e2e::run(argv, 60s);
    EXPECT_EQ(r.exit.code, 0) << r.exit.describe() << "\n" << r.err;
    EXPECT_NE(r.err.find("Permission denied"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("CVE-2020-8694"), std::string::npos) << "says why and what to do: " << r.err;
    EXPECT_NE(r.err.find("no power meter"), std::string::npos) << "and that frames carry no measured power: " << r.err;
}

TEST(Sysfs, MissingSysfsRootMeansNoMeterNotAFailure) {
    const std::string name = e2e::unique_name("sysfs-none");
    const e2e::Result r = e2e::run(collector(name, "/nonexistent/sys", {"--frames", "2"}), 60s);
    EXPECT_EQ(r.exit.code, 0) << r.err;
    EXPECT_NE(r.err.find("no power meter under /nonexistent/sys"), std::string::npos) << r.err;
}

TEST(Sysfs, EnergyFileBreakingAtRunTimeMarksTheZoneInvalidAndTotalsNeverGoBack) {
    e2e::TempDir tmp;
    const fs::path sysfs = tmp / "sys";
    zone(sysfs, "intel-rapl:0", "package-0", "1000000");
    const fs::path energy = sysfs / "class/powercap/intel-rapl:0/energy_uj";
    const std::string name = e2e::unique_name("sysfs-runtime");
    Child c(collector(name, sysfs), tmp / "collect.log");
    auto reader = e2e::open_when_present(name, 30s);
    ASSERT_TRUE(reader) << c.log();

    std::vector<e2e::FrameSummary> frames;
    uint64_t counter = 1'000'000;
    // Each phase: what the file holds, and whether the zone must be valid for the frames read meanwhile.
    const std::vector<std::pair<std::string, bool>> phases = {
        {"advance", true}, {"delete", false}, {"garbage", false}, {"directory", false}, {"advance", true}};
    std::vector<std::pair<size_t, size_t>> spans;  // frames [first, last) of each phase, after one settling frame
    for (const auto& [action, valid] : phases) {
        if (action == "delete") fs::remove(energy);
        if (action == "garbage") replace_atomically(energy, "-\n");
        if (action == "directory") {
            fs::remove(energy);
            fs::create_directory(energy);
        }
        if (action == "advance" && fs::is_directory(energy)) fs::remove(energy);
        const size_t settle = frames.size() + 2;  // the frame under way may straddle the change
        const size_t until = frames.size() + 6;
        e2e::read_frames(*reader, frames, [&] {
            if (action == "advance") replace_atomically(energy, std::to_string(counter += 20'000) + "\n");
            return frames.size() >= until;
        }, 30s);
        spans.emplace_back(settle, frames.size());
    }
    EXPECT_TRUE(c.running()) << c.log();
    EXPECT_EQ(c.stop().code, 0) << c.log();

    for (size_t p = 0; p < phases.size(); ++p) {
        const auto [first, last] = spans[p];
        ASSERT_LT(first, last) << "phase " << p;
        int valid = 0;
        for (size_t i = first; i < last; ++i) valid += (frames[i].zones.at(0).flags & KEPLERSHM_ZONE_VALID) ? 1 : 0;
        if (phases[p].second) {
            EXPECT_GE(valid, static_cast<int>(last - first) - 1) << "phase " << p << " (" << phases[p].first << ")";
        } else {
            EXPECT_EQ(valid, 0) << "phase " << p << " (" << phases[p].first << "): a broken file is no reading";
        }
    }
    uint64_t previous = 0;
    for (const e2e::FrameSummary& f : frames) {
        EXPECT_GE(f.zones.at(0).energy_total_uj, previous) << "frame " << f.sequence;
        previous = f.zones.at(0).energy_total_uj;
    }
    EXPECT_GT(previous, 0u);
    const std::string log = c.log();
    EXPECT_NE(log.find("energy zone intel-rapl:0"), std::string::npos) << "the breakage is logged: " << log;
}

}  // namespace
