// NVIDIA GPUs through NVML: one GPU zone per physical GPU, its energy from the driver's own counter
// (nvmlDeviceGetTotalEnergyConsumption, mJ since the driver loaded), or where a GPU has none, its power
// integrated between the collector's reads (flagged INTEGRATED). Per process: the running compute and
// graphics processes with their memory, and SM time from the driver's utilization samples since the last
// read. MIG instances are devices of their own (their processes; the driver keeps no per-process
// utilization samples for them), each GPU instance's activity measured by mig_activity.hpp (GPM, or
// dcgm-exporter). A GPU that is lost, a driver that restarts its counter, or any NVML error makes that
// GPU's interval invalid and nothing else: counters never step back and the collector keeps running.
#include <algorithm>
#include <cstring>
#include <map>
#include <set>

#include <fmt/format.h>

#include "common/text_io.hpp"
#include "energy/gpu/dcgm_exporter.hpp"
#include "energy/gpu/gpu_source.hpp"
#include "energy/gpu/mig_activity.hpp"
#include "energy/gpu/nvml_library.hpp"
#include "keplershm/keplershm.hpp"
#include "support/log/log.hpp"

namespace kepler::collect {

namespace {

constexpr uint32_t kNone = 0xffffffffu;
// Longest span one utilization sample may stand for: the driver samples several times a second.
constexpr uint64_t kMaxSamplePeriodUs = 2'000'000;
constexpr unsigned kMaxListed = 65536;  // processes or samples one call may return

void set_flag(uint32_t& flags, uint32_t flag, bool on) { flags = on ? (flags | flag) : (flags & ~flag); }

struct Gpu {
    nvml::Device handle = nullptr;
    uint32_t zone = 0;    // index into zones_
    uint32_t record = 0;  // index into devices_
    bool counter = true;  // energy counter, else power integration
    bool have_last = false;
    uint64_t last_value = 0;  // mJ (counter) or mW (power)
    uint64_t last_read_ns = 0;
    ZoneTotal total{"gpu", ceiling_watts(KEPLERSHM_ZONE_GPU)};  // named at discovery
    uint64_t last_seen_us = 0;  // newest utilization sample taken
    nvml::Return last_error = nvml::kSuccess;
    std::vector<std::pair<nvml::Device, uint32_t>> migs;  // MIG handle, its record
    std::unique_ptr<MigActivity> mig_activity;  // its GPU instances' activity, where it is measured
};

class NvmlSource final : public GpuSource {
public:
    NvmlSource(std::unique_ptr<nvml::Library> lib, NvmlSettings settings) : lib_(std::move(lib)), settings_(std::move(settings)) {}
    ~NvmlSource() override { gpus_.clear(); }  // MIG activity frees its GPM buffers while the library is loaded
    NvmlSource(const NvmlSource&) = delete;
    NvmlSource& operator=(const NvmlSource&) = delete;

    /// Finds the GPUs; notes what was left out in `notes`.
    void discover(std::vector<std::string>& notes);
    [[nodiscard]] bool empty() const noexcept { return gpus_.empty(); }

    std::string describe() const override { return "nvml"; }
    const std::vector<keplershm_zone_info>& zones() const noexcept override { return zones_; }
    const std::vector<keplershm_gpu_device>& devices() const noexcept override { return devices_; }

    void read(std::span<keplershm_zone_sample> samples, uint64_t /*frame_end_ns: read now*/) override {
        for (size_t i = 0; i < gpus_.size() && i < samples.size(); ++i) read_energy(gpus_[i], samples[gpus_[i].zone]);
    }

    bool new_devices() override;

