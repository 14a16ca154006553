// libFuzzer: segment headers. Any bytes → validate_header either returns a layout whose every bound holds
// or throws Error; never reads outside the input.
#include <cstddef>
#include <cstdint>

#include "keplershm/keplershm.hpp"
#include "layout.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace keplershm;
    for (bool expect_slots : {true, false}) {
        try {
            const detail::Layout layout = detail::validate_header(data, size, expect_slots);
            if (expect_slots && layout.slots_offset + uint64_t{layout.slot_count} * layout.slot_size > size) __builtin_trap();
            if (layout.schema.size() != layout.header.schema_count) __builtin_trap();
        } catch (const Error&) {
        }
    }
    return 0;
}
