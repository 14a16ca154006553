// Fault: a recording cut anywhere (a full disk, a copy interrupted) or damaged. `kepler-estimate --replay`
// must estimate the whole frames before the damage, say clearly what is wrong, exit non-zero, never crash.
// The recording is made from the real collector's frames with the library's recorder.
#include <cstring>
#include <regex>

#include <gtest/gtest.h>

#include "support/frames.hpp"
#include "support/process.hpp"

namespace {

using namespace std::chrono_literals;
using e2e::Child;
namespace fs = std::filesystem;

struct Record {
    uint64_t offset = 0;  // of its 24-byte record header
    uint64_t end = 0;     // after the payload's padding
    uint32_t type = 0;
    uint64_t length = 0;
};

/// The record layout of a recording (PROTOCOL.md §7), to cut it at meaningful places.
std::vector<Record> records_of(const std::string& bytes) {
    keplershm_recording_header file{};
    std::memcpy(&file, bytes.data(), sizeof file);
    std::vector<Record> out;
    for (uint64_t at = file.header_size; at + sizeof(keplershm_record_header) <= bytes.size();) {
        keplershm_record_header h{};
        std::memcpy(&h, bytes.data() + at, sizeof h);
        Record r{at, at + sizeof h + ((h.length + 7) & ~uint64_t{7}), h.type, h.length};
        out.push_back(r);
        at = r.end;
    }
    return out;
}

/// A recording of the real collector: a few dozen frames of this machine.
std::string make_recording(const e2e::TempDir& tmp) {
    const std::string name = e2e::unique_name("record");
    Child collector({COLLECT_BINARY, "--shm-name", name, "--source", "procfs", "--interval", "100ms", "--kube", "off",
                     "--frames", "12", "--slots", "32"}, tmp / "collect.log");
    auto reader = e2e::open_when_present(name, 30s);
    EXPECT_TRUE(reader) << collector.log();
    if (!reader) return {};
    const fs::path path = tmp / "node.kshm";
    keplershm::Recorder recorder(path.string());
    recorder.follow(*reader, 10s);
    recorder.close();
    EXPECT_EQ(collector.wait(10s).value_or(e2e::Exit{}).code, 0) << collector.log();
    return e2e::read_file(path);
}

struct Replay {
    e2e::Result result;
    double frames_read = -1;  // from the Prometheus text it wrote, -1 without one
};

Replay replay(const e2e::TempDir& tmp, const std::string& bytes) {
    const fs::path file = tmp / "cut.kshm", metrics = tmp / "cut.prom";
    e2e::write_file(file, bytes);
    fs::remove(metrics);
    Replay r;
    r.result = e2e::run({ESTIMATE_BINARY, "--replay", file.string(), "--listen", "none", "--quiet", "--prom-out",
                         metrics.string()}, 60s);
    std::smatch m;
    const std::string text = e2e::read_file(metrics);
    static const std::regex frames(R"((?:^|\n)kepler_estimator_frames_read_total (\S+))");
    if (std::regex_search(text, m, frames)) r.frames_read = std::stod(m[1]);
    return r;
}

class Recording : public ::testing::Test {
protected:
    void SetUp() override {
        bytes_ = make_recording(tmp_);
        ASSERT_FALSE(bytes_.empty());
        records_ = records_of(bytes_);
        ASSERT_GE(records_.size(), 10u);
        ASSERT_EQ(records_.back().end, bytes_.size()) << "the recorder wrote whole records";
    }
    /// Whole FRAME records that end at or before `cut`.
    size_t frames_before(uint64_t cut) const {
        size_t n = 0;
        for (const Record& r : records_) n += (r.type == KEPLERSHM_RECORDING_FRAME && r.end <= cut) ? 1 : 0;
        return n;
    }
    e2e::TempDir tmp_;
    std::string bytes_;
    std::vector<Record> records_;
};

TEST_F(Recording, WholeRecordingReplaysCleanly) {
    const Replay r = replay(tmp_, bytes_);
    EXPECT_EQ(r.result.exit.code, 0) << r.result.err;
    EXPECT_EQ(r.frames_read, static_cast<double>(frames_before(bytes_.size())));
}

TEST_F(Recording, CutAtARecordBoundaryIsAShorterRecording) {
    for (const Record& r : records_) {
        if (r.type != KEPLERSHM_RECORDING_FRAME) continue;
        const Replay out = replay(tmp_, bytes_.substr(0, r.end));
        EXPECT_EQ(out.result.exit.code, 0) << "cut at " << r.end << ": " << out.result.err;
        EXPECT_EQ(out.frames_read, static_cast<double>(frames_before(r.end)));
    }
}

TEST_F(Recording, CutInsideARecordEstimatesTheFramesBeforeAndFailsClearly) {
    int not_failing = 0;
    for (const Record& r : records_) {
        // In the record header, right after it, inside the payload, and one byte short of the payload's end
        // (a cut in the zero padding after a whole payload loses nothing: that frame is still delivered).
        for (uint64_t cut : {r.offset + 1, r.offset + 12, r.offset + 23, r.offset + 24, r.offset + 24 + r.length / 2,
                             r.offset + 24 + r.length - 1}) {
            SCOPED_TRACE("cut at byte " + std::to_string(cut) + " of " + std::to_string(bytes_.size()));
            const Replay out = replay(tmp_, bytes_.substr(0, cut));
            ASSERT_FALSE(out.result.exit.crashed()) << out.result.exit.describe() << "\n" << out.result.err;
            ASSERT_FALSE(out.result.timed_out);
            EXPECT_TRUE(out.result.err.find("middle of a record") != std::string::npos ||
                        out.result.err.find("ends ") != std::string::npos) << "says the file is cut: " << out.result.err;
            if (out.frames_read >= 0) {
                EXPECT_EQ(out.frames_read, static_cast<double>(frames_before(cut)));
            }
            not_failing += out.result.exit.code == 0 ? 1 : 0;
        }
    }
    EXPECT_EQ(not_failing, 0) << "--replay of a cut recording exits non-zero, so scripts can tell";
}

TEST_F(Recording, CutInsideTheFileHeaderIsRejected) {
    for (uint64_t cut : {0, 1, 8, 32, 63}) {
        const Replay out = replay(tmp_, bytes_.substr(0, cut));
        EXPECT_FALSE(out.result.exit.crashed()) << "cut " << cut << ": " << out.result.exit.describe();
        EXPECT_NE(out.result.exit.code, 0) << "cut " << cut;
        EXPECT_FALSE(out.result.err.empty()) << "cut " << cut << ": an explanation";
    }
}

TEST_F(Recording, DamagedFrameIsRejectedByItsChecksumAndEveryOtherFrameIsKept) {
    std::vector<const Record*> frames;
    for (const Record& r : records_) {
        if (r.type == KEPLERSHM_RECORDING_FRAME) frames.push_back(&r);
    }
    const Record& victim = *frames[frames.size() / 2];
    std::string damaged = bytes_;
    damaged[victim.offset + 24 + victim.length / 2] ^= 0x5a;
    const Replay out = replay(tmp_, damaged);
    EXPECT_FALSE(out.result.exit.crashed()) << out.result.exit.describe();
    EXPECT_NE(out.result.exit.code, 0) << out.result.err;
    EXPECT_NE(out.result.err.find("checksum"), std::string::npos) << out.result.err;
    // The reader steps over the damaged frame: all the others, before and after it, are estimated.
    EXPECT_EQ(out.frames_read, static_cast<double>(frames.size() - 1)) << out.result.err;
}

TEST_F(Recording, GarbageIsNotARecording) {
    std::string garbage(4096, '\0');
    for (size_t i = 0; i < garbage.size(); ++i) garbage[i] = static_cast<char>((i * 2654435761u) >> 11);
    const Replay out = replay(tmp_, garbage);
    EXPECT_FALSE(out.result.exit.crashed()) << out.result.exit.describe();
    EXPECT_NE(out.result.exit.code, 0);
    EXPECT_FALSE(out.result.err.empty());
}

}  // namespace