    void read_usage(std::vector<GpuProcessUse>& out, uint64_t /*frame_end_ns*/) override {
        out.clear();
        for (Gpu& gpu : gpus_) {
            if (devices_[gpu.record].flags & KEPLERSHM_GPU_LOST) {
                // Not read this interval: its users are unknown, not none (PROTOCOL.md §6.1).
                set_flag(devices_[gpu.record].flags, KEPLERSHM_GPU_USAGE_VALID, false);
                for (const auto& [handle, record] : gpu.migs) {
                    set_flag(devices_[record].flags, KEPLERSHM_GPU_USAGE_VALID | KEPLERSHM_GPU_ACTIVE_VALID, false);
                }
                if (gpu.mig_activity) gpu.mig_activity->forget();
                continue;
            }
            if (gpu.migs.empty()) {
                read_gpu_usage(gpu, out);
            } else {
                uint64_t memory = 0;
                for (const auto& [handle, record] : gpu.migs) memory += read_processes(handle, record, out);
                devices_[gpu.record].memory_used_bytes = memory;
                if (gpu.mig_activity) gpu.mig_activity->read(devices_);
            }
        }
    }

private:
    void add_gpu(unsigned index, nvml::Device handle, std::vector<std::string>& notes);
    void add_migs(Gpu& gpu);
    void add_mig_activity(Gpu& gpu, unsigned index, std::vector<std::string>& notes);
    void read_energy(Gpu& gpu, keplershm_zone_sample& sample);
    bool failed(Gpu& gpu, nvml::Return rc, const char* call);
    [[nodiscard]] std::optional<std::string> uuid_of(nvml::Device handle) const;
    [[nodiscard]] bool in_mig_mode(nvml::Device gpu) const;
    [[nodiscard]] std::vector<nvml::Device> mig_handles(nvml::Device gpu) const;
    [[nodiscard]] std::set<std::string, std::less<>> device_identities() const;
    void read_gpu_usage(Gpu& gpu, std::vector<GpuProcessUse>& out);
    uint64_t read_processes(nvml::Device handle, uint32_t record, std::vector<GpuProcessUse>& out);
    enum class Listing { listed, none_of_this_kind, failed };
    Listing list_processes(nvml::DeviceGetProcessesFn call, nvml::Device handle);
    std::map<uint32_t, uint64_t> sm_busy_ns(Gpu& gpu, bool& measured);

