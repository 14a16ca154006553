// FrameView accessors and small library-wide helpers of the C++ API.
#include "keplershm/keplershm.hpp"
#include "schema_table.h"

namespace keplershm {

const keplershm_section* FrameView::find_section(uint32_t section_id) const noexcept {
    for (uint32_t i = 0; i < view_.section_count && i < KEPLERSHM_MAX_SECTIONS; ++i) {
        if (view_.sections[i].id == section_id) return &view_.sections[i];
    }
    return nullptr;
}

const keplershm_unaccounted* FrameView::unaccounted() const {
    const keplershm_section* s = find_section(KEPLERSHM_SECTION_UNACCOUNTED);
    if (s == nullptr || s->count == 0) return nullptr;
    return reinterpret_cast<const keplershm_unaccounted*>(view_.base + s->offset);
}

std::string_view FrameView::string_at(uint32_t offset, uint32_t length) const {
    const keplershm_section* s = find_section(KEPLERSHM_SECTION_STRINGS);
    if (s == nullptr || uint64_t{offset} + length > s->count) return {};
    return {reinterpret_cast<const char*>(view_.base + s->offset + offset), length};
}

const char* to_string(Status status) noexcept {
    switch (status) {
    case Status::ok: return "ok";
    case Status::not_yet: return "not yet published";
    case Status::lapped: return "overwritten (lapped)";
    case Status::timeout: return "timeout";
    case Status::writer_gone: return "writer gone";
    case Status::end_of_recording: return "end of recording";
    case Status::truncated: return "recording truncated";
    }
    return "unknown";
}

std::span<const keplershm_field> library_schema() noexcept {
    return {keplershm_schema_table, keplershm_schema_count};
}

}  // namespace keplershm
