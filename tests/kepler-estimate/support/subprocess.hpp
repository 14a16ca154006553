// Child processes for tests: the estimator binary, Prometheus, Python, HTTP servers.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

namespace estimate_test {

/// A running child; killed (SIGTERM, then SIGKILL) and reaped at destruction. Not thread-safe.
class Child {
public:
    /// Starts argv[0] with `argv`; stdout and stderr go to `log_path` (or are inherited when empty).
    Child(const std::vector<std::string>& argv, const std::string& log_path = {});
    ~Child();
    Child(Child&& other) noexcept;
    Child(const Child&) = delete;
    Child& operator=(const Child&) = delete;

    /// Waits up to `timeout` for the child to exit; returns its exit status or -1 if still running.
    int wait(std::chrono::milliseconds timeout);
    void terminate();
    [[nodiscard]] pid_t pid() const { return pid_; }

private:
    pid_t pid_ = -1;
    int status_ = -1;
};

/// Runs a command to completion, returns its exit status; output captured into `output`.
int run_command(const std::vector<std::string>& argv, std::string& output, std::chrono::seconds timeout = std::chrono::seconds(120));

/// A TCP port on 127.0.0.1 that was free a moment ago.
int free_port();

/// HTTP GET over libcurl; returns the HTTP status (0 when the connection failed).
long http_get(const std::string& url, std::string& body);

std::string read_file(const std::string& path);

/// `promtool check metrics` on an exposition file: its exit status, and its findings except the one
/// Kepler 0.7's own names cause ("kepler_*_bpf_cpu_time_ms_total ... abbreviated units": kept, because
/// Kepler's dashboards query that name). `findings` is "" for a clean exposition.
int promtool_check(const std::string& path, std::string& findings);

}  // namespace estimate_test
