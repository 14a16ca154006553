// Fault: another user planted something at /dev/shm/<name> before the collector (on a bare-metal host
// /dev/shm is shared by every user). Readers (the estimator, the probe) must explain and keep waiting,
// the collector must refuse without touching it, nobody may crash or hang; once the name is free again
// everything recovers by itself.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <functional>

#include <gtest/gtest.h>

#include "support/frames.hpp"
#include "support/metrics.hpp"
#include "support/process.hpp"

namespace {

using namespace std::chrono_literals;
using e2e::Child;
namespace fs = std::filesystem;

constexpr uid_t kNobody = 65534;

std::string noise(size_t size, uint32_t seed) {
    std::string bytes(size, '\0');
    for (size_t i = 0; i < size; ++i) bytes[i] = static_cast<char>(((i + seed) * 2654435761u) >> 13);
    return bytes;
}

/// A real segment's header and schema, followed by noise: passes the magic and version checks.
std::string plausible_header_then_noise(size_t size) {
    const std::string donor = e2e::unique_name("donor");
    keplershm::WriterOptions o;
    o.slot_count = 2;
    o.process_capacity = 4;
    o.workload_capacity = 2;
    o.string_capacity = 256;
    keplershm::Writer writer(donor, o);
    std::string bytes = e2e::read_file("/dev/shm/" + donor).substr(0, 4096);
    keplershm_header h{};
    std::memcpy(&h, bytes.data(), sizeof h);
    h.slot_count = 0x7fffffff;  // sizes that do not fit the object
    h.slot_size = 1ull << 40;
    std::memcpy(bytes.data(), &h, sizeof h);
    return bytes + noise(size - bytes.size(), 7);
}

struct Plant {
    std::string what;
    std::function<void(const fs::path&)> make;
};

std::vector<Plant> plants() {
    auto file = [](std::string bytes, mode_t mode) {
        return [bytes = std::move(bytes), mode](const fs::path& p) {
            e2e::write_file(p, bytes);
            chmod(p.c_str(), mode);
        };
    };
    return {
        {"random bytes", file(noise(65536, 1), 0644)},
        {"a plausible header over noise", file(plausible_header_then_noise(65536), 0644)},
        {"an empty object", file("", 0644)},
        {"an owner-only object", file(noise(8192, 2), 0600)},
        {"a symlink to /etc/passwd", [](const fs::path& p) { fs::create_symlink("/etc/passwd", p); }},
        {"a directory", [](const fs::path& p) { fs::create_directory(p); }},
    };
}

/// Owner, mode and bytes, to show nothing touched it.
std::string fingerprint(const fs::path& p) {
    struct stat st {};
    lstat(p.c_str(), &st);
    const std::string content = S_ISREG(st.st_mode) ? e2e::read_file(p) : std::string();
    return std::to_string(st.st_uid) + ":" + std::to_string(st.st_mode) + ":" + std::to_string(std::hash<std::string>{}(content));
}

class HostileSegment : public ::testing::Test {
protected:
    void SetUp() override {
        if (geteuid() != 0) GTEST_SKIP() << "needs root to plant objects owned by another user";
    }
    void TearDown() override {
        std::error_code ignored;
        fs::remove_all(path_, ignored);
    }
    void plant(const Plant& p) {
        std::error_code ignored;
        fs::remove_all(path_, ignored);
        p.make(path_);
        lchown(path_.c_str(), kNobody, kNobody);
    }
    const std::string name_ = e2e::unique_name("hostile");
    const fs::path path_ = "/dev/shm/" + name_;
    e2e::TempDir tmp_;
};

TEST_F(HostileSegment, ProbeExplainsAndFails) {
#ifndef PROBE_BINARY
    GTEST_SKIP() << "keplershm-probe is not built (deploy/ not in KEPLERSHM_COMPONENTS)";
#else
    for (const Plant& p : plants()) {
        plant(p);
        const e2e::Result r = e2e::run({PROBE_BINARY, "--shm-name", name_}, 20s);
        EXPECT_FALSE(r.timed_out) << p.what;
        EXPECT_EQ(r.exit.code, 1) << p.what << ": " << r.exit.describe();
        EXPECT_NE(r.err.find("UNHEALTHY"), std::string::npos) << p.what << ": " << r.err;
    }
#endif
}

TEST_F(HostileSegment, EstimatorExplainsOnceAndKeepsWaitingAsRootAndAsItsOwnUser) {
    for (const Plant& p : plants()) {
        plant(p);
        for (const std::vector<std::string>& user : {std::vector<std::string>{},
                                                     std::vector<std::string>{"setpriv", "--reuid=65532", "--regid=65532",
                                                                              "--clear-groups", "--"}}) {
            std::vector<std::string> argv = user;
            argv.insert(argv.end(), {ESTIMATE_BINARY, "--shm-name", name_, "--listen", "none", "--duration", "1.5"});
            const e2e::Result r = e2e::run(argv, 30s);
            const std::string who = user.empty() ? "root" : "uid 65532";
            EXPECT_FALSE(r.timed_out) << p.what << " as " << who;
            EXPECT_EQ(r.exit.code, 0) << p.what << " as " << who << ": " << r.exit.describe() << "\n" << r.err;
            EXPECT_NE(r.err.find("waiting for segment '" + name_ + "' ("), std::string::npos)
                << p.what << " as " << who << ": says why it waits: " << r.err;
            size_t lines = 0;
            for (size_t at = 0; (at = r.err.find("waiting for segment", at)) != std::string::npos; ++at) ++lines;
            EXPECT_EQ(lines, 1u) << p.what << ": once, not once per retry";
        }
    }
}

TEST_F(HostileSegment, CollectorRefusesWithoutTouchingIt) {
    std::string unnamed;  // plants whose refusal does not say which object is in the way
    for (const Plant& p : plants()) {
        plant(p);
        const std::string before = fingerprint(path_);
        const e2e::Result r = e2e::run({COLLECT_BINARY, "--shm-name", name_, "--source", "procfs", "--kube", "off",
                                        "--interval", "100ms", "--frames", "2"}, 60s);
        EXPECT_FALSE(r.timed_out) << p.what;
        EXPECT_FALSE(r.exit.crashed()) << p.what << ": " << r.exit.describe();
        EXPECT_EQ(r.exit.code, 1) << p.what << ": refuses a name it cannot prove to be a dead collector's\n" << r.err;
        EXPECT_NE(r.err.find("error:"), std::string::npos) << p.what << ": " << r.err;
        if (r.err.find(name_) == std::string::npos) unnamed += "\n  " + p.what + ": " + r.err.substr(r.err.rfind("error:"));
        EXPECT_EQ(fingerprint(path_), before) << p.what << ": left exactly as found";
        for (const auto& entry : fs::directory_iterator("/dev/shm")) {
            EXPECT_EQ(entry.path().filename().string().find(name_ + "."), std::string::npos) << "no temporary left";
        }
    }
    EXPECT_TRUE(unnamed.empty()) << "every refusal names /dev/shm/<name> and says to remove it:" << unnamed;
}

TEST_F(HostileSegment, EverythingRecoversOnceTheNameIsFree) {
    plant(plants().front());
    Child estimator({ESTIMATE_BINARY, "--shm-name", name_, "--listen", e2e::kAnyLocalPort}, tmp_ / "estimate.log");
    const int port = e2e::metrics_port(estimator);
    ASSERT_GT(port, 0) << estimator.log();
    ASSERT_TRUE(e2e::wait_until([&] { return estimator.log().find("waiting for segment") != std::string::npos; }, 30s));
    fs::remove(path_);
    Child collector({COLLECT_BINARY, "--shm-name", name_, "--source", "procfs", "--kube", "off", "--interval", "100ms"},
                    tmp_ / "collect.log");
    EXPECT_TRUE(e2e::wait_until([&] {
        const auto s = e2e::scrape(port, 1);
        return s && e2e::value_of(*s, "kepler_estimator_frames_read_total") >= 3;
    }, 30s, 100ms)) << estimator.log() << collector.log();
    EXPECT_EQ(collector.stop().code, 0) << collector.log();
    EXPECT_EQ(estimator.stop().code, 0) << estimator.log();
}

TEST_F(HostileSegment, ScribbledFramesAreRejectedAndGoodOnesStillRead) {
    // A live writer's segment whose frames another process scribbles over (only possible for a user who
    // can write it): the estimator rejects those frames, keeps running, and reads the next good ones.
    keplershm::WriterOptions o;
    o.slot_count = 4;
    o.process_capacity = 8;
    o.workload_capacity = 2;
    o.string_capacity = 256;
    o.cpu_count = 2;
    o.metric_mask = KEPLERSHM_METRIC_CPU_TIME | KEPLERSHM_METRIC_NODE_CPU;
    o.heartbeat_period = 100ms;
    keplershm::Writer writer(name_, o);
    uint64_t clock = 1'000'000'000'000ull;
    auto publish = [&](bool scribble) {
        keplershm::Draft d = writer.begin();
        d.frame().interval_start_ns = clock;
        d.frame().interval_end_ns = clock += 100'000'000;
        d.frame().source = KEPLERSHM_SOURCE_SYNTHETIC;
        keplershm_process p{};
        p.pid = p.tgid = 42;
        p.start_time_ticks = 1;
        p.cpu_time_ns = 50'000'000;
        p.workload_index = KEPLERSHM_NO_WORKLOAD;
        d.add_process(p);
        writer.commit(d);
        if (!scribble) return;
        // The published frame's section directory now points far outside the frame.
        const int fd = open(path_.c_str(), O_RDWR);
        const size_t size = static_cast<size_t>(fs::file_size(path_));
        auto* base = static_cast<uint8_t*>(mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
        close(fd);
        const keplershm_header& h = writer.header();
        uint8_t* frame = base + h.slots_offset + (writer.latest_sequence() % h.slot_count) * h.slot_size + KEPLERSHM_SLOT_CONTROL_SIZE;
        auto* directory = reinterpret_cast<keplershm_section*>(frame + h.frame_header_size);
        for (int i = 0; i < 4; ++i) directory[i].offset = 0xfffffff0u;
        munmap(base, size);
    };
    // Scribbled before the estimator attaches: a reader woken by the commit could otherwise read the
    // frame whole in the instant before the scribble. The estimator starts at the newest frame (3).
    for (int i = 0; i < 3; ++i) publish(true);
    Child estimator({ESTIMATE_BINARY, "--shm-name", name_, "--listen", e2e::kAnyLocalPort}, tmp_ / "estimate.log");
    const int port = e2e::metrics_port(estimator);
    ASSERT_GT(port, 0) << estimator.log();
    ASSERT_TRUE(e2e::wait_until([&] { return estimator.log().find("reading segment") != std::string::npos; }, 30s))
        << estimator.log();
    ASSERT_TRUE(e2e::wait_until([&] { return estimator.log().find("section 6") != std::string::npos; }, 30s))
        << estimator.log();
    for (int i = 0; i < 20; ++i) {
        publish(false);
        std::this_thread::sleep_for(50ms);
    }
    const auto s = e2e::scrape(port);
    ASSERT_TRUE(s) << estimator.log();
    EXPECT_TRUE(estimator.running()) << estimator.log();
    EXPECT_GE(e2e::value_of(*s, "kepler_estimator_frames_read_total"), 10) << estimator.log();
    EXPECT_NE(estimator.log().find("frame 3: section 6 (offset 4294967280"), std::string::npos)
        << "says which frame it rejected and why: " << estimator.log();
    EXPECT_GE(e2e::value_of(*s, "kepler_estimator_frames_rejected_total"), 1) << estimator.log();
    EXPECT_EQ(estimator.stop().code, 0);
}

TEST_F(HostileSegment, FifoUnderTheNameHangsNobody) {
    ASSERT_EQ(mkfifo(path_.c_str(), 0644), 0);
    lchown(path_.c_str(), kNobody, kNobody);
    const e2e::Result estimator = e2e::run({ESTIMATE_BINARY, "--shm-name", name_, "--listen", "none", "--duration", "1"}, 5s);
    // The collector may retry a name in use for a few seconds (as for a crashed predecessor) before giving up.
    const e2e::Result collector = e2e::run({COLLECT_BINARY, "--shm-name", name_, "--source", "procfs", "--kube", "off",
                                            "--frames", "1"}, 20s);
    std::string hung;
    for (const auto& [who, r] : {std::pair{"kepler-estimate", &estimator}, std::pair{"kepler-collect", &collector}}) {
        if (r->timed_out) {
            hung += std::string(" ") + who;
            continue;
        }
        EXPECT_FALSE(r->exit.crashed()) << who << ": " << r->exit.describe();
    }
    EXPECT_EQ(collector.timed_out ? 1 : collector.exit.code, 1) << "the collector refuses a FIFO: " << collector.err;
    EXPECT_TRUE(collector.timed_out || collector.err.find("/dev/shm/" + name_) != std::string::npos) << collector.err;
    EXPECT_TRUE(estimator.timed_out || estimator.err.find("not a regular") != std::string::npos) << estimator.err;
    EXPECT_TRUE(hung.empty()) << "a FIFO at the name blocks nobody; blocked:" << hung;
}

}  // namespace
