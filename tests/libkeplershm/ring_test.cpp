// The ring of seqlocked slots: not-yet, lapped (with the right count), in-place views invalidated by an
// overwrite, copies that survive it, latest, and the next() stream.
#include <gtest/gtest.h>

#include "test_support.hpp"

namespace keplershm {
namespace {

using test::ScopedName;
using namespace std::chrono_literals;

using test::publish;

TEST(Ring, NotYetBeforeTheFirstFrameAndAfterTheLatest) {
    ScopedName name("ring");
    Writer writer(name, test::small_options());
    Reader reader = Reader::open(name);
    FrameView view;
    EXPECT_EQ(reader.latest(), 0u);
    EXPECT_EQ(reader.acquire(1, view), Status::not_yet);
    publish(writer, 2);
    EXPECT_EQ(reader.latest(), 2u);
    EXPECT_EQ(reader.acquire(3, view), Status::not_yet);
    ASSERT_EQ(reader.acquire(2, view), Status::ok);
    EXPECT_TRUE(test::derived_frame_intact(view));
    EXPECT_TRUE(view.in_place());
}

TEST(Ring, AFrameBeingWrittenIsNotYetReadable) {
    ScopedName name("ring");
    Writer writer(name, test::small_options());
    Reader reader = Reader::open(name);
    Draft draft = writer.begin();
    FrameView view;
    EXPECT_EQ(reader.acquire(1, view), Status::not_yet);
    EXPECT_EQ(reader.copy(1, view), Status::not_yet);
    test::fill_derived_frame(draft);
    writer.commit(draft);
    EXPECT_EQ(reader.acquire(1, view), Status::ok);
}

TEST(Ring, LappedReportsHowManyFramesWereLost) {
    ScopedName name("ring");
    Writer writer(name, test::small_options());  // 4 slots: frames 7..10 stay readable
    Reader reader = Reader::open(name);
    publish(writer, 10);
    FrameView view;
    ASSERT_EQ(reader.acquire(2, view), Status::lapped);
    EXPECT_EQ(view.missed(), 5u);  // frames 2..6 are gone, 7 is the oldest readable
    EXPECT_EQ(reader.acquire(6, view), Status::lapped);
    EXPECT_EQ(view.missed(), 1u);
    EXPECT_EQ(reader.acquire(7, view), Status::ok);
    EXPECT_EQ(reader.acquire(10, view), Status::ok);
    Draft draft = writer.begin();  // frame 11 is being written over frame 7
    ASSERT_EQ(reader.acquire(7, view), Status::lapped);
    EXPECT_EQ(view.missed(), 1u);  // 8 is the oldest readable now
    writer.commit(draft);
}

TEST(Ring, InPlaceViewIsInvalidatedWhenItsSlotIsRewritten) {
    ScopedName name("ring");
    Writer writer(name, test::small_options());
    Reader reader = Reader::open(name);
    publish(writer, 1);
    FrameView view;
    ASSERT_EQ(reader.acquire(1, view), Status::ok);
    EXPECT_TRUE(reader.validate(view));
    publish(writer, 2);  // frames 2 and 3 go to slots 2 and 3: frame 1 (slot 1) is intact
    EXPECT_TRUE(reader.validate(view));
    Draft draft = writer.begin();  // frame 4 goes to slot 0
    test::fill_derived_frame(draft);
    writer.commit(draft);
    EXPECT_TRUE(reader.validate(view));
    draft = writer.begin();  // frame 5 goes to slot 1: the view's slot is now being rewritten
    EXPECT_FALSE(reader.validate(view));
    writer.commit(draft);
    EXPECT_FALSE(reader.validate(view));
}

TEST(Ring, CopyOutSurvivesTheOverwrite) {
    ScopedName name("ring");
    Writer writer(name, test::small_options());
    Reader reader = Reader::open(name);
    publish(writer, 1);
    FrameView copy;
    ASSERT_EQ(reader.copy(1, copy), Status::ok);
    EXPECT_FALSE(copy.in_place());
    publish(writer, 8);
    EXPECT_TRUE(reader.validate(copy));
    EXPECT_TRUE(test::derived_frame_intact(copy));
}

TEST(Ring, CopyIsPackedToTheUsedBytes) {
    ScopedName name("ring");
    WriterOptions options = test::small_options();
    options.process_capacity = 10000;
    Writer writer(name, options);
    Reader reader = Reader::open(name);
    publish(writer, 1);  // one process
    FrameView in_place;
    FrameView copy;
    ASSERT_EQ(reader.acquire(1, in_place), Status::ok);
    ASSERT_EQ(reader.copy(1, copy), Status::ok);
    EXPECT_LT(copy.raw().frame_size, 4096u);
    EXPECT_TRUE(test::derived_frame_intact(copy));
}

TEST(Ring, NextStreamsFromTheNewestFrameAndCountsMissedOnes) {
    ScopedName name("ring");
    Writer writer(name, test::small_options());
    Reader reader = Reader::open(name);
    publish(writer, 3);
    FrameView view;
    ASSERT_EQ(reader.next(0ms, view), Status::ok);
    EXPECT_EQ(view.sequence(), 3u);
    EXPECT_EQ(reader.next(0ms, view), Status::timeout);
    publish(writer, 10);  // frames 4..13; 10..13 readable
    ASSERT_EQ(reader.next(0ms, view), Status::ok);
    EXPECT_EQ(view.sequence(), 10u);
    EXPECT_EQ(view.missed(), 6u);
    ASSERT_EQ(reader.next(0ms, view), Status::ok);
    EXPECT_EQ(view.sequence(), 11u);
    EXPECT_EQ(view.missed(), 0u);
}

TEST(Ring, WaitReturnsWhenANewFrameIsPublished) {
    ScopedName name("ring");
    Writer writer(name, test::small_options());
    Reader reader = Reader::open(name);
    EXPECT_EQ(reader.wait(0, 10ms), Status::timeout);
    const pid_t child = test::spawn([&] {
        usleep(50'000);
        publish(writer, 1);
        return 0;
    });
    EXPECT_EQ(reader.wait(0, 5000ms), Status::ok);
    EXPECT_EQ(reader.latest(), 1u);
    EXPECT_EQ(test::reap(child), 0);
}

TEST(Ring, SectionsAndTextAreReadBack) {
    ScopedName name("ring");
    WriterOptions options = test::small_options();
    options.zones = {keplershm_zone_info{}};
    set_text(options.zones[0].name, "package-0");
    options.zones[0].kind = KEPLERSHM_ZONE_PACKAGE;
    Writer writer(name, options);
    Draft draft = writer.begin();
    keplershm_workload workload{};
    workload.kind = KEPLERSHM_WORKLOAD_POD;
    set_text(workload.pod_name, std::string(253, 'p'));
    const auto path = draft.add_string("/kubepods.slice/kubepods-pod1.slice");
    ASSERT_TRUE(path.has_value());
    workload.cgroup_path_offset = *path;
    workload.cgroup_path_length = 35;
    ASSERT_TRUE(draft.add_workload(workload));
    keplershm_zone_sample zone{};
    zone.energy_delta_uj = 1234;
    zone.flags = KEPLERSHM_ZONE_VALID;
    ASSERT_TRUE(draft.add_zone(zone));
    keplershm_cpu_sample cpu{};
    cpu.user_ns = 99;
    ASSERT_TRUE(draft.add_cpu(cpu));
    writer.commit(draft);

    Reader reader = Reader::open(name);
    FrameView view;
    ASSERT_EQ(reader.copy(1, view), Status::ok);
    ASSERT_EQ(view.workloads().size(), 1u);
    EXPECT_EQ(get_text(view.workloads()[0].pod_name).size(), 253u);
    EXPECT_EQ(view.string_at(view.workloads()[0].cgroup_path_offset, 35), "/kubepods.slice/kubepods-pod1.slice");
    EXPECT_EQ(view.string_at(1000, 100), "");  // out of range: empty, not a crash
    EXPECT_EQ(view.zones()[0].energy_delta_uj, 1234u);
    EXPECT_EQ(view.cpus()[0].user_ns, 99u);
    EXPECT_EQ(get_text(view.segment().zones[0].name), "package-0");
    EXPECT_EQ(get_text(view.segment().node_name), "test-node");
}

TEST(Ring, RecordsBeyondCapacityAreRefused) {
    ScopedName name("ring");
    WriterOptions options = test::small_options();
    options.process_capacity = 2;
    Writer writer(name, options);
    Draft draft = writer.begin();
    keplershm_process p{};
    EXPECT_TRUE(draft.add_process(p));
    EXPECT_TRUE(draft.add_process(p));
    EXPECT_FALSE(draft.add_process(p));
    draft.raw().process_count = 3;  // a C caller lying about the count
    EXPECT_THROW(writer.commit(draft), Error);
    draft.raw().process_count = 2;
    EXPECT_NO_THROW(writer.commit(draft));
}

}  // namespace
}  // namespace keplershm
