// The built-in curve (MODELS.md "The built-in curve"), and the helpers every model shares.
#include <algorithm>
#include <cctype>
#include <cmath>

#include "model/node_model.hpp"

namespace kepler::estimate {

NodeFacts node_facts(const keplershm_header& segment) {
    NodeFacts facts;
    facts.cpu_model = std::string(keplershm::get_text(segment.cpu_model));
    facts.cpu_count = segment.cpu_count;
    facts.metric_mask = segment.metric_mask;
    facts.has_meter = segment.zone_count > 0;
    return facts;
}

std::string_view to_string(CpuMatch match) noexcept {
    switch (match) {
        case CpuMatch::exact: return "exact cpu model";
        case CpuMatch::vendor: return "same cpu vendor";
        case CpuMatch::any: return "other cpu";
    }
    return "?";
}

namespace {
std::string vendor_of(std::string_view cpu) {
    std::string lower;
    for (char c : cpu) lower.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
    for (const char* vendor : {"intel", "amd", "arm", "ampere", "apple", "ibm", "qualcomm"}) {
        if (lower.find(vendor) != std::string::npos) return vendor;
    }
    const size_t space = lower.find(' ');
    return lower.substr(0, space);
}
}  // namespace

CpuMatch match_cpu(std::string_view trained_on, std::string_view node_cpu) {
    if (!trained_on.empty() && trained_on == node_cpu) return CpuMatch::exact;
    const std::string a = vendor_of(trained_on);
    if (!a.empty() && a == vendor_of(node_cpu)) return CpuMatch::vendor;
    return CpuMatch::any;
}

namespace {

/// Not thread-safe (NodeModel contract); stateless apart from its parameters.
class CurveModel final : public NodeModel {
public:
    CurveModel(std::string name, CurveParams params) : name_(std::move(name)), params_(params) {}

    std::string_view kind() const noexcept override { return "curve"; }
    std::optional<std::string> refusal(const NodeFacts& node) const override {
        if (node.cpu_count == 0) return "node reports 0 CPUs";
        return std::nullopt;
    }

    std::optional<NodeEnergy> estimate(const FrameInput& in) override {
        const double cpus = in.node.cpu_count;
        if (cpus <= 0) return std::nullopt;
        std::optional<double> busy_ms = in.features[Feature::node_cpu_busy_ms_per_s];
        if (!busy_ms) busy_ms = in.features[Feature::cpu_time_ms_per_s];
        if (!busy_ms) return std::nullopt;
        const double u = std::clamp(*busy_ms / 1000.0 / cpus, 0.0, 1.0);
        const double idle_w = cpus * params_.idle_w;
        const double total_w = cpus * (params_.idle_w + (params_.max_w - params_.idle_w) * u);
        ZoneEnergy zone;
        zone.zone = ZoneKey{ZoneKind::package, kWholeNode};
        zone.total_uj = watts_to_uj(total_w, in.features.interval_s);
        zone.idle_uj = std::min(zone.total_uj, watts_to_uj(idle_w, in.features.interval_s));
        return NodeEnergy{{zone}, name_};
    }

private:
    std::string name_;
    CurveParams params_;
};

}  // namespace

std::unique_ptr<NodeModel> make_curve_model(std::string name, CurveParams params) {
    return std::make_unique<CurveModel>(std::move(name), params);
}

}  // namespace kepler::estimate
