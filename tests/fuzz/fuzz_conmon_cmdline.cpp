// libFuzzer: the texts container names are learned from (kepler-collect/workloads/container_names.cpp):
// conmon command lines, /proc/<pid>/status uid lines, /proc/<pid>/exe link texts and docker's
// config.v2.json. Any bytes: a name is plain text of podman's length, an id is a container id, both taken
// from the command line, and an executable is accepted only as conmon in a system directory, owned by root.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <optional>

#include <sys/stat.h>

#include "common/text_io.hpp"
#include "workloads/cgroup_identity.hpp"
#include "workloads/container_names.hpp"

namespace {

using namespace kepler::collect;

void require(bool holds) {
    if (!holds) __builtin_trap();
}

bool is_plain(std::string_view name) {
    return name.size() <= 253 &&
           std::all_of(name.begin(), name.end(), [](char c) { return static_cast<unsigned char>(c) >= 0x20 && c != 0x7f; });
}

void check_cmdline(std::string_view text) {
    const ConmonIdentity c = parse_conmon_cmdline(text);
    if (!c.is_conmon) require(c.container_id.empty() && c.name.empty());
    require(c.container_id.empty() || is_container_id(c.container_id));
    require(c.container_id.empty() || text.find(c.container_id) != std::string_view::npos);
    require(is_plain(c.name));
    require(c.name.empty() || text.find(c.name) != std::string_view::npos);
}

void check_executable(std::string_view link) {
    for (const std::optional<ExecutableFile>& file :
         {std::optional<ExecutableFile>(), std::optional<ExecutableFile>(ExecutableFile{0, S_IFREG | 0755}),
          std::optional<ExecutableFile>(ExecutableFile{1000, S_IFREG | 0755})}) {
        if (!conmon_executable_problem(link, file).empty()) continue;
        require(!file || file->uid == 0);
        std::string_view path = link;
        if (ends_with(path, " (deleted)")) path.remove_suffix(10);
        require(starts_with(path, "/") && ends_with(path, "/conmon") && path.find("/../") == std::string_view::npos);
    }
}

void check_status(std::string_view text) {
    const std::optional<uint32_t> uid = process_uid(text);
    require(!uid || text.find("Uid:") != std::string_view::npos);
}

void check_docker_config(std::string_view text) {
    static const std::string id(64, 'a');
    const std::string name = parse_docker_config_name(text, id);
    require(is_plain(name));  // (the id may be spelt with JSON escapes: not a substring to look for)
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    check_cmdline(text);
    check_executable(text);
    check_status(text);
    check_docker_config(text);
    return 0;
}
