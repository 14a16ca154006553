// What one subscriber asked for: sections and fields, workload filters, top-N, start point. Parsed once
// from the request and checked against the field schema and the server's limits, so that a hostile or
// mistaken request is refused with a message naming what is wrong before anything is sent.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_set>
#include <vector>

#include "keplershm.h"
#include "keplershm_feed/v1/feed.pb.h"

namespace kepler::feed {

namespace v1 = keplershm::feed::v1;

/// Bounds a request and the server's resources (Describe() reports them).
struct Limits {
    uint32_t max_subscribers = 64;
    uint32_t queue_frames = 16;
    uint32_t max_top_n = 1u << 16;
    uint32_t max_filter_values = 256;
    uint32_t max_value_length = 256;  // a pod name can be 253 bytes
    uint32_t max_fields = 64;         // per section
    uint32_t drop_grace_s = 10;       // a dropped subscriber that does not read is cancelled after this
};

/// A section the feed can carry: its wire name, section id and record type (0: raw bytes).
struct SectionKind {
    const char* name;
    uint32_t id;
    uint32_t record_type;
};
/// Every section the feed knows, in section-id order.
[[nodiscard]] const std::vector<SectionKind>& section_kinds();

struct SectionPlan {
    SectionKind kind;
    std::vector<std::string> fields;  // empty: every field of the record
};

struct Selection {
    std::vector<SectionPlan> sections;
    std::unordered_set<std::string> containers, pods, namespaces;
    uint32_t top_n = 0;
    uint64_t from_sequence = 0;

    /// Whether workloads (and the processes pointing to them) are filtered by name.
    [[nodiscard]] bool filters_workloads() const { return !containers.empty() || !pods.empty() || !namespaces.empty(); }
};

/// Checks `request` against `schema` and `limits`; on failure returns nullopt and says why in `error`.
[[nodiscard]] std::optional<Selection> parse_selection(const v1::SubscribeRequest& request,
                                                       const std::vector<keplershm_field>& schema,
                                                       const Limits& limits, std::string& error);

/// The field schema compiled into libkeplershm (used until a segment is attached).
[[nodiscard]] std::vector<keplershm_field> library_schema();

}  // namespace kepler::feed
