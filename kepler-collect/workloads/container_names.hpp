// container_names.hpp — the names podman gives its containers, outside Kubernetes. podman keeps them in
// its own database; the one place a process can read them without podman's API or storage is the
// command line of each container's monitor, conmon (`-c <container id> ... -n <name>`), which every
// podman container has for as long as it runs.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <unordered_map>

namespace kepler::collect {

/// A conmon command line (NUL-separated /proc/<pid>/cmdline): the container id and name it monitors.
struct ConmonIdentity {
    bool is_conmon = false;
    std::string container_id;  // as conmon's -c / --cid gives it (hex, at most 128 characters)
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

}  // namespace kepler::collect
