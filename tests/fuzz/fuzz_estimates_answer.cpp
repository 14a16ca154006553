// libFuzzer: PROTOCOL.md §8's answers of an external model as the estimator reads them
// (kepler-estimate/external/estimates_answer.cpp over keplershm::estimates_refusal). The input chooses the
// estimates segment's kind and declared zones, the frame's answered id and interval, and the rows (64
// bytes each, as a validated frame's ESTIMATES section holds them). Either a refusal with a reason, or an
// answer with finite non-negative joules per distinct zone kind and every row counted once. A crash or an
// exception is a finding (parse_answer documents none).
#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <set>
#include <variant>
#include <vector>

#include "external/estimates_answer.hpp"
#include "keplershm/keplershm.hpp"

namespace {

void require(bool holds) {
    if (!holds) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace kepler::estimate;
    FuzzedDataProvider in(data, size);
    auto segment = std::make_unique<keplershm_header>();  // zeroed
    segment->segment_kind = in.ConsumeBool() ? uint32_t{KEPLERSHM_SEGMENT_ESTIMATES} : in.ConsumeIntegral<uint32_t>();
    segment->zone_count = in.ConsumeIntegralInRange<uint32_t>(0, KEPLERSHM_MAX_ZONES + 2);
    for (uint32_t i = 0; i < std::min<uint32_t>(segment->zone_count, KEPLERSHM_MAX_ZONES); ++i) {
        segment->zones[i].kind = in.ConsumeIntegralInRange<uint32_t>(0, KEPLERSHM_ZONE_OTHER + 1);
    }
    keplershm_frame frame{};
    frame.producer_generation = in.ConsumeIntegral<uint64_t>();
    frame.producer_sequence = in.ConsumeIntegral<uint64_t>();
    frame.interval_start_ns = in.ConsumeIntegral<uint64_t>();
    frame.interval_end_ns = in.ConsumeIntegral<uint64_t>();
    const std::vector<uint8_t> bytes = in.ConsumeRemainingBytes<uint8_t>();
    std::vector<keplershm_estimate> rows(bytes.size() / sizeof(keplershm_estimate));
    if (!rows.empty()) std::memcpy(rows.data(), bytes.data(), rows.size() * sizeof(keplershm_estimate));

    keplershm::FrameView view;
    keplershm_view& raw = view.raw();
    raw.frame = &frame;
    raw.segment = segment.get();
    raw.base = reinterpret_cast<const uint8_t*>(rows.data());
    raw.section_count = 1;
    raw.sections[0] = keplershm_section{KEPLERSHM_SECTION_ESTIMATES, sizeof(keplershm_estimate), 0,
                                        static_cast<uint32_t>(rows.size())};

    const std::variant<EstimatesAnswer, RejectedAnswer> result = parse_answer(view);
    if (const auto* refused = std::get_if<RejectedAnswer>(&result)) {
        require(!refused->reason.empty());
        return 0;
    }
    const EstimatesAnswer& answer = std::get<EstimatesAnswer>(result);
    require(answer.frame.generation == frame.producer_generation && answer.frame.sequence == frame.producer_sequence);
    require(answer.frame.generation != 0 && answer.frame.sequence != 0);
    require(!answer.zones.empty() && answer.workload_rows + answer.process_rows < rows.size());  // a node row at least
    std::set<ZoneKind> kinds;
    for (const auto& [kind, joules] : answer.zones) {
        require(kinds.insert(kind).second);
        require(std::isfinite(joules) && joules >= 0);
    }
    return 0;
}
