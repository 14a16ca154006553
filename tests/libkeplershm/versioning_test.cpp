// Layout and versioning: the schema agrees with the header, cache-line placement, unknown majors are
// refused, newer minors (bigger records, bigger headers, unknown sections) are read by their sizes.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstring>
#include <set>

#include "image_builder.hpp"
#include "test_support.hpp"

namespace keplershm {
namespace {

using test::ScopedName;

TEST(Versioning, SchemaMatchesTheCompiledLayout) {
    const auto schema = library_schema();
    ASSERT_FALSE(schema.empty());
    std::set<std::pair<int, std::string>> names;
    bool saw_cpu_time = false;
    for (const keplershm_field& f : schema) {
        EXPECT_TRUE(names.insert({f.record_type, f.name}).second) << "duplicate " << f.name;
        EXPECT_LE(f.offset + f.size, keplershm_record_size(f.record_type)) << f.name;
        if (f.record_type == KEPLERSHM_RECORD_PROCESS && std::string(f.name) == "cpu_time_ns") {
            saw_cpu_time = true;
            EXPECT_EQ(f.offset, offsetof(keplershm_process, cpu_time_ns));
            EXPECT_EQ(f.type, KEPLERSHM_TYPE_U64);
            EXPECT_STREQ(f.unit, "ns");
        }
        if (f.record_type == KEPLERSHM_RECORD_PROCESS && std::string(f.name) == "softirq") {
            EXPECT_EQ(f.count, KEPLERSHM_SOFTIRQ_VECTORS);
            EXPECT_EQ(f.size, 80u);
        }
    }
    EXPECT_TRUE(saw_cpu_time);
}

TEST(Versioning, HotWordsSitOnTheirOwnCacheLines) {
    constexpr size_t heartbeat = offsetof(keplershm_header, heartbeat_ns);
    constexpr size_t futex = offsetof(keplershm_header, futex_word);
    constexpr size_t state = offsetof(keplershm_header, state);
    static_assert(heartbeat % 64 == 0 && futex % 64 == 0 && state % 64 == 0);
    EXPECT_NE(heartbeat / 64, futex / 64);
    EXPECT_NE(state / 64, heartbeat / 64);
    // The 1.1 heartbeat fields share the line that every beat already dirties.
    EXPECT_EQ(offsetof(keplershm_header, heartbeat_count) / 64, heartbeat / 64);
    EXPECT_EQ(offsetof(keplershm_header, heartbeat_realtime_ns) / 64, heartbeat / 64);
    ScopedName name("ver");
    Writer writer(name, test::small_options());
    EXPECT_EQ(writer.header().slots_offset % 4096, 0u);
    EXPECT_EQ(writer.header().slot_size % 64, 0u);  // each slot's sequence word starts a cache line
}

TEST(Versioning, AnUnknownMajorIsRefusedClearly) {
    ScopedName name("ver");
    test::ImageSpec spec;
    spec.abi_major = KEPLERSHM_ABI_MAJOR + 1;
    spec.abi_minor = 0;
    test::write_segment_bytes(name, test::build_image(spec));
    try {
        Reader::open(name);
        FAIL() << "opened an unknown major";
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), KEPLERSHM_E_UNSUPPORTED_MAJOR);
        EXPECT_NE(std::string(e.what()).find("ABI 2.0"), std::string::npos) << e.what();
    }
}

TEST(Versioning, ANewerMinorIsReadByTheSizesInItsHeader) {
    ScopedName name("ver");
    test::ImageSpec spec;
    spec.abi_minor = 7;
    spec.header_size = KEPLERSHM_HEADER_SIZE + 512;   // fields appended to the header
    spec.frame_header_size = sizeof(keplershm_frame) + 64;  // fields appended to the frame header
    spec.process_stride = sizeof(keplershm_process) + 64;   // fields appended to each process record
    spec.unknown_section = true;
    test::write_segment_bytes(name, test::build_image(spec));
    Reader reader = Reader::open(name);
    EXPECT_EQ(reader.info().abi_minor, 7u);
    FrameView view;
    ASSERT_EQ(reader.acquire(1, view), Status::ok);
    const auto processes = view.processes();
    ASSERT_EQ(processes.size(), 3u);
    for (uint32_t i = 0; i < 3; ++i) {
        EXPECT_EQ(processes[i].pid, 100 + i);
        EXPECT_EQ(processes[i].start_time_ticks, 5000u + i);
        EXPECT_EQ(get_text(processes[i].comm), "proc" + std::to_string(i));
    }
    EXPECT_EQ(view.unaccounted()->cpu_time_ns, 777u);
    EXPECT_EQ(view.find_section(12), nullptr);  // unknown: skipped
    FrameView copy;
    ASSERT_EQ(reader.copy(1, copy), Status::ok);
    EXPECT_EQ(copy.processes()[2].pid, 102u);
    EXPECT_EQ(copy.processes()[2].cpu_time_ns, 3'000'000u);
}

TEST(Versioning, RecordsSmallerThanThisMajorsAreRefused) {
    ScopedName name("ver");
    test::ImageSpec spec;
    spec.process_stride = sizeof(keplershm_process) - 8;
    test::write_segment_bytes(name, test::build_image(spec));
    try {
        Reader::open(name);
        FAIL();
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), KEPLERSHM_E_CORRUPT);
        EXPECT_NE(std::string(e.what()).find("process_record_size"), std::string::npos) << e.what();
    }
}

TEST(Versioning, OptionStructsFollowTheSizeFirstRule) {
    ScopedName name("ver");
    // An older caller: a struct that ends before most fields. Defaults fill the rest.
    struct OldOptions {
        size_t sz;
        uint32_t slot_count;
        uint32_t padding;  // compilers pad the old struct too; callers zero it (memset), as with libbpf
    } old_opts;
    std::memset(&old_opts, 0, sizeof old_opts);
    old_opts.sz = sizeof old_opts;
    old_opts.slot_count = 3;
    keplershm_writer* writer = nullptr;
    ASSERT_EQ(keplershm_writer_create(name.str().c_str(), reinterpret_cast<const keplershm_writer_opts*>(&old_opts), &writer),
              KEPLERSHM_OK);
    keplershm_segment_info info{};
    info.sz = sizeof info;
    ASSERT_EQ(keplershm_writer_info(writer, &info), KEPLERSHM_OK);
    EXPECT_EQ(info.slot_count, 3u);
    EXPECT_EQ(info.process_capacity, 4096u);
    keplershm_writer_close(writer, 0);

    // A newer caller: a larger struct is accepted if the unknown tail is zero, refused otherwise.
    struct {
        keplershm_reader_opts known;
        uint64_t future;
    } new_opts{};
    new_opts.known.sz = sizeof new_opts;
    keplershm_reader* reader = nullptr;
    EXPECT_EQ(keplershm_reader_open("kshm-no-such-segment", &new_opts.known, &reader), KEPLERSHM_E_NOT_FOUND);
    new_opts.future = 1;
    EXPECT_EQ(keplershm_reader_open("kshm-no-such-segment", &new_opts.known, &reader), KEPLERSHM_E_UNKNOWN_OPTION);
    EXPECT_NE(std::string(keplershm_last_error_detail()).find("unknown"), std::string::npos);
}

}  // namespace
}  // namespace keplershm
