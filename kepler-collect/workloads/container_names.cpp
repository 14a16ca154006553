#include "workloads/container_names.hpp"

#include <dirent.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <memory>

#include "common/text_io.hpp"
#include "workloads/cgroup_identity.hpp"

namespace kepler::collect {

namespace {

constexpr size_t kMaxNameLength = 253;  // podman refuses longer names
constexpr size_t kMaxCmdline = 64 * 1024;

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

}  // namespace

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

bool ContainerNames::learn_into(std::unordered_map<std::string, std::string>& names, std::string_view cmdline) const {
    ConmonIdentity c = parse_conmon_cmdline(cmdline);
    if (c.container_id.empty() || c.name.empty()) return false;
    const auto known = names.find(c.container_id);
    if (known != names.end()) {
        if (known->second == c.name) return false;
        known->second = std::move(c.name);
        return true;
    }
    if (names.size() >= kMaxNames) return false;
    names.emplace(std::move(c.container_id), std::move(c.name));
    return true;
}

bool ContainerNames::learn(std::string_view cmdline) { return learn_into(names_, cmdline); }

bool ContainerNames::scan() {
    std::unique_ptr<DIR, int (*)(DIR*)> dir(opendir(proc_root_.c_str()), closedir);
    if (!dir) return false;  // keep what is known: the next scan may list /proc again
    std::unordered_map<std::string, std::string> found;
    while (const dirent* entry = readdir(dir.get())) {
        if (!parse_u64(entry->d_name)) continue;
        const std::string base = proc_root_ + "/" + entry->d_name;
        if (read_text_file(base + "/comm", 64).text != "conmon\n") continue;
        learn_into(found, read_text_file(base + "/cmdline", kMaxCmdline).text);
    }
    const bool changed = std::any_of(found.begin(), found.end(), [this](const auto& item) {
        const auto known = names_.find(item.first);
        return known == names_.end() || known->second != item.second;
    });
    names_ = std::move(found);
    return changed;
}

const std::string* ContainerNames::find(const std::string& container_id) const {
    const auto known = names_.find(container_id);
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
