// container_names.hpp — the names container runtimes give their containers outside Kubernetes, read
// without their APIs. podman keeps names in its own database; the one place a process can read them
// without podman's API or storage is the command line of each container's monitor, conmon
// (`-c <container id> ... -n <name>`), which every podman container has for as long as it runs. Any user
// can start a process called conmon with any command line, so a command line counts only from a process
// whose executable is the real conmon (conmon_executable_problem) and only for containers of the user that
// runs it: root's conmons name the system's containers, a user's conmons that user's rootless ones. docker's
// shim carries no name; dockerd writes each container's configuration, name included, to
// <data-root>/containers/<id>/config.v2.json when the container is created.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

namespace kepler::collect {

/// A conmon command line (NUL-separated /proc/<pid>/cmdline): the container id and name it monitors.
struct ConmonIdentity {
    bool is_conmon = false;
    std::string container_id;  // as conmon's -c / --cid gives it (is_container_id(): 12 to 128 hex digits)
    std::string name;          // -n / --name (at most 253 characters)
};
[[nodiscard]] ConmonIdentity parse_conmon_cmdline(std::string_view cmdline);

/// A process's executable file as stat(2) gives it through /proc/<pid>/exe.
struct ExecutableFile {
    uint32_t uid = 0;
    uint32_t mode = 0;  // st_mode
};
/// Why a process's executable is not the real conmon; empty when it is. `exe_link`: the text of its
/// /proc/<pid>/exe link; `file`: the file it resolves to, where it can be stat'ed. Real: named conmon, in
/// one of the directories packages install it to (kConmonDirectories), and, where known, a regular file
/// owned by root that neither group nor others can write (what a user cannot make, even by mounting over
/// that path in a mount namespace of its own).
[[nodiscard]] std::string conmon_executable_problem(std::string_view exe_link, const std::optional<ExecutableFile>& file);

/// The uid a process runs as, from its /proc/<pid>/status: the real uid when real, effective, saved and
/// filesystem uids are one (nullopt otherwise: a set-uid program a user started is not root's process).
[[nodiscard]] std::optional<uint32_t> process_uid(std::string_view status);

/// Container id → name, learned from conmon command lines. Not thread-safe.
class ContainerNames {
public:
    static constexpr size_t kMaxNames = 65536;  // bound on what a hostile /proc can make us keep

    explicit ContainerNames(std::string proc_root = "/proc");

    /// Learns the name on one command line of a real conmon run by root (`rootless_uid` empty) or by
    /// that user; true when it is new or changed.
    bool learn(std::string_view cmdline, std::optional<uint32_t> rootless_uid = std::nullopt);
    /// Learns from process `pid` under the proc root when it is a real conmon (see the file comment);
    /// true when a name is new or changed.
    bool learn_process(uint32_t pid);
    /// Replaces what is known by the conmon processes now in /proc (containers that ended are
    /// forgotten); true when a name was added or changed.
    bool scan();
    /// The name of a system container (`rootless_uid` empty) or of that user's rootless one, nullptr when
    /// unknown.
    [[nodiscard]] const std::string* find(const std::string& container_id,
                                          std::optional<uint32_t> rootless_uid = std::nullopt) const;
    [[nodiscard]] size_t size() const noexcept { return names_.size(); }

private:
    // Keyed by owned_container_id(): a user's conmon never names another owner's container.
    using Names = std::unordered_map<std::string, std::string>;
    bool learn_into(Names& names, std::string_view cmdline, std::optional<uint32_t> rootless_uid) const;
    bool learn_from_process(Names& names, const std::string& pid) const;

    std::string proc_root_;
    Names names_;
};

/// The name in a docker config.v2.json: its top-level "Name" without docker's leading '/'. Empty when
/// the text is not such a file, its "ID" is not `container_id`, or the name is not plain text.
[[nodiscard]] std::string parse_docker_config_name(std::string_view json, std::string_view container_id);

/// Container id → name, read from docker's containers directory the first time an id is asked for.
/// An id without a readable name is remembered as such: dockerd writes the file before the container
/// starts, so a miss means no access (the directory not mounted, another --data-root), not "too early".
/// Not thread-safe.
class DockerNames {
public:
    static constexpr size_t kMaxIds = 65536;  // bound on what a hostile set of cgroups can make us keep
    static constexpr size_t kMaxConfigBytes = 4 << 20;  // config.v2.json is a few kB (env, mounts, health log)

    /// `containers_dir`: dockerd's <data-root>/containers.
    explicit DockerNames(std::string containers_dir);
    /// The name of a docker container, nullptr when docker's files give none.
    [[nodiscard]] const std::string* find(const std::string& container_id);

private:
    std::string containers_dir_;
    std::unordered_map<std::string, std::string> names_;  // "" = read once, no name
};

}  // namespace kepler::collect
