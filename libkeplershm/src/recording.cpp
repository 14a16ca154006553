#include "recording.hpp"

#include <boost/crc.hpp>
#include <boost/interprocess/exceptions.hpp>
#include <cstring>

#include "error.hpp"

namespace bip = boost::interprocess;

namespace keplershm::detail {

uint32_t crc32(const void* data, size_t size) noexcept {
    boost::crc_32_type crc;
    crc.process_bytes(data, size);
    return crc.checksum();
}

size_t packed_frame_capacity(const Layout& layout, uint64_t frame_size) {
    return uint64_t{layout.frame_header_size} + KEPLERSHM_MAX_SECTIONS * (uint64_t{layout.header.section_entry_size} + 64) +
           frame_size;
}

size_t pack_frame(const keplershm_view& view, const Layout& layout, uint8_t* out, size_t capacity) {
    const uint32_t entry = layout.header.section_entry_size;
    const uint64_t directory_end = uint64_t{layout.frame_header_size} + uint64_t{view.section_count} * entry;
    if (directory_end > capacity) return 0;
    std::memcpy(out, view.base, layout.frame_header_size);
    std::memset(out + layout.frame_header_size, 0, directory_end - layout.frame_header_size);
    uint64_t at = directory_end;
    for (uint32_t i = 0; i < view.section_count; ++i) {
        keplershm_section s = view.sections[i];
        const uint64_t bytes = uint64_t{s.count} * s.stride;
        at = align_up(at, 64);
        if (at + bytes > capacity) return 0;  // only overlapping (hostile) sections get here
        std::memcpy(out + at, view.base + s.offset, bytes);
        s.offset = static_cast<uint32_t>(at);
        std::memcpy(out + layout.frame_header_size + uint64_t{i} * entry, &s, sizeof s);
        at += bytes;
    }
    auto* header = reinterpret_cast<keplershm_frame*>(out);
    header->section_count = view.section_count;
    header->frame_size = static_cast<uint32_t>(at);
    return at;
}

RecordingFile::RecordingFile(const std::string& path) {
    try {
        file_ = bip::file_mapping(path.c_str(), bip::read_only);
        region_ = bip::mapped_region(file_, bip::read_only);
    } catch (const bip::interprocess_exception& e) {
        const int native = e.get_native_error();
        fail(native != 0 ? error_from_errno(native) : KEPLERSHM_E_IO, "cannot open recording '{}': {}", path,
             native != 0 ? std::strerror(native) : e.what());
    }
    const auto* bytes = static_cast<const uint8_t*>(region_.get_address());
    const uint64_t size = region_.get_size();
    keplershm_recording_header file_header{};
    if (size < sizeof file_header) fail(KEPLERSHM_E_TRUNCATED, "recording '{}' has {} bytes, less than its header", path, size);
    std::memcpy(&file_header, bytes, sizeof file_header);
    if (file_header.magic != KEPLERSHM_RECORDING_MAGIC) fail(KEPLERSHM_E_BAD_MAGIC, "'{}' is not a keplershm recording", path);
    if (file_header.abi_major > KEPLERSHM_ABI_MAJOR || file_header.abi_major < KEPLERSHM_ABI_OLDEST_MAJOR) {
        fail(KEPLERSHM_E_UNSUPPORTED_MAJOR, "recording '{}' has ABI {}.{}; this library reads majors {} to {}", path,
             file_header.abi_major, file_header.abi_minor, KEPLERSHM_ABI_OLDEST_MAJOR, KEPLERSHM_ABI_MAJOR);
    }
    if (file_header.header_size < sizeof file_header || file_header.header_size > size) {
        fail(KEPLERSHM_E_CORRUPT, "recording '{}': header_size {} invalid", path, file_header.header_size);
    }
    uint64_t at = file_header.header_size;
    while (at < size) {
        keplershm_record_header record{};
        if (size - at < sizeof record) {
            truncated_ = true;
            truncation_reason_ = fmt::format("recording ends {} bytes into a record header at offset {}", size - at, at);
            break;
        }
        std::memcpy(&record, bytes + at, sizeof record);
        const uint64_t payload = at + sizeof record;
        if (record.length > size - payload) {
            truncated_ = true;
            truncation_reason_ = fmt::format("record at offset {} announces {} bytes, only {} remain", at, record.length,
                                             size - payload);
            break;
        }
        if (record.type == KEPLERSHM_RECORDING_SEGMENT) {
            if (crc32(bytes + payload, record.length) != record.checksum) {
                fail(KEPLERSHM_E_CORRUPT, "recording '{}': segment record at offset {} fails its checksum", path, at);
            }
            layouts_.push_back(validate_header(bytes + payload, record.length, false));
        } else if (record.type == KEPLERSHM_RECORDING_FRAME) {
            if (layouts_.empty()) fail(KEPLERSHM_E_CORRUPT, "recording '{}': frame before any segment record", path);
            frames_.push_back({payload, record.length, record.checksum, static_cast<uint32_t>(layouts_.size() - 1)});
        }  // other types: written by a newer minor, skipped
        at = align_up(payload + record.length, 8);
    }
}

const Layout* RecordingFile::layout_for(const keplershm_header* header) const noexcept {
    for (const Layout& layout : layouts_) {
        if (&layout.header == header) return &layout;
    }
    return nullptr;
}

int RecordingFile::read(uint64_t index, keplershm_view& view) const {
    if (index == 0 || index > frames_.size()) return KEPLERSHM_E_NOT_YET;
    const FrameEntry& entry = frames_[index - 1];
    const auto* bytes = static_cast<const uint8_t*>(region_.get_address()) + entry.offset;
    if (crc32(bytes, entry.length) != entry.checksum) {
        set_last_error(fmt::format("frame {} of the recording fails its checksum", index));
        return KEPLERSHM_E_CORRUPT;
    }
    const Layout& layout = layouts_[entry.layout];
    const int rc = parse_frame(bytes, entry.length, layout, view);
    if (rc != KEPLERSHM_OK) return rc;
    view.segment = &layout.header;
    view.in_place = 0;
    view.missed = 0;
    return KEPLERSHM_OK;
}

}  // namespace keplershm::detail
