// AMD and Intel GPUs through the kernel alone, no vendor library: each DRM card (/sys/class/drm/cardN)
// whose driver is amdgpu, i915, xe (or nouveau) is a device; its hwmon meter (energy1_input, else power1_average or
// power1_input, integrated) is its GPU zone; and who used it comes from the kernel's DRM client usage
// stats in /proc/<pid>/fdinfo (engine time in ns, or xe's busy cycles over the GPU timestamp), the same
// files nvtop reads. A process's DRM file descriptors are found by their link to /dev/dri/ and looked up
// again every few seconds (or when the pid is new), so an interval reads only the fdinfo of GPU users.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <map>

#include <fmt/format.h>

#include "common/text_io.hpp"
#include "energy/energy.hpp"
#include "energy/gpu/drm_fdinfo.hpp"
#include "energy/gpu/gpu_source.hpp"
#include "keplershm/keplershm.hpp"
#include "support/log/log.hpp"

namespace kepler::collect {

namespace {

constexpr uint32_t kNone = 0xffffffffu;
constexpr uint64_t kFdRescanNs = 5'000'000'000ull;  // how stale a process's list of DRM descriptors may be
constexpr uint64_t kMaxEnginesPerClient = 64;       // bound on a client's busy time: engines × interval

struct Card {
    uint32_t number = 0;
    std::string pdev;     // PCI address, as drm-pdev names it
    uint32_t record = 0;  // index into devices_
};

/// A process's DRM descriptors, as found at its last scan.
struct ProcessFds {
    uint64_t identity = 0;  // ctime of /proc/<pid>: a reused pid is another process
    uint64_t scanned_ns = 0;  // 0: never scanned (its descriptors are not known yet)
    std::vector<std::string> drm_fds;
    bool present = false;
    bool denied = false;  // its descriptors could not be listed (another user's process, no privilege)
};

struct ClientKey {
    std::string pdev;
    uint64_t client_id = 0;
    auto operator<=>(const ClientKey&) const = default;
};

struct ClientCounters {
    uint64_t engine_ns = 0;
    uint64_t cycles = 0;
    uint64_t total_cycles = 0;
};

uint32_t vendor_of_driver(std::string_view driver) {
    if (driver == "amdgpu") return KEPLERSHM_GPU_AMD;
    if (driver == "i915" || driver == "xe") return KEPLERSHM_GPU_INTEL;
    if (driver == "nouveau") return KEPLERSHM_GPU_NVIDIA;  // the open driver: no NVML, its hwmon meter
    return KEPLERSHM_GPU_VENDOR_UNKNOWN;
}

/// "KEY=value" from a uevent file.
std::string uevent_value(std::string_view uevent, std::string_view key) {
    for (std::string_view line : split_lines(uevent)) {
        if (starts_with(line, key) && line.size() > key.size() && line[key.size()] == '=') return std::string(line.substr(key.size() + 1));
    }
    return {};
}

/// The card's meter: energy1_input (µJ) where the driver counts energy (xe), else its power (µW).
std::optional<MeterZone> card_meter(const std::string& device_dir) {
    const std::string hwmon = device_dir + "/hwmon";
    for (const std::string& entry : list_directory(hwmon)) {
        const std::string dir = hwmon + "/" + entry;
        MeterZone zone;
        for (const char* file : {"energy1_input", "power1_average", "power1_input"}) {
            const std::string path = dir + "/" + file;
            const ReadResult value = read_text_file(path, 64);
            if (!value.ok() || !parse_u64(value.text)) continue;
            (std::string_view(file) == "energy1_input" ? zone.energy_path : zone.power_path) = path;
            zone.origin = fmt::format("{}/{}", entry, file);
            return zone;
        }
    }
    return std::nullopt;
}

class DrmSource final : public GpuSource {
public:
    explicit DrmSource(DrmSettings settings) : settings_(std::move(settings)) {}

    void discover(std::vector<std::string>& notes);
    [[nodiscard]] bool empty() const noexcept { return cards_.empty(); }

