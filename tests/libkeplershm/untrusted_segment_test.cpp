// Segments as an attacker plants them (PROTOCOL.md §8: estimates segments and their producers are
// untrusted): a header that claims gigabyte slots, a segment shrunk under its reader, a foreign owner or
// a world-writable mode, a heartbeat period of an hour that would hold a starting writer, temporaries a
// killed writer left behind, and a recording whose disk fills mid-record. Each ends in a clear error or
// a bounded wait, never a crash (SIGBUS), an allocation beyond the reader's cap, or a torn file.
#include <gtest/gtest.h>

#include <sys/resource.h>

#include <optional>

#include "image_builder.hpp"
#include "test_support.hpp"

namespace keplershm {
namespace {

using test::ScopedName;
using test::ScopedPath;
using namespace std::chrono_literals;

/// The error a call throws (KEPLERSHM_OK if it throws none), and its message.
template <class Call>
std::pair<int, std::string> error_of(Call&& call) {
    try {
        call();
    } catch (const Error& e) {
        return {e.code(), e.what()};
    }
    return {KEPLERSHM_OK, ""};
}

/// The peak resident memory of this process so far, in bytes.
uint64_t peak_rss_bytes() {
    rusage usage{};
    getrusage(RUSAGE_SELF, &usage);
    return static_cast<uint64_t>(usage.ru_maxrss) * 1024;
}

/// An image whose header claims slots of `slot_bytes` (a sparse object of that size: it costs no memory).
void plant_huge_slots(const std::string& name, uint64_t slot_bytes) {
    std::vector<uint8_t> image = test::build_image({});
    keplershm_header h{};
    std::memcpy(&h, image.data(), sizeof h);
    h.slot_size = slot_bytes;
    h.segment_size = h.slots_offset + uint64_t{h.slot_count} * slot_bytes;
    std::memcpy(image.data(), &h, sizeof h);
    test::write_segment_bytes(name, image);
    ASSERT_EQ(truncate(("/dev/shm/" + name).c_str(), static_cast<off_t>(h.segment_size)), 0);
}

TEST(Untrusted, AHeaderClaimingGigabyteSlotsIsRefusedNotAllocated) {
    ScopedName name("untrusted");
    plant_huge_slots(name, (3ull << 30) + 64);  // a 3 GiB frame per slot, 6 GiB sparse
    const uint64_t rss_before = peak_rss_bytes();
    const auto [code, message] = error_of([&] { Reader::open(name); });
    EXPECT_EQ(code, KEPLERSHM_E_NO_MEMORY);
    EXPECT_NE(message.find("cap of 67108864 bytes"), std::string::npos) << message;

    // A reader told to accept such slots still sizes its memory from the frames it reads, not the header.
    ReaderOptions roomy;
    roomy.max_frame_bytes = 8ull << 30;
    Reader reader = Reader::open(name, roomy);
    FrameView view;
    for (uint64_t n = 0; n < 3; ++n) (void)error_of([&] { (void)reader.copy(n, view); });
    (void)error_of([&] { (void)reader.next(0ms, view); });
    EXPECT_LT(peak_rss_bytes() - rss_before, 64ull << 20) << "the reader allocated from the header's slot size";
}

TEST(Untrusted, TheReaderCapIsAnOptionOfTheCAbi) {
    ScopedName name("untrusted");
    plant_huge_slots(name, (128ull << 20) + 64);
    keplershm_reader_opts opts{};
    opts.sz = sizeof opts;
    keplershm_reader* reader = nullptr;
    EXPECT_EQ(keplershm_reader_open(name.str().c_str(), &opts, &reader), KEPLERSHM_E_NO_MEMORY);
    opts.max_frame_mib = 256;
    ASSERT_EQ(keplershm_reader_open(name.str().c_str(), &opts, &reader), KEPLERSHM_OK);
    keplershm_reader_close(reader);
    opts.owner_check = 7;
    EXPECT_EQ(keplershm_reader_open(name.str().c_str(), &opts, &reader), KEPLERSHM_E_INVALID_ARGUMENT);
}

/// An estimates segment written by a child process (its producer) and cut short by its owner while this
/// process reads it, as a hostile producer may at any moment: the reader must end in an Error, never die
/// of SIGBUS. The child may die of SIGBUS itself (it writes to what was cut off): that is the owner's lot.
void read_while_shrunk(const std::string& name, off_t shrink_to) {
    const pid_t producer = test::spawn([&] {
        WriterOptions options = test::small_options();
        options.segment_kind = KEPLERSHM_SEGMENT_ESTIMATES;
        Writer writer(name, options);
        for (int i = 0; i < 10'000; ++i) {
            test::publish(writer, 1);
            std::this_thread::sleep_for(1ms);
        }
        return 0;
    });
    std::optional<Reader> reader;
    for (int tries = 0; !reader && tries < 500; ++tries) {
        if (error_of([&] { reader.emplace(Reader::open(name)); }).first != KEPLERSHM_OK) std::this_thread::sleep_for(10ms);
    }
    ASSERT_TRUE(reader.has_value()) << "the producer never created " << name;
    FrameView view;
    for (int frames = 0; frames < 5;) frames += reader->next(1000ms, view) == Status::ok ? 1 : 0;
    const off_t full = static_cast<off_t>(reader->info().segment_size);
    const off_t cut = shrink_to >= 0 ? shrink_to : full / 2;
    // The owner cuts while the reader keeps reading; every read either works or ends in an Error.
    std::thread owner([&] { EXPECT_EQ(truncate(("/dev/shm/" + name).c_str(), cut), 0); });
    std::vector<std::string> failures;
    const auto until = std::chrono::steady_clock::now() + 200ms;
    while (std::chrono::steady_clock::now() < until) {
        failures.push_back(error_of([&] {
            (void)reader->info();
            (void)reader->next(1ms, view);
        }).second);
    }
    owner.join();
    kill(producer, SIGKILL);
    test::reap(producer);
    // Then every slot of the ring, some of which now lie past the end.
    const uint64_t latest = error_of([&] { (void)reader->latest(); }).first == KEPLERSHM_OK ? reader->latest() : 0;
    for (uint64_t n = latest > 4 ? latest - 3 : 1; n <= latest; ++n) {
        failures.push_back(error_of([&] { (void)reader->copy(n, view); }).second);
    }
    bool shrank = false;
    for (const std::string& failure : failures) {
        EXPECT_TRUE(failure.empty() || failure.find("shrank") != std::string::npos) << "after a cut to " << cut << ": " << failure;
        shrank |= failure.find("shrank") != std::string::npos;
    }
    EXPECT_TRUE(shrank) << "the reader never noticed the cut to " << cut << " of " << full << " bytes";
}

TEST(Untrusted, AnEstimatesSegmentShrunkUnderItsReaderIsAnErrorNotSigbus) {
    for (off_t size : {off_t{0}, off_t{100}, off_t{KEPLERSHM_HEADER_SIZE + 8}, off_t{-1} /* half the segment */}) {
        ScopedName name("untrusted");
        read_while_shrunk(name, size);
    }
}

TEST(Untrusted, WorldWritableSegmentsAreRefusedUnlessAnyOwnerIsAccepted) {
    ScopedName name("untrusted");
    test::write_segment_bytes(name, test::build_image({}));
    EXPECT_NO_THROW(Reader::open(name));
    ASSERT_EQ(chmod(("/dev/shm/" + name.str()).c_str(), 0666), 0);
    const auto [code, message] = error_of([&] { Reader::open(name); });
    EXPECT_EQ(code, KEPLERSHM_E_PERMISSION);
    EXPECT_NE(message.find("world-writable (mode 0666)"), std::string::npos) << message;
    ReaderOptions any;
    any.any_owner = true;
    EXPECT_NO_THROW(Reader::open(name, any));
}

TEST(Untrusted, ASegmentOfAnotherUserIsRefusedUnlessNamedAndThenReadByCopy) {
    if (geteuid() != 0) GTEST_SKIP() << "needs root to give a segment to another user";
    constexpr uid_t kNobody = 65534;
    ScopedName name("untrusted");
    test::write_segment_bytes(name, test::build_image({}));
    ASSERT_EQ(chown(("/dev/shm/" + name.str()).c_str(), kNobody, kNobody), 0);
    const auto [code, message] = error_of([&] { Reader::open(name); });
    EXPECT_EQ(code, KEPLERSHM_E_PERMISSION);
    EXPECT_NE(message.find("owned by uid 65534"), std::string::npos) << message;

    ReaderOptions named;
    named.segment_owner = kNobody;
    Reader reader = Reader::open(name, named);
    FrameView view;
    ASSERT_EQ(reader.acquire(1, view), Status::ok);
    EXPECT_EQ(view.raw().in_place, 0) << "a segment its owner may shrink is read by copy, never in place";
    EXPECT_EQ(view.processes().size(), 3u);
}

TEST(Untrusted, WritersRefuseAWorldWritableMode) {
    ScopedName name("untrusted");
    WriterOptions options = test::small_options();
    options.mode = 0666;
    const auto [code, message] = error_of([&] { Writer writer(name, options); });
    EXPECT_EQ(code, KEPLERSHM_E_INVALID_ARGUMENT);
    EXPECT_NE(message.find("0666"), std::string::npos) << message;
}

TEST(Untrusted, APlantedHourLongHeartbeatPeriodIsWatchedBoundedlyAndAStopEndsTheWait) {
    ScopedName name("untrusted");
    test::ImageSpec spec;
    spec.heartbeat_period_ns = 3600ull * 1'000'000'000;
    spec.heartbeat_count = 7;
    test::write_segment_bytes(name, test::build_image(spec));
    WriterOptions options = test::small_options();
    std::string told;
    options.on_warning = [&](const std::string& message) { told += message + "\n"; };
    const auto started = std::chrono::steady_clock::now();
    options.stop_requested = [&] { return std::chrono::steady_clock::now() - started > 300ms; };
    const auto [code, message] = error_of([&] { Writer writer(name, options); });
    EXPECT_EQ(code, KEPLERSHM_E_STATE) << message;
    EXPECT_LT(std::chrono::steady_clock::now() - started, 5s);
    EXPECT_NE(told.find("heartbeat period 3600.0 s, more than any writer uses"), std::string::npos) << told;
    EXPECT_NE(told.find("for up to 60.0 s"), std::string::npos) << told;
}

TEST(Untrusted, TemporariesOfAWriterKilledWhileCreatingAreRemovedAtTheNextStart) {
    ScopedName name("untrusted");
    const std::string stale = "/dev/shm/" + name.str() + ".00000000deadbeef.tmp";
    const std::string fresh = "/dev/shm/" + name.str() + ".00000000cafef00d.tmp";
    const std::string other = "/dev/shm/" + name.str() + ".notagenerationid.tmp";
    for (const std::string& path : {stale, fresh, other}) test::write_file_bytes(path, std::vector<uint8_t>(4096, 0));
    const timespec a_minute_ago[2] = {{time(nullptr) - 60, 0}, {time(nullptr) - 60, 0}};
    ASSERT_EQ(utimensat(AT_FDCWD, stale.c_str(), a_minute_ago, 0), 0);
    ASSERT_EQ(utimensat(AT_FDCWD, other.c_str(), a_minute_ago, 0), 0);
    WriterOptions options = test::small_options();
    std::string told;
    options.on_warning = [&](const std::string& message) { told += message; };
    {
        Writer writer(name, options);
    }
    EXPECT_NE(access(stale.c_str(), F_OK), 0) << "a minute-old temporary stayed";
    EXPECT_EQ(access(fresh.c_str(), F_OK), 0) << "a temporary another writer may be creating right now was removed";
    EXPECT_EQ(access(other.c_str(), F_OK), 0) << "a name that is not a generation's temporary was removed";
    EXPECT_NE(told.find("removed 1 temporary segment"), std::string::npos) << told;
    unlink(fresh.c_str());
    unlink(other.c_str());
}

TEST(Untrusted, ARecordingWhoseDiskFillsMidRecordEndsWithItsLastWholeRecord) {
    // A file size limit stands for a full disk: write() stores what fits, then fails (EFBIG, as ENOSPC:
    // NO_SPACE). In a child, so that the limit does not touch the test process.
    ScopedName name("untrusted");
    ScopedPath path("untrusted");
    Writer writer(name, test::small_options());
    const pid_t child = test::spawn([&] {
        signal(SIGXFSZ, SIG_IGN);
        const rlimit limit{50'000, 50'000};
        if (setrlimit(RLIMIT_FSIZE, &limit) != 0) return 201;
        Reader reader = Reader::open(name);
        Recorder recorder(path.str());
        uint64_t appended = 0;
        for (;;) {  // exit codes 1-199: frames appended; 201-205: what went wrong
            Draft draft = writer.begin();
            test::fill_derived_frame(draft);
            writer.commit(draft);
            FrameView view;
            if (reader.next(1000ms, view) != Status::ok) return 202;
            const auto [code, message] = error_of([&] { recorder.append(reader, view); });
            if (code == KEPLERSHM_OK) {
                ++appended;
                continue;
            }
            if (code != KEPLERSHM_E_NO_SPACE || message.find("cut off") == std::string::npos) return 203;
            if (error_of([&] { recorder.append(reader, view); }).first != KEPLERSHM_E_STATE) return 204;
            recorder.close();
            return appended > 0 && appended < 200 ? static_cast<int>(appended) : 205;
        }
    });
    const int appended = test::reap(child);
    ASSERT_GT(appended, 0);
    ASSERT_LT(appended, 200) << "the child failed with code " << appended;
    Reader replay = Reader::open_recording(path.str());
    EXPECT_EQ(replay.latest(), static_cast<uint64_t>(appended));
    FrameView view;
    for (int i = 0; i < appended; ++i) {
        ASSERT_EQ(replay.next(0ms, view), Status::ok);
        EXPECT_TRUE(test::derived_frame_intact(view));
    }
    EXPECT_EQ(replay.next(0ms, view), Status::end_of_recording) << "no torn record at the end";
}

}  // namespace
}  // namespace keplershm
