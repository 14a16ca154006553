// Child processes for the fault tests: the real collector and estimator binaries, started, signalled,
// waited for with bounds, their output kept in log files for the failure messages.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace e2e {

/// How a child ended: exit code or the signal that killed it.
struct Exit {
    int code = -1;    // exit status, -1 when killed by a signal
    int signal = 0;   // terminating signal, 0 when it exited
    [[nodiscard]] bool crashed() const { return signal != 0; }
    [[nodiscard]] std::string describe() const;
};

/// A running child in its own process group (so a wrapper such as unshare and everything it starts can
/// be signalled together); stdout and stderr go to `log`. Killed (SIGKILL to the group) at destruction.
/// Not thread-safe.
class Child {
public:
    Child(std::vector<std::string> argv, std::filesystem::path log);
    ~Child();
    Child(const Child&) = delete;
    Child& operator=(const Child&) = delete;

    [[nodiscard]] pid_t pid() const { return pid_; }
    [[nodiscard]] bool running();
    void signal(int sig) const;
    void signal_group(int sig) const;
    /// Waits up to `timeout`; nullopt if still running.
    std::optional<Exit> wait(std::chrono::milliseconds timeout);
    /// SIGTERM, then SIGKILL after `grace`.
    Exit stop(std::chrono::milliseconds grace = std::chrono::seconds(10));
    [[nodiscard]] std::string log() const;
    [[nodiscard]] const std::filesystem::path& log_path() const { return log_; }

private:
    pid_t pid_ = -1;
    std::optional<Exit> exit_;
    std::filesystem::path log_;
};

/// Output of a finished command.
struct Result {
    Exit exit;
    bool timed_out = false;
    std::string out;
    std::string err;
};

/// Runs argv to completion (SIGKILL after `timeout`), capturing stdout and stderr separately.
Result run(const std::vector<std::string>& argv, std::chrono::milliseconds timeout = std::chrono::seconds(60));

/// Waits until `ready()` or `timeout`; returns ready().
template <class Predicate>
bool wait_until(Predicate ready, std::chrono::milliseconds timeout,
                std::chrono::milliseconds step = std::chrono::milliseconds(20));

/// A fresh temporary directory, removed with its contents at destruction.
class TempDir {
public:
    TempDir();
    ~TempDir();
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;
    [[nodiscard]] const std::filesystem::path& path() const { return path_; }
    [[nodiscard]] std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

private:
    std::filesystem::path path_;
};

/// A segment name unique to this test process.
std::string unique_name(const std::string& stem);

std::string read_file(const std::filesystem::path& path);
void write_file(const std::filesystem::path& path, const std::string& text);

/// Online CPUs (what the collector puts in its segment).
unsigned online_cpus();

}  // namespace e2e

#include "support/process_inl.hpp"
