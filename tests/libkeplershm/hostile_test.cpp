// Untrusted input: truncated, garbage and hostile segments and frames give error codes, never a crash
// (this suite runs under ASan/UBSan in CI), including a writer that changes counts during a read.
#include <gtest/gtest.h>

#include <random>
#include <thread>

#include "image_builder.hpp"
#include "test_support.hpp"

namespace keplershm {
namespace {

using test::ScopedName;

/// Opens the image and reads every frame every way; returns false if anything threw Error.
bool read_everything(const std::string& name) {
    try {
        Reader reader = Reader::open(name);
        (void)reader.info();
        (void)reader.schema();
        FrameView view;
        for (uint64_t n = 0; n < 4; ++n) {
            if (reader.acquire(n, view) == Status::ok) {
                for (const auto& p : view.processes()) (void)p.cpu_time_ns;
                (void)reader.validate(view);
            }
            (void)reader.copy(n, view);
        }
        (void)reader.next(std::chrono::milliseconds(0), view);
        return true;
    } catch (const Error& e) {
        EXPECT_NE(e.code(), KEPLERSHM_OK);
        EXPECT_GT(std::string(e.what()).size(), 5u);
        return false;
    }
}

TEST(Hostile, TruncatedSegmentsAreRejected) {
    ScopedName name("hostile");
    const std::vector<uint8_t> image = test::build_image({});
    for (size_t size : {size_t{0}, size_t{8}, size_t{100}, size_t{4095}, size_t{4096}, image.size() / 2, image.size() - 1}) {
        test::write_segment_bytes(name, std::vector<uint8_t>(image.begin(), image.begin() + static_cast<long>(size)));
        EXPECT_FALSE(read_everything(name)) << "size " << size;
    }
    test::write_segment_bytes(name, image);
    EXPECT_TRUE(read_everything(name));
}

TEST(Hostile, GarbageIsNotASegment) {
    ScopedName name("hostile");
    std::mt19937_64 rng(42);
    std::vector<uint8_t> garbage(64 * 1024);
    for (auto& b : garbage) b = static_cast<uint8_t>(rng());
    test::write_segment_bytes(name, garbage);
    try {
        Reader::open(name);
        FAIL();
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), KEPLERSHM_E_BAD_MAGIC);
    }
}

TEST(Hostile, EveryHeaderFieldSetToExtremesIsHandled) {
    ScopedName name("hostile");
    const std::vector<uint8_t> image = test::build_image({});
    const uint64_t extremes[] = {0, 1, 0x7f, 0xffffffffull, 0x100000000ull, ~0ull, image.size(), image.size() + 1};
    for (size_t offset = 8; offset < 192; offset += 4) {
        for (uint64_t value : extremes) {
            std::vector<uint8_t> mutated = image;
            std::memcpy(mutated.data() + offset, &value, 4);
            test::write_segment_bytes(name, mutated);
            read_everything(name);  // either works or reports an error; ASan watches the rest
        }
    }
}

TEST(Hostile, HostileSectionDirectoriesAreRejected) {
    ScopedName name("hostile");
    const std::vector<uint8_t> image = test::build_image({});
    keplershm_header h;
    std::memcpy(&h, image.data(), sizeof h);
    const size_t frame = h.slots_offset + h.slot_size + KEPLERSHM_SLOT_CONTROL_SIZE;
    const size_t directory = frame + h.frame_header_size;
    struct Case {
        const char* what;
        size_t offset;
        uint32_t value;
    } cases[] = {
        {"huge process count", directory + 16 + 12, 0xffffffffu},
        {"offset past the frame", directory + 16 + 8, 0xfffffff0u},
        {"stride below the record size", directory + 16 + 4, 8},
        {"stride zero", directory + 16 + 4, 0},
        {"misaligned offset", directory + 16 + 8, 577},
        {"offset inside the directory", directory + 16 + 8, h.frame_header_size},
        {"section count above max", frame + offsetof(keplershm_frame, section_count), 1000},
        {"frame_size past the slot", frame + offsetof(keplershm_frame, frame_size), 0x7fffffffu},
        {"frame_size below its header", frame + offsetof(keplershm_frame, frame_size), 16},
        {"two unaccounted records", directory + 12, 2},
        {"duplicate section", directory + 16, KEPLERSHM_SECTION_UNACCOUNTED},
    };
    for (const Case& c : cases) {
        std::vector<uint8_t> mutated = image;
        std::memcpy(mutated.data() + c.offset, &c.value, sizeof c.value);
        test::write_segment_bytes(name, mutated);
        Reader reader = Reader::open(name);
        FrameView view;
        try {
            (void)reader.acquire(1, view);
            ADD_FAILURE() << c.what << " accepted";
        } catch (const Error& e) {
            EXPECT_EQ(e.code(), KEPLERSHM_E_CORRUPT) << c.what;
        }
        EXPECT_THROW((void)reader.copy(1, view), Error) << c.what;
    }
}