    std::unique_ptr<nvml::Library> lib_;
    NvmlSettings settings_;
    std::unique_ptr<DcgmActivityReader> dcgm_;  // where a MIG GPU without GPM reads dcgm-exporter
    std::vector<keplershm_zone_info> zones_;
    std::vector<keplershm_gpu_device> devices_;
    std::vector<Gpu> gpus_;
    std::vector<nvml::ProcessInfo> processes_;             // scratch of list_processes
    std::vector<nvml::ProcessUtilizationSample> samples_;  // scratch of sm_busy_ns
    std::set<std::string, std::less<>> seen_;              // device_identities() at discovery
};

void NvmlSource::discover(std::vector<std::string>& notes) {
    unsigned count = 0;
    if (const nvml::Return rc = lib_->device_count(&count); rc != nvml::kSuccess) {
        notes.push_back(fmt::format("nvmlDeviceGetCount_v2: {}", lib_->describe(rc)));
        return;
    }
    for (unsigned i = 0; i < count && zones_.size() < KEPLERSHM_MAX_ZONES; ++i) {
        nvml::Device handle = nullptr;
        if (const nvml::Return rc = lib_->handle_by_index(i, &handle); rc != nvml::kSuccess) {
            notes.push_back(fmt::format("GPU {}: no handle: {}", i, lib_->describe(rc)));
            continue;
        }
        add_gpu(i, handle, notes);
    }
    seen_ = device_identities();
}

std::optional<std::string> NvmlSource::uuid_of(nvml::Device handle) const {
    char text[nvml::kUuidBufferSize] = {};
    if (lib_->uuid == nullptr || lib_->uuid(handle, text, sizeof text) != nvml::kSuccess) return std::nullopt;
    return std::string(text, strnlen(text, sizeof text));
}

bool NvmlSource::in_mig_mode(nvml::Device gpu) const {
    unsigned current = 0, pending = 0;
    return lib_->mig_mode != nullptr && lib_->mig_mode(gpu, &current, &pending) == nvml::kSuccess && current == nvml::kMigEnabled;
}

/// The handles of a MIG-enabled GPU's instances that the driver gives (none on a driver without MIG calls).
std::vector<nvml::Device> NvmlSource::mig_handles(nvml::Device gpu) const {
    std::vector<nvml::Device> out;
    unsigned slots = 0;
    if (lib_->max_mig_devices == nullptr || lib_->mig_handle == nullptr || lib_->max_mig_devices(gpu, &slots) != nvml::kSuccess) {
        return out;
    }
    for (unsigned m = 0; m < std::min(slots, 64u); ++m) {
        nvml::Device mig = nullptr;
        if (lib_->mig_handle(gpu, m, &mig) == nvml::kSuccess) out.push_back(mig);
    }
    return out;
}

/// What names the node's devices now: each GPU's UUID, "mig:<uuid>" or "whole:<uuid>" for its mode, and
/// its MIG instances' UUIDs. About a hundred cheap calls on an 8-GPU node.
std::set<std::string, std::less<>> NvmlSource::device_identities() const {
    std::set<std::string, std::less<>> out;
    unsigned count = 0;
    if (lib_->device_count(&count) != nvml::kSuccess) return out;
    for (unsigned i = 0; i < count && i < KEPLERSHM_MAX_ZONES; ++i) {
        nvml::Device handle = nullptr;
        if (lib_->handle_by_index(i, &handle) != nvml::kSuccess) continue;
        const std::optional<std::string> uuid = uuid_of(handle);
        if (!uuid) continue;  // cannot tell: never a reason to start over
        out.insert(*uuid);
        const bool mig = in_mig_mode(handle);
        out.insert((mig ? "mig:" : "whole:") + *uuid);  // a change of mode either way changes the devices
        if (!mig) continue;
        for (const nvml::Device instance : mig_handles(handle)) {
            if (const std::optional<std::string> id = uuid_of(instance)) out.insert(*id);
        }
    }
    return out;
}

bool NvmlSource::new_devices() {
    const std::set<std::string, std::less<>> now = device_identities();
    return std::any_of(now.begin(), now.end(), [&](const std::string& id) { return !seen_.contains(id); });
}

void NvmlSource::add_gpu(unsigned index, nvml::Device handle, std::vector<std::string>& notes) {
    Gpu gpu;
    gpu.handle = handle;
    gpu.total = ZoneTotal(fmt::format("gpu-{} (NVML)", index), ceiling_watts(KEPLERSHM_ZONE_GPU));
    unsigned long long mj = 0;
    unsigned mw = 0;
    if (lib_->total_energy != nullptr && lib_->total_energy(handle, &mj) == nvml::kSuccess) {
        gpu.counter = true;
    } else if (lib_->power_usage != nullptr && lib_->power_usage(handle, &mw) == nvml::kSuccess) {
        gpu.counter = false;
        notes.push_back(fmt::format("GPU {}: no energy counter (older GPU or driver): its power is integrated", index));
    } else {
        notes.push_back(fmt::format("GPU {}: neither its energy nor its power can be read: left out", index));
        return;
    }
    keplershm_zone_info zone{};
    keplershm::set_text(zone.name, fmt::format("gpu-{}", index));
    zone.kind = KEPLERSHM_ZONE_GPU;
    zone.socket = index;
    zone.power_source = KEPLERSHM_POWER_NVML;
    gpu.zone = static_cast<uint32_t>(zones_.size());
    zones_.push_back(zone);

    keplershm_gpu_device d{};
    d.zone_index = gpu.zone;
    d.vendor = KEPLERSHM_GPU_NVIDIA;
    d.device_index = index;
    d.parent = d.gpu_instance_id = d.compute_instance_id = kNone;
    if (const std::optional<std::string> uuid = uuid_of(handle)) keplershm::set_text(d.uuid, *uuid);
    char name[nvml::kNameBufferSize] = {};
    if (lib_->name != nullptr && lib_->name(handle, name, sizeof name) == nvml::kSuccess) keplershm::set_text(d.name, name);
    nvml::PciInfo pci{};
    if (lib_->pci_info != nullptr && lib_->pci_info(handle, &pci) == nvml::kSuccess) {
        keplershm::set_text(d.pci_bus_id, std::string_view(pci.busId, strnlen(pci.busId, sizeof pci.busId)));
    }
    unsigned limit_mw = 0;
    if (lib_->power_limit != nullptr && lib_->power_limit(handle, &limit_mw) == nvml::kSuccess) d.power_limit_mw = limit_mw;
    if (in_mig_mode(handle)) d.flags |= KEPLERSHM_GPU_MIG_ENABLED;
    gpu.record = static_cast<uint32_t>(devices_.size());
    devices_.push_back(d);
    if (d.flags & KEPLERSHM_GPU_MIG_ENABLED) {
        add_migs(gpu);
        add_mig_activity(gpu, index, notes);
    }
    gpus_.push_back(std::move(gpu));
}

/// A MIG-enabled GPU's instances, each a device record after its GPU (the layout at discovery: the
/// segment's devices are fixed, and a new layout is a new generation, new_devices()).
void NvmlSource::add_migs(Gpu& gpu) {
    for (const nvml::Device mig : mig_handles(gpu.handle)) {
        keplershm_gpu_device d = devices_[gpu.record];
        d.flags = KEPLERSHM_GPU_MIG_INSTANCE;
        d.parent = gpu.record;
        std::memset(d.uuid, 0, sizeof d.uuid);
        if (const std::optional<std::string> uuid = uuid_of(mig)) keplershm::set_text(d.uuid, *uuid);
        unsigned id = kNone;
        if (lib_->gpu_instance_id != nullptr && lib_->gpu_instance_id(mig, &id) == nvml::kSuccess) d.gpu_instance_id = id;
        if (lib_->compute_instance_id != nullptr && lib_->compute_instance_id(mig, &id) == nvml::kSuccess) {
            d.compute_instance_id = id;
        }
        d.power_limit_mw = 0;  // the GPU's limit, not the instance's
        gpu.migs.emplace_back(mig, static_cast<uint32_t>(devices_.size()));
        devices_.push_back(d);
    }
}

/// Its MIG instances' activity, where it can be measured (mig_activity.hpp); a note says how.
void NvmlSource::add_mig_activity(Gpu& gpu, unsigned index, std::vector<std::string>& notes) {
    std::vector<std::pair<unsigned, uint32_t>> records;
    for (const auto& [handle, record] : gpu.migs) {
        if (devices_[record].gpu_instance_id != kNone) records.emplace_back(devices_[record].gpu_instance_id, record);
    }
    auto dcgm = [this]() -> DcgmActivityReader* {
        if (settings_.dcgm_endpoint.empty()) return nullptr;
        if (!dcgm_) dcgm_ = std::make_unique<DcgmActivityReader>(DcgmSettings{settings_.dcgm_endpoint, settings_.dcgm_refresh});
        return dcgm_.get();
    };
    std::string note;
    gpu.mig_activity = MigActivity::make(*lib_, gpu.handle, index, records, dcgm, note);
    if (!note.empty()) notes.push_back(fmt::format("GPU {}: {}", index, note));
}

/// An NVML call failed for this GPU: the interval is invalid and the next good reading is a new baseline
/// (the energy of the gap is not known). Said once per change of error, not every interval.
bool NvmlSource::failed(Gpu& gpu, nvml::Return rc, const char* call) {
    keplershm_gpu_device& d = devices_[gpu.record];
    const bool lost = rc == nvml::kErrorGpuIsLost;
    for (const auto& [handle, record] : gpu.migs) set_flag(devices_[record].flags, KEPLERSHM_GPU_LOST, lost);
    set_flag(d.flags, KEPLERSHM_GPU_LOST, lost);
    if (rc == nvml::kSuccess) {
        if (gpu.last_error != nvml::kSuccess) log_info("GPU {}: readable again", d.device_index);
        gpu.last_error = rc;
        return false;
    }
    if (rc != gpu.last_error) log_warn("GPU {} ({}): {}: {}", d.device_index, keplershm::get_text(d.uuid), call, lib_->describe(rc));
    gpu.last_error = rc;
    gpu.have_last = false;
    return true;
}

void NvmlSource::read_energy(Gpu& gpu, keplershm_zone_sample& sample) {
    unsigned long long value = 0;
    nvml::Return rc = nvml::kSuccess;
    if (gpu.counter) {
        rc = lib_->total_energy(gpu.handle, &value);
    } else {
        unsigned mw = 0;
        rc = lib_->power_usage(gpu.handle, &mw);
        value = mw;
    }
    const uint64_t now = monotonic_now_ns();
    sample.read_time_ns = now;
    gpu.total.publish_invalid(0, sample);
    if (failed(gpu, rc, gpu.counter ? "nvmlDeviceGetTotalEnergyConsumption" : "nvmlDeviceGetPowerUsage")) return;
    const bool baseline = !gpu.have_last;
    const uint64_t last = gpu.last_value, elapsed = now - gpu.last_read_ns;
    gpu.have_last = true;
    gpu.last_value = value;
    gpu.last_read_ns = now;
    if (baseline) return;  // first reading, or first after a failure: a baseline, not yet a delta
    if (!gpu.counter) {
        const double average_mw = (static_cast<double>(last) + static_cast<double>(value)) / 2.0;
        gpu.total.publish_step(average_mw * static_cast<double>(elapsed) / 1e6, elapsed, KEPLERSHM_ZONE_INTEGRATED, sample);  // mW·ns → µJ
        return;
    }
    if (value < last) {  // the driver reloaded and its counter started over: this interval is unknown
        log_warn("GPU {}: energy counter went back from {} to {} mJ (driver reloaded): interval left out",
                 devices_[gpu.record].device_index, last, value);
        return;
    }
    gpu.total.publish_step(static_cast<double>(value - last) * 1000.0, elapsed, 0, sample);  // mJ → µJ; ZoneTotal bounds it
}

/// Fills processes_ from one of the *RunningProcesses_v3 calls (its two-call size protocol). A call the
/// driver lacks or does not support for this device lists no process of its kind; any other error leaves
/// the device's users unknown.
NvmlSource::Listing NvmlSource::list_processes(nvml::DeviceGetProcessesFn call, nvml::Device handle) {
    processes_.clear();
    if (call == nullptr) return Listing::none_of_this_kind;
    for (int attempt = 0; attempt < 3; ++attempt) {
        unsigned count = static_cast<unsigned>(processes_.capacity() == 0 ? 64 : processes_.capacity());
        processes_.resize(count);
        const nvml::Return rc = call(handle, &count, processes_.data());
        if (rc == nvml::kSuccess) {
            processes_.resize(std::min<size_t>(count, processes_.size()));
            return Listing::listed;
        }
        processes_.clear();
        if (rc == nvml::kErrorNotSupported) return Listing::none_of_this_kind;
        if (rc != nvml::kErrorInsufficientSize || count > kMaxListed) return Listing::failed;
        processes_.reserve(count + count / 4 + 8);  // more may start between the two calls
    }
    return Listing::failed;
}

/// The running processes of a device (a GPU outside MIG, or a MIG instance) into `out`, each flagged
/// compute/graphics with its memory; returns the memory they hold. Sets the record's USAGE_VALID when the
/// driver listed its processes and no list failed.
uint64_t NvmlSource::read_processes(nvml::Device handle, uint32_t record, std::vector<GpuProcessUse>& out) {
    std::map<uint32_t, GpuProcessUse> users;
    bool answered = false, failed = false;
    for (const auto& [call, flag] : {std::pair{lib_->compute_processes, KEPLERSHM_GPU_USE_COMPUTE},
                                     std::pair{lib_->graphics_processes, KEPLERSHM_GPU_USE_GRAPHICS}}) {
        const Listing listing = list_processes(call, handle);
        failed |= listing == Listing::failed;
        if (listing != Listing::listed) continue;
        answered = true;
        for (const nvml::ProcessInfo& p : processes_) {
            GpuProcessUse& use = users[p.pid];
            use.pid = p.pid;
            use.device = record;
            use.flags |= flag;
            // Both lists give the same memory for a process with both contexts; "not available" is no number.
            if (p.usedGpuMemory != nvml::kValueNotAvailable) use.memory_bytes = std::max<uint64_t>(use.memory_bytes, p.usedGpuMemory);
        }
    }
    keplershm_gpu_device& d = devices_[record];
    set_flag(d.flags, KEPLERSHM_GPU_USAGE_VALID, answered && !failed);
    uint64_t memory = 0;
    for (const auto& [pid, use] : users) {
        memory += use.memory_bytes;
        out.push_back(use);
    }
    d.memory_used_bytes = memory;
    return memory;
}

/// SM time per process since the previous call, from the driver's utilization samples: each sample's
/// SM share times the span since the sample before it (the driver samples all processes at once, so a
/// span runs from one sampling time to the next). `measured` is false when the driver keeps no samples,
/// and until the first sample the collector sees (whose predecessors reach back before it started).
std::map<uint32_t, uint64_t> NvmlSource::sm_busy_ns(Gpu& gpu, bool& measured) {
    std::map<uint32_t, uint64_t> busy;
    measured = false;
    if (lib_->process_utilization == nullptr) return busy;
    const bool first = gpu.last_seen_us == 0;
    samples_.resize(std::max<size_t>(samples_.size(), 256));
    unsigned count = static_cast<unsigned>(samples_.size());
    nvml::Return rc = lib_->process_utilization(gpu.handle, samples_.data(), &count, gpu.last_seen_us);
    if (rc == nvml::kErrorInsufficientSize && count <= kMaxListed) {
        samples_.resize(count + count / 4 + 8);
        count = static_cast<unsigned>(samples_.size());
        rc = lib_->process_utilization(gpu.handle, samples_.data(), &count, gpu.last_seen_us);
    }
    if (rc != nvml::kSuccess && rc != nvml::kErrorNotFound) return busy;
    std::span<nvml::ProcessUtilizationSample> taken(samples_.data(), rc == nvml::kSuccess ? std::min<size_t>(count, samples_.size()) : 0);
    std::sort(taken.begin(), taken.end(), [](const auto& a, const auto& b) { return a.timeStamp < b.timeStamp; });
    if (first) {
        // The samples reach back before this collector: only where to start from is kept, in the driver's
        // own time stamps (never mixed with this process's clock). Until the driver has a sample there is
        // no starting point, and nothing is measured.
        if (!taken.empty()) gpu.last_seen_us = taken.back().timeStamp;
        return busy;
    }
    measured = true;  // NOT_FOUND: nothing ran since the last call, all zero
    uint64_t span_start = gpu.last_seen_us;
    uint64_t sample_time = 0;
    for (const nvml::ProcessUtilizationSample& s : taken) {
        if (s.timeStamp <= gpu.last_seen_us) continue;
        if (s.timeStamp != sample_time) {  // the next sampling time: its span starts at the one before
            if (sample_time != 0) span_start = sample_time;
            sample_time = s.timeStamp;
        }
        const uint64_t span_us = std::min<uint64_t>(s.timeStamp - span_start, kMaxSamplePeriodUs);
        busy[s.pid] += uint64_t{std::min(s.smUtil, 100u)} * span_us * 10;  // % × µs → ns
    }
    if (sample_time != 0) gpu.last_seen_us = sample_time;
    return busy;
}

void NvmlSource::read_gpu_usage(Gpu& gpu, std::vector<GpuProcessUse>& out) {
    const size_t begin = out.size();
    read_processes(gpu.handle, gpu.record, out);
    bool measured = false;
    std::map<uint32_t, uint64_t> busy = sm_busy_ns(gpu, measured);
    if (!measured) return;
    for (size_t i = begin; i < out.size(); ++i) {
        const auto it = busy.find(out[i].pid);
        out[i].flags |= KEPLERSHM_GPU_USE_BUSY_VALID;
        if (it == busy.end()) continue;
        out[i].busy_ns = it->second;
        busy.erase(it);
    }
    // Sampled busy but no longer running (it ended since): it used the GPU in this interval all the same.
    for (const auto& [pid, ns] : busy) {
        out.push_back(GpuProcessUse{pid, gpu.record, ns, 0, KEPLERSHM_GPU_USE_BUSY_VALID});
    }
}

}  // namespace

bool nvml_finds_gpus(const NvmlSettings& settings) {
    try {
        NvmlSettings quiet = settings;
        quiet.dcgm_endpoint.clear();  // a probe starts no reader
        NvmlSource probe(nvml::Library::load(settings.library), quiet);
        std::vector<std::string> notes;
        probe.discover(notes);
        return !probe.empty();  // a GPU make_nvml_source would publish, not one it leaves out
    } catch (const nvml::Unavailable&) {
        return false;
    }
}

std::unique_ptr<GpuSource> make_nvml_source(const NvmlSettings& settings, std::string& why) {
    std::unique_ptr<nvml::Library> lib;
    try {
        lib = nvml::Library::load(settings.library);
    } catch (const nvml::Unavailable& e) {
        why = e.what();
        return nullptr;
    }
    const std::vector<std::string> missing = lib->missing();
    const std::string driver = lib->driver_version();
    auto source = std::make_unique<NvmlSource>(std::move(lib), settings);
    std::vector<std::string> notes;
    source->discover(notes);
    for (const std::string& note : notes) log_info("nvml: {}", note);
    if (!missing.empty()) log_info("nvml: driver {} lacks {}: those features are off", driver, fmt::join(missing, ", "));
    if (source->empty()) {
        why = notes.empty() ? "NVML found no GPU" : "NVML found no GPU it can read";
        return nullptr;
    }
    log_info("nvml: driver {}, {} GPU(s)", driver.empty() ? "(version unknown)" : driver, source->zones().size());
    return source;
}

}  // namespace kepler::collect
