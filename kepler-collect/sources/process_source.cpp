#include "sources/process_source.hpp"

#include <algorithm>

#include "support/log/log.hpp"
#include "common/text_io.hpp"
#include "sources/bpf_source.hpp"
#include "sources/procfs_source.hpp"

namespace kepler::collect {

void ProcessActivity::set_comm(std::string_view text) noexcept {
    comm.fill('\0');
    std::copy_n(text.begin(), std::min(text.size(), comm.size() - 1), comm.begin());
}

std::unique_ptr<ProcessSource> make_process_source(const SourceSettings& settings) {
    if (settings.kind == "procfs") return std::make_unique<ProcfsSource>(settings.proc_root);
    BpfOptions bpf;
    bpf.max_processes = settings.bpf_max_processes;
    bpf.max_threads = settings.bpf_max_threads;
    bpf.hardware_counters = settings.hardware_counters;
    if (settings.bpf_attach != "auto") bpf.attach = parse_attach_mode(settings.bpf_attach);
    if (settings.kind == "bpf") return std::make_unique<BpfSource>(bpf, settings.proc_root);
    try {
        return std::make_unique<BpfSource>(bpf, settings.proc_root);
    } catch (const CollectError& e) {
        log_warn("bpf unavailable, using procfs instead: {}", e.what());
        return std::make_unique<ProcfsSource>(settings.proc_root);
    }
}

}  // namespace kepler::collect
