// Recording files (format in keplershm.h): the indexed, read-only view used by Reader, and the
// append-only writer used by Recorder.
#pragma once

#include <boost/interprocess/file_mapping.hpp>
#include <boost/interprocess/mapped_region.hpp>

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "layout.hpp"

namespace keplershm::detail {

uint32_t crc32(const void* data, size_t size) noexcept;

/// A recording mapped read-only and indexed once at open. A file cut in the middle of a record opens
/// with the frames before the cut and reports truncated().
class RecordingFile {
public:
    explicit RecordingFile(const std::string& path);

    [[nodiscard]] uint64_t frame_count() const noexcept { return frames_.size(); }
    [[nodiscard]] bool truncated() const noexcept { return truncated_; }
    [[nodiscard]] const std::string& truncation_reason() const noexcept { return truncation_reason_; }
    /// Layout of the first generation in the file (nullptr if the file holds no segment record).
    [[nodiscard]] const Layout* first_layout() const noexcept { return layouts_.empty() ? nullptr : &layouts_.front(); }
    /// Frame `index` (1-based): verifies its checksum and bounds. KEPLERSHM_OK or KEPLERSHM_E_CORRUPT.
    int read(uint64_t index, keplershm_view& view) const;
    /// The layout whose header `header` points to (views carry it), or nullptr.
    [[nodiscard]] const Layout* layout_for(const keplershm_header* header) const noexcept;

private:
    struct FrameEntry {
        uint64_t offset;
        uint64_t length;
        uint32_t checksum;
        uint32_t layout;
    };
    boost::interprocess::file_mapping file_;
    boost::interprocess::mapped_region region_;
    std::deque<Layout> layouts_;  // deque: views keep pointers to headers
    std::vector<FrameEntry> frames_;
    bool truncated_ = false;
    std::string truncation_reason_;
};

/// Copies the known sections of a frame into `out`, packed, with the directory rewritten: the form in
/// which frames are handed out by copy and stored in recordings. Returns the packed size.
size_t pack_frame(const keplershm_view& view, const Layout& layout, uint8_t* out, size_t capacity);
/// Upper bound of pack_frame's output for a frame of `frame_size` bytes. Sized from the frame at hand,
/// never from the header's slot size: a planted header may claim gigabytes.
size_t packed_frame_capacity(const Layout& layout, uint64_t frame_size);

}  // namespace keplershm::detail
