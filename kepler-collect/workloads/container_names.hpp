// container_names.hpp — the names container runtimes give their containers outside Kubernetes, read
// without their APIs. podman keeps names in its own database; the one place a process can read them
// without podman's API or storage is the command line of each container's monitor, conmon
// (`-c <container id> ... -n <name>`), which every podman container has for as long as it runs. docker's
// shim carries no name; dockerd writes each container's configuration, name included, to
// <data-root>/containers/<id>/config.v2.json when the container is created.
#pragma once

#include <cstddef>
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

/// Container id → name, learned from conmon command lines. Not thread-safe.
class ContainerNames {
public:
    static constexpr size_t kMaxNames = 65536;  // bound on what a hostile /proc can make us keep

    explicit ContainerNames(std::string proc_root = "/proc");

    /// Learns the name on one conmon command line; true when it is new or changed.
    bool learn(std::string_view cmdline);
    /// Replaces what is known by the conmon processes now in /proc (containers that ended are
    /// forgotten); true when a name was added or changed.
    bool scan();
    /// The name of a container, nullptr when unknown.
    [[nodiscard]] const std::string* find(const std::string& container_id) const;
    [[nodiscard]] size_t size() const noexcept { return names_.size(); }

private:
    bool learn_into(std::unordered_map<std::string, std::string>& names, std::string_view cmdline) const;

    std::string proc_root_;
    std::unordered_map<std::string, std::string> names_;
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
