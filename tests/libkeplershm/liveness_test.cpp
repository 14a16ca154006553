// Liveness from heartbeat progress (PROTOCOL.md §1.3): a writer is stale when its heartbeat stands still
// for the timeout on the reader's own clock, whatever clock the writer's values come from. "Foreign"
// writers here are built from PROTOCOL.md alone and beat by hand with CLOCK_MONOTONIC values of another
// time namespace or boot: far in the reader's past (a collector under unshare --monotonic=-N) or future.
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "image_builder.hpp"
#include "test_support.hpp"

namespace keplershm {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using test::ScopedName;

constexpr auto kTimeout = 300ms;      // the readers' heartbeat timeout in these tests
constexpr auto kBeatPeriod = 50ms;    // how often a live writer beats here
// A reader samples the heartbeat at least every timeout / 4 while it waits; a dead writer's last beat may
// fall up to one beat period before the moment the test stops it.
constexpr auto kEarliestVerdict = kTimeout - kBeatPeriod - kTimeout / 4;
constexpr uint64_t kSecond = 1'000'000'000ull;

uint64_t monotonic_now_ns() {
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<uint64_t>(ts.tv_sec) * kSecond + static_cast<uint64_t>(ts.tv_nsec);
}

ReaderOptions short_timeout() {
    ReaderOptions o;
    o.heartbeat_timeout = kTimeout;
    return o;
}

/// A writer whose CLOCK_MONOTONIC is `offset_ns` away from ours: publishes a one-frame image and, while
/// told to, beats every kBeatPeriod the way its ABI minor does (1.1: heartbeat_count and heartbeat_ns;
/// 1.0: heartbeat_ns only).
class ForeignWriter {
public:
    ForeignWriter(const std::string& name, int64_t offset_ns, uint16_t abi_minor = KEPLERSHM_ABI_MINOR,
                  uint64_t heartbeat_period_ns = kSecond)
        : offset_ns_(offset_ns), counts_(abi_minor >= 1) {
        test::ImageSpec spec;
        spec.abi_minor = abi_minor;
        spec.heartbeat_period_ns = heartbeat_period_ns;
        spec.heartbeat_ns = clock();
        spec.heartbeat_count = counts_ ? 1 : 0;
        test::write_segment_bytes(name, test::build_image(spec));
        const int fd = open(("/dev/shm/" + name).c_str(), O_RDWR | O_CLOEXEC);
        void* map = mmap(nullptr, sizeof(keplershm_header), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        close(fd);
        if (map == MAP_FAILED) throw std::runtime_error("cannot map " + name);
        header_ = static_cast<keplershm_header*>(map);
    }
    ~ForeignWriter() {
        stop_beating();
        munmap(header_, sizeof(keplershm_header));
    }
    ForeignWriter(const ForeignWriter&) = delete;
    ForeignWriter& operator=(const ForeignWriter&) = delete;

    void start_beating() {
        stop_ = false;
        beater_ = std::thread([this] {
            while (!stop_.load()) {
                beat();
                std::this_thread::sleep_for(kBeatPeriod);
            }
        });
    }
    void stop_beating() {
        stop_ = true;
        if (beater_.joinable()) beater_.join();
    }
    void set_state(uint32_t state) { std::atomic_ref<uint32_t>(header_->state).store(state); }

private:
    [[nodiscard]] uint64_t clock() const { return monotonic_now_ns() + static_cast<uint64_t>(offset_ns_); }
    void beat() {
        std::atomic_ref<uint64_t>(header_->heartbeat_ns).store(clock());
        if (counts_) std::atomic_ref<uint64_t>(header_->heartbeat_count).fetch_add(1);
    }

    int64_t offset_ns_;
    bool counts_;
    keplershm_header* header_ = nullptr;
    std::atomic<bool> stop_{true};
    std::thread beater_;
};

/// Waits (beyond the timeout) for the verdict on a writer that no longer beats; returns how long it took.
Clock::duration time_to_writer_gone(Reader& reader) {
    const auto start = Clock::now();
    EXPECT_EQ(reader.wait(reader.latest(), 5s), Status::writer_gone);
    return Clock::now() - start;
}

TEST(Liveness, AWriterThatStopsAdvancingIsStaleOneTimeoutLater) {
    ScopedName name("live");
    Writer writer(name, test::small_options());
    Reader reader = Reader::open(name, short_timeout());
    {
        test::BackgroundHeartbeat beating(writer, kBeatPeriod);
        EXPECT_EQ(reader.wait(0, 1s), Status::timeout) << "alive for three timeouts: no frame, but not gone";
        const keplershm_segment_info info = reader.info();
        EXPECT_EQ(info.writer_stale, 0u);
        EXPECT_EQ(info.heartbeat_advanced, 1u);
        EXPECT_LT(info.heartbeat_age_ns, static_cast<uint64_t>(std::chrono::nanoseconds(kTimeout).count()));
    }
    const auto took = time_to_writer_gone(reader);
    EXPECT_GE(took, kEarliestVerdict);
    EXPECT_LT(took, 1500ms);  // the bound is the feature: the 300 ms timeout, not the 5 s wait
    EXPECT_EQ(reader.info().writer_stale, 1u);
}

TEST(Liveness, AnAdvancingHeartbeatIsLiveWhereverItsClockIs) {
    const struct {
        const char* what;
        int64_t offset_ns;
        uint16_t abi_minor;
    } writers[] = {
        {"clock far behind ours (a collector in a time namespace started near 0)", -static_cast<int64_t>(monotonic_now_ns()) + 5, 1},
        {"clock ten days ahead of ours", 864'000 * static_cast<int64_t>(kSecond), 1},
        {"an ABI 1.0 writer far behind: only heartbeat_ns moves", -static_cast<int64_t>(monotonic_now_ns()) + 5, 0},
        {"an ABI 1.0 writer ten days ahead", 864'000 * static_cast<int64_t>(kSecond), 0},
    };
    for (const auto& w : writers) {
        SCOPED_TRACE(w.what);
        ScopedName name("live-foreign");
        ForeignWriter foreign(name, w.offset_ns, w.abi_minor);
        foreign.start_beating();
        Reader reader = Reader::open(name, short_timeout());
        EXPECT_EQ(reader.wait(1, 1s), Status::timeout) << "live for three timeouts";
        EXPECT_EQ(reader.info().writer_stale, 0u);
        EXPECT_EQ(reader.info().heartbeat_advanced, 1u);
        foreign.stop_beating();
        const auto took = time_to_writer_gone(reader);
        EXPECT_GE(took, kEarliestVerdict);
        EXPECT_LT(took, 1500ms);
    }
}

TEST(Liveness, AStalledWriterThatResumesIsLiveAgain) {
    ScopedName name("live-resume");
    ForeignWriter foreign(name, 0);
    ReaderOptions options = short_timeout();
    options.reattach = false;
    Reader reader = Reader::open(name, options);
    EXPECT_EQ(reader.wait(1, 2s), Status::writer_gone);  // never beat while watched (SIGSTOPped, say)
    foreign.start_beating();                               // SIGCONT
    EXPECT_EQ(reader.wait(1, 1s), Status::timeout) << "alive again: waiting for frames, not for a successor";
    EXPECT_EQ(reader.info().writer_stale, 0u);
    foreign.stop_beating();
    EXPECT_EQ(reader.wait(1, 2s), Status::writer_gone) << "a second loss is reported again";
}

TEST(Liveness, RetiredAndReplacedSegmentsAreGoneAtOnce) {
    for (const uint32_t state : {uint32_t{KEPLERSHM_STATE_RETIRED}, uint32_t{KEPLERSHM_STATE_REPLACED}}) {
        SCOPED_TRACE(state);
        ScopedName name("live-ended");
        ForeignWriter foreign(name, 0);
        foreign.set_state(state);
        Reader reader = Reader::open(name);  // the default timeout (4 s) plays no part
        const auto start = Clock::now();
        EXPECT_EQ(reader.wait(1, 0ms), Status::writer_gone);
        EXPECT_LT(Clock::now() - start, 100ms);
        EXPECT_EQ(reader.info().writer_stale, 0u) << "ended, not stale";
    }
}

TEST(Liveness, ANewWriterKeepsOffALiveWriterWhoseClockIsFarBehind) {
    // The case: seen from the host, a collector in a time namespace has a heartbeat "hours old".
    ScopedName name("live-behind");
    ForeignWriter foreign(name, -static_cast<int64_t>(monotonic_now_ns()) + 5 * static_cast<int64_t>(kSecond));
    foreign.start_beating();
    const auto start = Clock::now();
    try {
        Writer newcomer(name, test::small_options());
        FAIL() << "took the name of a live writer";
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), KEPLERSHM_E_EXISTS);
        EXPECT_NE(std::string(e.what()).find("belongs to a live writer"), std::string::npos) << e.what();
    }
    EXPECT_LT(Clock::now() - start, 2s) << "refused at the first beat seen";
}

TEST(Liveness, ANewWriterTakesTheNameOfADeadWriterWhoseClockIsAhead) {
    // A heartbeat in our future used to look fresh forever: the name could never be taken.
    ScopedName name("live-ahead");
    const uint64_t period = 100'000'000;  // timeout 3 x 0.1 s + 1 s = 1.3 s
    ForeignWriter foreign(name, 864'000 * static_cast<int64_t>(kSecond), KEPLERSHM_ABI_MINOR, period);
    Reader old_reader = Reader::open(name);
    const auto start = Clock::now();
    Writer successor(name, test::small_options());
    const auto watched = Clock::now() - start;
    EXPECT_GE(watched, 1300ms);
    EXPECT_LT(watched, 4s);
    EXPECT_EQ(old_reader.wait(1, 1s), Status::ok) << "the old generation is marked replaced; its reader follows";
    EXPECT_EQ(old_reader.info().generation, successor.generation());
}

TEST(Liveness, InfoReportsTheWritersCounterWallClockAndTheReadersTimeout) {
    ScopedName name("live-info");
    WriterOptions options = test::small_options();
    options.heartbeat_period = 200ms;
    Writer writer(name, options);
    Reader reader = Reader::open(name);
    keplershm_segment_info info = reader.info();
    EXPECT_EQ(info.heartbeat_count, 1u) << "the first beat is at creation";
    EXPECT_EQ(info.heartbeat_timeout_ns, 3 * 200'000'000ull + kSecond) << "3 periods + 1 s";
    timespec wall{};
    clock_gettime(CLOCK_REALTIME, &wall);
    const uint64_t now_wall = static_cast<uint64_t>(wall.tv_sec) * kSecond + static_cast<uint64_t>(wall.tv_nsec);
    EXPECT_LE(info.heartbeat_realtime_ns, now_wall);
    EXPECT_GT(info.heartbeat_realtime_ns + 10 * kSecond, now_wall);
    writer.heartbeat();
    test::publish(writer, 1);
    info = reader.info();
    EXPECT_EQ(info.heartbeat_count, 3u) << "one beat per heartbeat() and one per published frame";
    EXPECT_EQ(info.heartbeat_advanced, 1u);
    EXPECT_EQ(Reader::open(name, short_timeout()).info().heartbeat_timeout_ns,
              static_cast<uint64_t>(std::chrono::nanoseconds(kTimeout).count()));
}

TEST(Liveness, AWritersOwnInfoShowsItsBeats) {
    ScopedName name("live-writer-info");
    keplershm_writer_opts opts{};
    opts.sz = sizeof opts;
    opts.slot_count = 2;
    opts.process_capacity = 4;
    keplershm_writer* writer = nullptr;
    ASSERT_EQ(keplershm_writer_create(name.str().c_str(), &opts, &writer), KEPLERSHM_OK);
    ASSERT_EQ(keplershm_writer_heartbeat(writer), KEPLERSHM_OK);
    keplershm_segment_info info{};
    info.sz = sizeof info;
    ASSERT_EQ(keplershm_writer_info(writer, &info), KEPLERSHM_OK);
    EXPECT_EQ(info.heartbeat_count, 2u) << "the beat at creation and one heartbeat()";
    EXPECT_GT(info.heartbeat_realtime_ns, 0u);
    EXPECT_EQ(info.heartbeat_timeout_ns, 3 * kSecond + kSecond) << "what readers apply by default (1 s period)";
    keplershm_writer_close(writer, 0);
}

}  // namespace
}  // namespace keplershm
