// libFuzzer: frame headers and section directories. The input is one frame's bytes, parsed under the
// golden segment's layout; a frame that parses is packed (the copy-out path), re-parsed and read.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <vector>

#include "keplershm/keplershm.hpp"
#include "layout.hpp"
#include "recording.hpp"

namespace {

/// The header of the committed golden segment (written by the real writer), validated like a recording's.
const keplershm::detail::Layout& golden_layout() {
    static const keplershm::detail::Layout layout = [] {
        std::ifstream in(KEPLERSHM_GOLDEN_SEGMENT, std::ios::binary);
        const std::vector<uint8_t> image{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
        if (image.empty()) __builtin_trap();  // the fuzz target is meaningless without its layout
        return keplershm::detail::validate_header(image.data(), image.size(), false);
    }();
    return layout;
}

uint64_t read_all(const keplershm::FrameView& view) {
    uint64_t sum = 0;
    for (const auto& p : view.processes()) sum += p.cpu_time_ns + p.pid;
    for (const auto& w : view.workloads()) sum += view.string_at(w.cgroup_path_offset, w.cgroup_path_length).size();
    for (const auto& z : view.zones()) sum += z.energy_delta_uj;
    for (const auto& c : view.cpus()) sum += c.user_ns;
    if (const auto* u = view.unaccounted()) sum += u->cpu_time_ns;
    return sum;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace keplershm;
    const detail::Layout& layout = golden_layout();
    std::vector<uint64_t> aligned(size / 8 + 1);  // frames are 8-byte aligned in slots and files
    std::memcpy(aligned.data(), data, size);
    const auto* frame = reinterpret_cast<const uint8_t*>(aligned.data());
    FrameView view;
    if (detail::parse_frame(frame, size, layout, view.raw()) != KEPLERSHM_OK) return 0;
    view.raw().segment = &layout.header;
    volatile uint64_t sink = read_all(view);
    std::vector<uint8_t> packed(detail::packed_frame_capacity(layout, size));
    const size_t n = detail::pack_frame(view.raw(), layout, packed.data(), packed.size());
    if (n == 0) return 0;  // overlapping sections: refused
    FrameView copy;
    if (detail::parse_frame(packed.data(), n, layout, copy.raw()) != KEPLERSHM_OK) __builtin_trap();  // packing keeps it valid
    copy.raw().segment = &layout.header;
    if (read_all(copy) != sink) __builtin_trap();  // the copy holds the same records
    return 0;
}