    std::string describe() const override { return "drm"; }
    const std::vector<keplershm_zone_info>& zones() const noexcept override { return meters_ ? meters_->zones() : no_zones_; }
    const std::vector<keplershm_gpu_device>& devices() const noexcept override { return devices_; }
    void read(std::span<keplershm_zone_sample> samples, uint64_t frame_end_ns) override {
        if (meters_) meters_->read(samples, frame_end_ns);
    }
    void read_usage(std::vector<GpuProcessUse>& out, uint64_t frame_end_ns) override;
    /// A card discovery would publish now that this source does not (by driver and PCI address).
    bool new_devices() override {
        DrmSource now(settings_);
        std::vector<std::string> notes;
        now.discover(notes);
        return std::any_of(now.devices_.begin(), now.devices_.end(), [&](const keplershm_gpu_device& d) {
            return std::none_of(devices_.begin(), devices_.end(), [&](const keplershm_gpu_device& known) {
                return keplershm::get_text(known.uuid) == keplershm::get_text(d.uuid);
            });
        });
    }

private:
    void add_card(uint32_t number, const std::string& device_dir, std::vector<MeterZone>& meters, std::vector<std::string>& notes);
    /// Looks at `p`'s descriptors, at most `budget` of them; returns how many it looked at.
    size_t rescan_fds(uint32_t pid, ProcessFds& p, uint64_t now, size_t budget);
    /// Refreshes the descriptor lists that are due, within settings_.fd_budget: never-scanned processes
    /// first, then the stalest. Returns whether every present process has been scanned at least once.
    bool rescan_due(uint64_t now);
    const Card* card_of(std::string_view pdev) const;
    void add_client(uint32_t pid, const DrmClient& client, uint64_t interval_ns, std::map<ClientKey, ClientCounters>& seen,
                    std::map<std::pair<uint32_t, uint32_t>, GpuProcessUse>& uses);

