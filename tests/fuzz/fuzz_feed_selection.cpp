// libFuzzer: kepler-feed's check of a subscriber's request (kepler-feed/select/selection.cpp,
// parse_selection), over SubscribeRequest messages decoded from the input (what the network sends). The
// last input byte picks the server's limits: the defaults or tight ones. Either a selection within the
// limits (known sections, each once, known fields; filter values 1 to max_value_length bytes, at most
// max_filter_values per list; top_n within max_top_n), or a refusal with a reason. A crash or an
// exception is a finding (parse_selection documents none).
#include <google/protobuf/stubs/logging.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <unordered_set>
#include <vector>

#include "keplershm/keplershm.hpp"
#include "select/selection.hpp"

namespace {

using namespace kepler::feed;

void require(bool holds) {
    if (!holds) __builtin_trap();
}

void require_list(const std::unordered_set<std::string>& values, const Limits& limits) {
    require(values.size() <= limits.max_filter_values);
    for (const std::string& v : values) require(!v.empty() && v.size() <= limits.max_value_length);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static const std::vector<keplershm_field> schema = library_schema();
    static const bool quiet = [] {
        google::protobuf::SetLogHandler(nullptr);  // invalid UTF-8 in a string field is logged, then refused
        return true;
    }();
    (void)quiet;
    if (size == 0) return 0;
    Limits limits;
    if (data[size - 1] & 1) {
        limits.max_top_n = 10;
        limits.max_filter_values = 2;
        limits.max_value_length = 8;
        limits.max_fields = 2;
    }
    v1::SubscribeRequest request;
    if (!request.ParseFromArray(data, static_cast<int>(size - 1))) return 0;
    std::string error;
    const std::optional<Selection> selection = parse_selection(request, schema, limits, error);
    if (!selection) {
        require(!error.empty());
        return 0;
    }
    require(!selection->sections.empty() && selection->sections.size() <= section_kinds().size());
    std::set<uint32_t> ids;
    for (const SectionPlan& plan : selection->sections) {
        require(ids.insert(plan.kind.id).second);
        require(plan.fields.size() <= limits.max_fields);
        for (const std::string& field : plan.fields) {
            require(std::any_of(schema.begin(), schema.end(), [&](const keplershm_field& f) {
                return f.record_type == plan.kind.record_type && keplershm::get_text(f.name) == field;
            }));
        }
    }
    require_list(selection->containers, limits);
    require_list(selection->pods, limits);
    require_list(selection->namespaces, limits);
    require(selection->top_n <= limits.max_top_n && selection->from_sequence == request.from_sequence());
    return 0;
}
