#include "export/csv_export.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace kepler::estimate {

namespace {

/// CSV quoting for text that came from frames.
std::string quote(std::string_view text) {
    std::string out = "\"";
    for (char c : text) {
        if (c == '"') out += "\"\"";
        else if (static_cast<unsigned char>(c) < 0x20) out += ' ';
        else out += c;
    }
    return out + "\"";
}

}  // namespace

std::string format_joules(uint64_t uj) { return fmt::format("{}.{:06}", uj / 1'000'000, uj % 1'000'000); }

CsvExport::CsvExport(const std::string& path) {
    file_ = std::fopen(path.c_str(), "w");
    if (file_ == nullptr) throw std::runtime_error(fmt::format("cannot write {}: {}", path, std::strerror(errno)));
    fmt::print(file_, "sequence,interval_start_ns,interval_end_ns,level,id,name,namespace,zone,package,dynamic_joules,idle_joules,model\n");
}

CsvExport::~CsvExport() {
    if (file_ != nullptr) std::fclose(file_);
}

void CsvExport::flush() { std::fflush(file_); }

void CsvExport::write_interval(const Estimator& est) {
    const Ledger& ledger = est.ledger();
    const uint64_t now = est.last_interval_end_ns();
    const std::string prefix = fmt::format("{},{},{}", est.last_sequence(), est.last_interval_start_ns(), now);
    const std::string model = quote(est.primary_model());
    auto rows = [&](std::string_view level, std::string_view id, std::string_view name, std::string_view ns, const EntityEnergy& e) {
        if (e.last_seen_ns != now) return;  // not present in this interval
        for (size_t z = 0; z < e.interval.size() && z < ledger.zones().size(); ++z) {
            const ZoneKey& zone = ledger.zones()[z];
            fmt::print(file_, "{},{},{},{},{},{},{},{},{},{}\n", prefix, level, quote(id), quote(name), quote(ns), zone_name(zone.kind),
                       socket_label(zone.socket), format_joules(e.interval[z].dynamic_uj), format_joules(e.interval[z].idle_uj), model);
        }
    };
    rows("node", est.node_name(), est.node_name(), "", ledger.node());
    for (const auto& [id, c] : ledger.containers()) rows("container", id, c.container_name, c.namespace_name, c.energy);
    for (const auto& [id, p] : ledger.pods()) rows("pod", id, p.pod_name, p.namespace_name, p.energy);
    for (const auto& [name, n] : ledger.namespaces()) rows("namespace", name, name, name, n);
    for (const auto& [id, v] : ledger.vms()) rows("vm", id, v.vm_name, "", v.energy);
}

}  // namespace kepler::estimate
