#include "workloads/container_names.hpp"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cerrno>
#include <memory>

#include "support/log/log.hpp"
#include "common/text_io.hpp"
#include "workloads/cgroup_identity.hpp"

namespace kepler::collect {

namespace {

constexpr size_t kMaxNameLength = 253;  // podman refuses longer names
constexpr size_t kMaxCmdline = 64 * 1024;
constexpr size_t kMaxStatus = 16 * 1024;  // /proc/<pid>/status is under 2 kB

/// Where packages install conmon: distributions' /usr/bin (and /bin, /usr/sbin on merged-/usr systems),
/// podman's own copies (/usr/libexec/podman on Fedora/RHEL, /usr/lib/podman on Debian/Ubuntu/Arch) and
/// static builds' /usr/local/bin. Directories only root can write to.
constexpr std::string_view kConmonDirectories[] = {
    "/usr/bin", "/usr/libexec/podman", "/usr/lib/podman", "/usr/local/bin", "/usr/sbin", "/bin",
};

/// A printable name without control characters (it becomes a label value and a frame text field).
bool is_plain_name(std::string_view name) {
    return !name.empty() && name.size() <= kMaxNameLength &&
           std::all_of(name.begin(), name.end(), [](char c) { return static_cast<unsigned char>(c) >= 0x20 && c != 0x7f; });
}

/// The value of option `shorter`/`longer` at args[i] ("-c ID", "--cid ID", "--cid=ID"); advances i past it.
bool option_value(const std::vector<std::string_view>& args, size_t& i, std::string_view shorter,
                  std::string_view longer, std::string_view& value) {
    const std::string_view arg = args[i];
    if ((arg == shorter || arg == longer) && i + 1 < args.size()) {
        value = args[++i];
        return true;
    }
    if (starts_with(arg, longer) && arg.size() > longer.size() && arg[longer.size()] == '=') {
        value = arg.substr(longer.size() + 1);
        return true;
    }
    return false;
}

/// Why the executable behind `exe` (a /proc/<pid>/exe link) is not the real conmon; empty when it is, or
/// when the link cannot be read for lack of access: the collector's least-privilege deployments
/// (CAP_BPF and CAP_PERFMON, no CAP_SYS_PTRACE) may not follow the link of a process with other uids or
/// more capabilities, conmon's included. Then the owner rule alone holds, and is enough: a user's process
/// names only that user's containers (ContainerNames::learn_from_process).
std::string exe_problem(const std::string& exe, const std::string& pid) {
    std::array<char, 4096> link{};
    const ssize_t length = ::readlink(exe.c_str(), link.data(), link.size());
    if (length < 0 && (errno == EACCES || errno == EPERM)) {
        log_debug("conmon {}: its executable is not readable here; its uid alone decides what it names", pid);
        return {};
    }
    if (length < 0) return "its executable link cannot be read";
    if (static_cast<size_t>(length) == link.size()) return "its executable's path is too long";
    // On procfs stat() follows the link to the running file itself, in whichever mount namespace it
    // is, and fails only when the process is gone. In a copy of /proc (tests' fake trees) the link is a
    // symbolic link to a path on another machine, and the directory rule stands alone.
    struct stat st {};
    std::optional<ExecutableFile> file;
    if (::stat(exe.c_str(), &st) == 0) file = ExecutableFile{static_cast<uint32_t>(st.st_uid), static_cast<uint32_t>(st.st_mode)};
    return conmon_executable_problem(std::string_view(link.data(), static_cast<size_t>(length)), file);
}

}  // namespace

std::string conmon_executable_problem(std::string_view exe_link, const std::optional<ExecutableFile>& file) {
    std::string_view path = exe_link;
    // A package upgrade replaces the file under running conmons; the kernel marks their links so.
    if (ends_with(path, " (deleted)")) path.remove_suffix(10);
    const size_t slash = path.rfind('/');
    if (!starts_with(path, "/") || slash == std::string_view::npos) return "its executable is not an absolute path";
    if (path.substr(slash + 1) != "conmon") return "its executable is not named conmon";
    const std::string_view directory = path.substr(0, slash);
    if (std::find(std::begin(kConmonDirectories), std::end(kConmonDirectories), directory) == std::end(kConmonDirectories)) {
        return "its executable is not in a directory conmon is installed to";
    }
    if (!file) return {};
    if (!S_ISREG(file->mode)) return "its executable is not a regular file";
    if (file->uid != 0) return "its executable is not owned by root";
    if ((file->mode & (S_IWGRP | S_IWOTH)) != 0) return "its executable is writable by group or others";
    return {};
}

std::optional<uint32_t> process_uid(std::string_view status) {
    for (std::string_view line : split_lines(status)) {
        if (!starts_with(line, "Uid:")) continue;
        const std::vector<std::string_view> uids = split_fields(line.substr(4));
        if (uids.size() != 4) return std::nullopt;
        const auto real = parse_u64(uids[0]);
        if (!real || *real > UINT32_MAX) return std::nullopt;
        const bool one = std::all_of(uids.begin(), uids.end(), [&](std::string_view u) { return parse_u64(u) == real; });
        return one ? std::optional<uint32_t>(static_cast<uint32_t>(*real)) : std::nullopt;
    }
    return std::nullopt;
}

ConmonIdentity parse_conmon_cmdline(std::string_view cmdline) {
    ConmonIdentity c;
    const std::vector<std::string_view> args = split_cmdline(cmdline);
    if (args.empty()) return c;
    const size_t slash = args[0].rfind('/');
    c.is_conmon = args[0].substr(slash == std::string_view::npos ? 0 : slash + 1) == "conmon";
    if (!c.is_conmon) return c;
    for (size_t i = 1; i < args.size(); ++i) {
        std::string_view value;
        if (args[i] == "--exit-command-arg" || args[i] == "--runtime-arg") {
            ++i;  // a value for another program (podman's cleanup, the OCI runtime): never conmon's
        } else if (option_value(args, i, "-c", "--cid", value)) {
            c.container_id = is_container_id(value) ? std::string(value) : std::string();
        } else if (option_value(args, i, "-n", "--name", value)) {
            c.name = is_plain_name(value) ? std::string(value) : std::string();
        }
    }
    return c;
}

ContainerNames::ContainerNames(std::string proc_root) : proc_root_(std::move(proc_root)) {}

bool ContainerNames::learn_into(Names& names, std::string_view cmdline, std::optional<uint32_t> rootless_uid) const {
    ConmonIdentity c = parse_conmon_cmdline(cmdline);
    if (c.container_id.empty() || c.name.empty()) return false;
    std::string key = owned_container_id(c.container_id, rootless_uid);
    const auto known = names.find(key);
    if (known != names.end()) {
        if (known->second == c.name) return false;
        known->second = std::move(c.name);
        return true;
    }
    if (names.size() >= kMaxNames) return false;
    names.emplace(std::move(key), std::move(c.name));
    return true;
}

bool ContainerNames::learn_from_process(Names& names, const std::string& pid) const {
    const std::string base = proc_root_ + "/" + pid;
    const std::optional<uint32_t> uid = process_uid(read_text_file(base + "/status", kMaxStatus).text);
    if (!uid) {
        log_debug("conmon {}: not used for container names: its uids are unreadable or not one", pid);
        return false;
    }
    if (const std::string problem = exe_problem(base + "/exe", pid); !problem.empty()) {
        log_debug("conmon {}: not used for container names: {}", pid, problem);
        return false;
    }
    const std::optional<uint32_t> rootless_uid = *uid == 0 ? std::nullopt : uid;
    return learn_into(names, read_text_file(base + "/cmdline", kMaxCmdline).text, rootless_uid);
}

bool ContainerNames::learn(std::string_view cmdline, std::optional<uint32_t> rootless_uid) {
    return learn_into(names_, cmdline, rootless_uid);
}

bool ContainerNames::learn_process(uint32_t pid) { return learn_from_process(names_, std::to_string(pid)); }

bool ContainerNames::scan() {
    std::unique_ptr<DIR, int (*)(DIR*)> dir(opendir(proc_root_.c_str()), closedir);
    if (!dir) return false;  // keep what is known: the next scan may list /proc again
    Names found;
    while (const dirent* entry = readdir(dir.get())) {
        if (!parse_u64(entry->d_name)) continue;
        const std::string base = proc_root_ + "/" + entry->d_name;
        if (read_text_file(base + "/comm", 64).text != "conmon\n") continue;  // the cheap test first
        learn_from_process(found, entry->d_name);
    }
    const bool changed = std::any_of(found.begin(), found.end(), [this](const auto& item) {
        const auto known = names_.find(item.first);
        return known == names_.end() || known->second != item.second;
    });
    names_ = std::move(found);
    return changed;
}

const std::string* ContainerNames::find(const std::string& container_id, std::optional<uint32_t> rootless_uid) const {
    const auto known = names_.find(owned_container_id(container_id, rootless_uid));
    return known == names_.end() ? nullptr : &known->second;
}

std::string parse_docker_config_name(std::string_view json, std::string_view container_id) {
    const nlohmann::json config = nlohmann::json::parse(json.begin(), json.end(), nullptr, /*allow_exceptions=*/false);
    if (!config.is_object()) return {};
    const auto id = config.find("ID"), name = config.find("Name");
    if (id == config.end() || !id->is_string() || id->get_ref<const std::string&>() != container_id) return {};
    if (name == config.end() || !name->is_string()) return {};
    std::string_view text = name->get_ref<const std::string&>();
    if (starts_with(text, "/")) text.remove_prefix(1);
    return is_plain_name(text) ? std::string(text) : std::string();
}

DockerNames::DockerNames(std::string containers_dir) : containers_dir_(std::move(containers_dir)) {}

const std::string* DockerNames::find(const std::string& container_id) {
    auto known = names_.find(container_id);
    if (known == names_.end()) {
        if (!is_container_id(container_id)) return nullptr;  // never a path outside the directory
        if (names_.size() >= kMaxIds) names_.clear();         // live containers are read again
        const ReadResult config = read_text_file(containers_dir_ + "/" + container_id + "/config.v2.json", kMaxConfigBytes);
        known = names_.emplace(container_id, config.ok() ? parse_docker_config_name(config.text, container_id) : "").first;
    }
    return known->second.empty() ? nullptr : &known->second;
}

}  // namespace kepler::collect
