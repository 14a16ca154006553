// Reader internals, shared by reader.cpp (live segments and recordings) and recorder.cpp (which needs
// the layout a view was read under).
#pragma once

#include <chrono>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "keplershm/keplershm.hpp"
#include "layout.hpp"
#include "liveness.hpp"
#include "recording.hpp"
#include "segment.hpp"

namespace keplershm {

class ReaderImpl {
public:
    static std::unique_ptr<ReaderImpl> open_live(const std::string& name, const ReaderOptions& options);
    static std::unique_ptr<ReaderImpl> open_recording(const std::string& path, const ReaderOptions& options);

    keplershm_segment_info info();
    uint64_t latest();
    Status wait(uint64_t after, std::chrono::milliseconds timeout);
    Status acquire(uint64_t sequence, keplershm_view& view);
    bool validate(const keplershm_view& view);
    Status copy(uint64_t sequence, keplershm_view& view);
    Status next(std::chrono::milliseconds timeout, keplershm_view& view);
    bool reattach();
    std::vector<keplershm_field> schema() const;
    /// The layout a view of this reader was read under, or nullptr if the view is not this reader's.
    const detail::Layout* layout_for(const keplershm_view& view) const;
    [[nodiscard]] bool is_recording() const noexcept { return recording_ != nullptr; }

private:
    struct Attachment {
        detail::MappedSegment segment;
        detail::Layout layout;
        // Read with pread rather than loads from the mapping: a segment whose owner may shrink it under
        // us (an estimates segment, PROTOCOL.md §8, or one owned by neither root nor us), where a load
        // past the new end would raise SIGBUS. Such a segment offers no in-place views.
        bool by_copy = false;
    };

    ReaderImpl() = default;
    const Attachment& current() const { return attachments_.back(); }
    /// The runtime fields: the mapped header itself, or (by_copy) a fresh pread copy of it.
    const keplershm_header& live_header() const;
    const uint8_t* slot_address(const Attachment& a, uint64_t sequence) const;
    uint64_t slot_offset(const Attachment& a, uint64_t sequence) const;
    /// The slot's sequence word, first look (acquire), and again after reading its payload.
    uint64_t load_slot_word(const Attachment& a, uint64_t sequence) const;
    bool slot_unchanged(const Attachment& a, uint64_t sequence, uint64_t expected) const;
    /// Reads the frame in a slot: in place, or (by_copy) into staging_.
    int parse_slot(const Attachment& a, uint64_t sequence, keplershm_view& view);
    void check_owner(const detail::MappedSegment& segment) const;
    bool trusted_owner(uid_t owner) const;
    Status classify(uint64_t slot_word, uint64_t sequence, keplershm_view& view);
    uint64_t oldest_readable();
    /// Retired, replaced, or stale: no heartbeat progress for the timeout on this reader's clock.
    bool writer_gone();
    /// Samples the current generation's heartbeat into watch_; returns the reader's clock at the sample.
    uint64_t watch_heartbeat();
    std::chrono::nanoseconds heartbeat_timeout() const;
    void attach(detail::MappedSegment segment);

    std::string name_;
    ReaderOptions options_;
    std::deque<Attachment> attachments_;  // back() is current; older ones stay mapped for in-place views
    std::unique_ptr<detail::RecordingFile> recording_;
    std::vector<uint64_t> buffer_;   // copy-out target (uint64_t: 8-byte alignment for records)
    std::vector<uint64_t> staging_;  // by_copy: the slot's frame as pread copied it
    mutable keplershm_header runtime_copy_{};  // by_copy: live_header()'s pread copy
    uint64_t last_ = 0;             // last frame next() returned
    bool started_ = false;
    uint64_t pending_missed_ = 0;
    uint64_t reattach_count_ = 0;
    bool gone_reported_ = false;  // writer_gone already returned for the current generation
    detail::HeartbeatWatch watch_;  // the current generation's heartbeat, as this reader has seen it
};

}  // namespace keplershm
