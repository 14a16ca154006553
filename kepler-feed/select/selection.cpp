#include "select/selection.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "keplershm/keplershm.hpp"

namespace kepler::feed {

namespace {

std::optional<SectionKind> kind_named(const std::string& name) {
    for (const SectionKind& kind : section_kinds())
        if (name == kind.name) return kind;
    return std::nullopt;
}

std::string known_sections() {
    std::string out;
    for (const SectionKind& kind : section_kinds()) out += (out.empty() ? "" : ", ") + std::string(kind.name);
    return out;
}

std::vector<std::string> fields_of(const std::vector<keplershm_field>& schema, uint32_t record_type) {
    std::vector<std::string> out;
    for (const keplershm_field& f : schema)
        if (f.record_type == record_type) out.emplace_back(keplershm::get_text(f.name));
    return out;
}

/// Shown in messages: a hostile value may be megabytes long or binary.
std::string shown(const std::string& text) {
    std::string out;
    for (const char c : text.substr(0, 64)) out += (c >= 0x20 && c < 0x7f) ? c : '?';
    return text.size() > 64 ? out + "..." : out;
}

bool parse_section(const v1::SectionSelection& wanted, const std::vector<keplershm_field>& schema,
                   const Limits& limits, Selection& out, std::string& error) {
    const auto kind = kind_named(wanted.name());
    if (!kind) {
        error = fmt::format("unknown section '{}'; known sections: {}", shown(wanted.name()), known_sections());
        return false;
    }
    for (const SectionPlan& plan : out.sections) {
        if (plan.kind.id == kind->id) {
            error = fmt::format("section '{}' is named twice", kind->name);
            return false;
        }
    }
    if (static_cast<uint32_t>(wanted.fields_size()) > limits.max_fields) {
        error = fmt::format("section '{}' names {} fields; at most {}", kind->name, wanted.fields_size(), limits.max_fields);
        return false;
    }
    if (kind->record_type == 0 && wanted.fields_size() != 0) {
        error = fmt::format("section '{}' is raw bytes and has no fields", kind->name);
        return false;
    }
    const std::vector<std::string> known = fields_of(schema, kind->record_type);
    SectionPlan plan{*kind, {}};
    for (const std::string& field : wanted.fields()) {
        if (std::find(known.begin(), known.end(), field) == known.end()) {
            error = fmt::format("unknown field '{}' in section '{}'; known fields: {}", shown(field), kind->name,
                                fmt::join(known, ", "));
            return false;
        }
        plan.fields.push_back(field);
    }
    out.sections.push_back(std::move(plan));
    return true;
}

bool parse_list(const char* what, const google::protobuf::RepeatedPtrField<std::string>& values, const Limits& limits,
                std::unordered_set<std::string>& out, std::string& error) {
    if (static_cast<uint32_t>(values.size()) > limits.max_filter_values) {
        error = fmt::format("filter '{}' has {} values; at most {}", what, values.size(), limits.max_filter_values);
        return false;
    }
    for (const std::string& value : values) {
        if (value.empty() || value.size() > limits.max_value_length) {
            error = fmt::format("filter '{}' value '{}' is {} bytes long; 1 to {} allowed", what, shown(value),
                                value.size(), limits.max_value_length);
            return false;
        }
        out.insert(value);
    }
    return true;
}

}  // namespace

const std::vector<SectionKind>& section_kinds() {
    static const std::vector<SectionKind> kinds{
        {"processes", KEPLERSHM_SECTION_PROCESSES, KEPLERSHM_RECORD_PROCESS},
        {"workloads", KEPLERSHM_SECTION_WORKLOADS, KEPLERSHM_RECORD_WORKLOAD},
        {"zones", KEPLERSHM_SECTION_ZONES, KEPLERSHM_RECORD_ZONE_SAMPLE},
        {"cpus", KEPLERSHM_SECTION_CPUS, KEPLERSHM_RECORD_CPU_SAMPLE},
        {"strings", KEPLERSHM_SECTION_STRINGS, 0},
        {"unaccounted", KEPLERSHM_SECTION_UNACCOUNTED, KEPLERSHM_RECORD_UNACCOUNTED},
        {"estimates", KEPLERSHM_SECTION_ESTIMATES, KEPLERSHM_RECORD_ESTIMATE},
        {"gpu_devices", KEPLERSHM_SECTION_GPU_DEVICES, KEPLERSHM_RECORD_GPU_DEVICE},  // 1.4
        {"gpu_usage", KEPLERSHM_SECTION_GPU_USAGE, KEPLERSHM_RECORD_GPU_USAGE},
    };
    return kinds;
}

std::optional<Selection> parse_selection(const v1::SubscribeRequest& request, const std::vector<keplershm_field>& schema,
                                         const Limits& limits, std::string& error) {
    Selection out;
    if (static_cast<size_t>(request.sections_size()) > section_kinds().size()) {
        error = fmt::format("{} sections requested; there are {}: {}", request.sections_size(), section_kinds().size(),
                            known_sections());
        return std::nullopt;
    }
    for (const v1::SectionSelection& wanted : request.sections())
        if (!parse_section(wanted, schema, limits, out, error)) return std::nullopt;
    if (request.sections().empty())
        for (const SectionKind& kind : section_kinds()) out.sections.push_back({kind, {}});
    const v1::Filter& filter = request.filter();
    if (!parse_list("containers", filter.containers(), limits, out.containers, error) ||
        !parse_list("pods", filter.pods(), limits, out.pods, error) ||
        !parse_list("namespaces", filter.namespaces(), limits, out.namespaces, error)) {
        return std::nullopt;
    }
    if (filter.top_n_by_cpu() > limits.max_top_n) {
        error = fmt::format("top_n_by_cpu {} is above the limit of {}", filter.top_n_by_cpu(), limits.max_top_n);
        return std::nullopt;
    }
    out.top_n = filter.top_n_by_cpu();
    out.from_sequence = request.from_sequence();
    return out;
}

std::vector<keplershm_field> library_schema() {
    uint32_t count = 0;
    keplershm_schema(nullptr, 0, &count);
    std::vector<keplershm_field> fields(count);
    keplershm_schema(fields.data(), count, &count);
    fields.resize(std::min<size_t>(count, fields.size()));
    return fields;
}

}  // namespace kepler::feed