    DrmSettings settings_;
    std::vector<Card> cards_;
    std::vector<keplershm_gpu_device> devices_;
    std::unique_ptr<EnergySource> meters_;  // the cards' hwmon meters, read as sysfs zones
    std::vector<keplershm_zone_info> no_zones_;
    std::map<uint32_t, ProcessFds> processes_;  // by pid: a dup'd client counts for the lowest pid holding it
    std::map<ClientKey, ClientCounters> clients_;            // counters at the previous scan
    uint64_t last_scan_ns_ = 0;
    bool warned_denied_ = false;
};

void DrmSource::discover(std::vector<std::string>& notes) {
    const std::string drm = settings_.sysfs_root + "/class/drm";
    std::vector<MeterZone> meters;
    for (const std::string& entry : list_directory(drm)) {
        // cardN only: cardN-DP-1 and the like are connectors, renderDN the same device again.
        const std::optional<uint64_t> number = starts_with(entry, "card") ? parse_u64(std::string_view(entry).substr(4)) : std::nullopt;
        if (!number || *number > 4096) continue;
        add_card(static_cast<uint32_t>(*number), drm + "/" + entry + "/device", meters, notes);
    }
    if (!meters.empty()) meters_ = make_sysfs_source(std::move(meters));
}

void DrmSource::add_card(uint32_t number, const std::string& device_dir, std::vector<MeterZone>& meters,
                         std::vector<std::string>& notes) {
    const ReadResult uevent = read_text_file(device_dir + "/uevent", 16 * 1024);
    if (!uevent.ok()) return;
    const std::string driver = uevent_value(uevent.text, "DRIVER");
    const uint32_t vendor = vendor_of_driver(driver);
    if (vendor == KEPLERSHM_GPU_VENDOR_UNKNOWN) {
        if (!driver.empty()) notes.push_back(fmt::format("card{} ({}): not a driver read through the kernel (NVIDIA: NVML)", number, driver));
        return;
    }
    keplershm_gpu_device d{};
    d.vendor = vendor;
    d.device_index = number;
    d.parent = d.gpu_instance_id = d.compute_instance_id = kNone;
    d.zone_index = kNone;
    const std::string pdev = uevent_value(uevent.text, "PCI_SLOT_NAME");
    keplershm::set_text(d.pci_bus_id, pdev);
    const ReadResult product = read_text_file(device_dir + "/product_name", 256);  // amdgpu, where the board says
    const std::string_view product_name = product.ok() ? trim(product.text) : std::string_view();
    keplershm::set_text(d.name, !product_name.empty() ? std::string(product_name)
                                                      : fmt::format("{} {}", driver, uevent_value(uevent.text, "PCI_ID")));
    // The kernel has no GPU UUID; the PCI address names the device as uniquely on one node.
    keplershm::set_text(d.uuid, fmt::format("{}-{}", driver, pdev));
    if (std::optional<MeterZone> meter = card_meter(device_dir)) {
        keplershm::set_text(meter->info.name, fmt::format("gpu-{}", number));
        meter->info.kind = KEPLERSHM_ZONE_GPU;
        meter->info.socket = number;
        meter->info.power_source = KEPLERSHM_POWER_HWMON;
        d.zone_index = static_cast<uint32_t>(meters.size());
        meters.push_back(std::move(*meter));
    } else {
        notes.push_back(fmt::format("card{} ({}): no hwmon energy or power file: its use is published, its energy is not", number, driver));
    }
    cards_.push_back(Card{number, pdev, static_cast<uint32_t>(devices_.size())});
    devices_.push_back(d);
}

const Card* DrmSource::card_of(std::string_view pdev) const {
    for (const Card& c : cards_) {
        if (c.pdev == pdev) return &c;
    }
    return nullptr;
}

/// The descriptors of `pid` that are DRM device files (their link names /dev/dri/...), when they fit in
/// `budget`; a process with more descriptors than the whole budget has its first ones looked at (a GPU is
/// opened early), one that only outgrows what is left waits for the next read (0 returned).
size_t DrmSource::rescan_fds(uint32_t pid, ProcessFds& p, uint64_t now, size_t budget) {
    const std::string fd_dir = fmt::format("{}/{}/fd", settings_.proc_root, pid);
    const std::vector<std::string> fds = list_directory(fd_dir);
    if (fds.size() > budget && budget < settings_.fd_budget) return 0;
    p.drm_fds.clear();
    p.scanned_ns = now;
    p.denied = access(fd_dir.c_str(), R_OK | X_OK) != 0 && (errno == EACCES || errno == EPERM);
    const size_t looked = std::min(fds.size(), budget);
    for (size_t i = 0; i < looked; ++i) {
        char target[64];
        const ssize_t n = readlink((fd_dir + "/" + fds[i]).c_str(), target, sizeof target);
        if (n > 0 && starts_with(std::string_view(target, static_cast<size_t>(n)), "/dev/dri/")) p.drm_fds.push_back(fds[i]);
    }
    return std::max<size_t>(looked, 1);
}

bool DrmSource::rescan_due(uint64_t now) {
    struct Due {
        uint64_t scanned_ns;  // 0 (never) sorts first
        uint32_t pid;
        ProcessFds* fds;
    };
    std::vector<Due> due;  // in pid order (processes_ is a map): stable sorting keeps the lower pid first
    for (auto& [pid, p] : processes_) {
        if (p.present && (p.scanned_ns == 0 || now - p.scanned_ns >= kFdRescanNs)) due.push_back({p.scanned_ns, pid, &p});
    }
    std::stable_sort(due.begin(), due.end(), [](const Due& a, const Due& b) { return a.scanned_ns < b.scanned_ns; });
    size_t left = settings_.fd_budget;
    for (const Due& d : due) {
        const size_t looked = left == 0 ? 0 : rescan_fds(d.pid, *d.fds, now, left);
        if (looked == 0) break;  // the rest wait for the next read
        left -= std::min(left, looked);
    }
    return std::none_of(processes_.begin(), processes_.end(), [](const auto& e) { return e.second.present && e.second.scanned_ns == 0; });
}

void DrmSource::add_client(uint32_t pid, const DrmClient& client, uint64_t interval_ns, std::map<ClientKey, ClientCounters>& seen,
                           std::map<std::pair<uint32_t, uint32_t>, GpuProcessUse>& uses) {
    const Card* card = card_of(client.pdev);
    if (card == nullptr) return;
    ClientKey key{client.pdev, client.client_id};
    // A client is one open of the device; dup'd or inherited descriptors show it again: counted once,
    // for the first process seen holding it.
    if (seen.contains(key)) return;
    const ClientCounters now{client.engine_ns, client.cycles, client.total_cycles};
    seen.emplace(key, now);
    GpuProcessUse& use = uses[{pid, card->record}];
    use.pid = pid;
    use.device = card->record;
    use.memory_bytes += client.memory_bytes;
    use.flags |= KEPLERSHM_GPU_USE_GRAPHICS;  // DRM does not tell compute from graphics contexts
    const auto before = clients_.find(key);
    if (before == clients_.end() || interval_ns == 0) return;  // a new client: this scan is its baseline
    uint64_t busy = 0;
    if (client.has_engine_ns) {
        busy = now.engine_ns >= before->second.engine_ns ? now.engine_ns - before->second.engine_ns : 0;
    } else if (client.has_cycles && now.total_cycles > before->second.total_cycles && now.cycles >= before->second.cycles) {
        const double share = static_cast<double>(now.cycles - before->second.cycles) /
                             static_cast<double>(now.total_cycles - before->second.total_cycles);
        busy = static_cast<uint64_t>(share * static_cast<double>(interval_ns));
    } else {
        return;  // no engine figures from this driver
    }
    use.busy_ns += std::min(busy, kMaxEnginesPerClient * interval_ns);
    use.flags |= KEPLERSHM_GPU_USE_BUSY_VALID;
}

void DrmSource::read_usage(std::vector<GpuProcessUse>& out, uint64_t /*frame_end_ns*/) {
    out.clear();
    const uint64_t now = monotonic_now_ns();
    const uint64_t interval_ns = last_scan_ns_ != 0 ? now - last_scan_ns_ : 0;
    last_scan_ns_ = now;
    for (auto& [_, p] : processes_) p.present = false;
    std::map<ClientKey, ClientCounters> seen;
    std::map<std::pair<uint32_t, uint32_t>, GpuProcessUse> uses;  // by (pid, device)
    for (const std::string& pid : list_directory(settings_.proc_root)) {
        const std::optional<uint64_t> number = parse_u64(pid);
        if (!number || *number == 0 || *number > UINT32_MAX) continue;
        struct stat st{};
        if (stat((settings_.proc_root + "/" + pid).c_str(), &st) != 0) continue;
        const uint64_t identity = static_cast<uint64_t>(st.st_ctim.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(st.st_ctim.tv_nsec);
        ProcessFds& p = processes_[static_cast<uint32_t>(*number)];
        if (p.identity != identity) {  // a new process (or a reused pid): not scanned yet
            p = ProcessFds{};
            p.identity = identity;
        }
        p.present = true;
    }
    std::erase_if(processes_, [](const auto& entry) { return !entry.second.present; });
    const bool all_scanned = rescan_due(now);
    for (const auto& [pid, p] : processes_) {
        for (const std::string& fd : p.drm_fds) {
            const ReadResult info = read_text_file(fmt::format("{}/{}/fdinfo/{}", settings_.proc_root, pid, fd), 8 * 1024);
            if (!info.ok()) continue;  // closed since the scan
            if (const std::optional<DrmClient> client = parse_drm_fdinfo(info.text)) {
                add_client(pid, *client, interval_ns, seen, uses);
            }
        }
    }
    clients_ = std::move(seen);
    // Users are known only when every process could be looked at: a process hidden from this one, or not
    // scanned yet (the budget), may be using a GPU, so "nobody" would be a guess (and would make a busy
    // GPU's power its idle power).
    const bool complete = all_scanned &&
                          std::none_of(processes_.begin(), processes_.end(), [](const auto& entry) { return entry.second.denied; });
    if (!complete && !warned_denied_) {
        log_warn("drm: cannot list some processes' file descriptors (needs CAP_DAC_READ_SEARCH and CAP_SYS_PTRACE): "
                 "their GPU use is not seen, and GPU users are published as incomplete");
    }
    warned_denied_ = !complete;
    for (keplershm_gpu_device& d : devices_) {
        d.flags = complete ? (d.flags | KEPLERSHM_GPU_USAGE_VALID) : (d.flags & ~uint32_t{KEPLERSHM_GPU_USAGE_VALID});
        d.memory_used_bytes = 0;
    }
    for (const auto& [_, use] : uses) {
        devices_[use.device].memory_used_bytes += use.memory_bytes;
        out.push_back(use);
    }
}

}  // namespace

bool drm_finds_cards(const DrmSettings& settings) {
    DrmSource probe(settings);
    std::vector<std::string> notes;
    probe.discover(notes);
    return !probe.empty();
}

std::unique_ptr<GpuSource> make_drm_source(const DrmSettings& settings, std::string& why) {
    auto source = std::make_unique<DrmSource>(settings);
    std::vector<std::string> notes;
    source->discover(notes);
    for (const std::string& note : notes) log_info("drm: {}", note);
    if (source->empty()) {
        why = fmt::format("no amdgpu, i915, xe or nouveau card under {}/class/drm", settings.sysfs_root);
        return nullptr;
    }
    log_info("drm: {} AMD/Intel GPU(s), {} with a power meter; per-process use from {}/<pid>/fdinfo", source->devices().size(),
             source->zones().size(), settings.proc_root);
    return source;
}

}  // namespace kepler::collect