TEST(Hostile, RandomFrameMutationsNeverCrash) {
    ScopedName name("hostile");
    const std::vector<uint8_t> image = test::build_image({});
    keplershm_header h;
    std::memcpy(&h, image.data(), sizeof h);
    const size_t frame = h.slots_offset + h.slot_size + KEPLERSHM_SLOT_CONTROL_SIZE;
    std::mt19937_64 rng(7);
    for (int round = 0; round < 2000; ++round) {
        std::vector<uint8_t> mutated = image;
        for (int k = 0; k < 4; ++k) {
            const size_t at = frame + rng() % 700;
            mutated[at] = static_cast<uint8_t>(rng());
        }
        test::write_segment_bytes(name, mutated);
        read_everything(name);
    }
}

TEST(Hostile, AWriterChangingCountsDuringReadsIsSurvived) {
    ScopedName name("hostile");
    Writer writer(name, test::small_options());
    Draft draft = writer.begin();
    test::fill_derived_frame(draft);
    writer.commit(draft);
    Reader reader = Reader::open(name);
    // Scribble over the published frame's directory from another thread, as a broken or malicious writer
    // would, without touching the sequence word: the reader must never read outside the frame.
    auto* directory = reinterpret_cast<keplershm_section*>(reinterpret_cast<uint8_t*>(draft.raw().frame) + sizeof(keplershm_frame));
    std::atomic<bool> stop{false};
    std::thread scribbler([&] {
        std::mt19937 rng(3);
        while (!stop.load(std::memory_order_relaxed)) {
            std::atomic_ref<uint32_t>(directory[rng() % 6].count).store(rng(), std::memory_order_relaxed);
            std::atomic_ref<uint32_t>(directory[rng() % 6].offset).store(rng() % 100000, std::memory_order_relaxed);
        }
    });
    int ok = 0;
    int corrupt = 0;
    for (int i = 0; i < 20000; ++i) {
        FrameView view;
        try {
            if (reader.copy(1, view) == Status::ok) {
                ++ok;
                for (const auto& p : view.processes()) (void)p.cpu_time_ns;
            }
        } catch (const Error& e) {
            EXPECT_EQ(e.code(), KEPLERSHM_E_CORRUPT);
            ++corrupt;
        }
    }
    stop = true;
    scribbler.join();
    EXPECT_EQ(ok + corrupt, 20000);
}

TEST(Hostile, CApiNeverCrashesOnNullOrShortStructs) {
    EXPECT_EQ(keplershm_reader_open(nullptr, nullptr, nullptr), KEPLERSHM_E_INVALID_ARGUMENT);
    keplershm_reader* reader = nullptr;
    EXPECT_EQ(keplershm_reader_open("kshm-missing", nullptr, &reader), KEPLERSHM_E_NOT_FOUND);
    EXPECT_EQ(keplershm_reader_latest(nullptr, nullptr), KEPLERSHM_E_INVALID_ARGUMENT);
    keplershm_view view{};  // sz left 0
    EXPECT_EQ(keplershm_view_section(&view, KEPLERSHM_SECTION_PROCESSES, nullptr, nullptr, nullptr),
              KEPLERSHM_E_INVALID_ARGUMENT);
    EXPECT_STRNE(keplershm_strerror(-12345), "");
    keplershm_reader_close(nullptr);
    keplershm_writer_close(nullptr, 0);
    EXPECT_EQ(keplershm_recorder_close(nullptr), KEPLERSHM_OK);
}

}  // namespace
}  // namespace keplershm
