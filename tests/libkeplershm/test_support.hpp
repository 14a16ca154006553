// Helpers shared by the libkeplershm tests: unique segment names, raw segment images, child processes.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <functional>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "keplershm/keplershm.hpp"

namespace keplershm::test {

/// This process's part of unique names: its pid and a random number (the pid alone is not unique
/// between pid namespaces, e.g. test runs in containers that share /dev/shm or /tmp with ours).
inline std::string run_id() {
    static const std::string random = std::to_string(std::random_device{}());
    return std::to_string(getpid()) + "-" + random;  // getpid() each time: forked children differ
}

/// A segment name no other test (or concurrent test run) uses; removed when the guard dies.
class ScopedName {
public:
    explicit ScopedName(const std::string& tag) {
        static std::atomic<int> counter{0};
        name_ = "kshm-test-" + tag + "-" + run_id() + "-" + std::to_string(counter++);
    }
    ~ScopedName() { shm_unlink(("/" + name_).c_str()); }
    ScopedName(const ScopedName&) = delete;
    ScopedName& operator=(const ScopedName&) = delete;
    [[nodiscard]] const std::string& str() const { return name_; }
    operator const std::string&() const { return name_; }

private:
    std::string name_;
};

/// Bytes of the object currently under `name` in /dev/shm.
inline std::vector<uint8_t> read_segment_bytes(const std::string& name) {
    std::ifstream in("/dev/shm/" + name, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

/// Creates (or replaces) /dev/shm/<name> with exactly `bytes`, as a hostile or foreign producer would.
inline void write_segment_bytes(const std::string& name, const std::vector<uint8_t>& bytes) {
    const std::string path = "/dev/shm/" + name;
    unlink(path.c_str());
    const int fd = open(path.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0600);
    if (fd < 0) throw std::runtime_error("cannot create " + path);
    size_t done = 0;
    while (done < bytes.size()) {
        const ssize_t n = write(fd, bytes.data() + done, bytes.size() - done);
        if (n <= 0) break;
        done += static_cast<size_t>(n);
    }
    close(fd);
}

inline std::vector<uint8_t> read_file_bytes(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

inline void write_file_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

/// A temporary file path removed at scope exit.
class ScopedPath {
public:
    explicit ScopedPath(const std::string& tag) {
        static std::atomic<int> counter{0};
        path_ = "/tmp/kshm-test-" + tag + "-" + run_id() + "-" + std::to_string(counter++);
    }
    ~ScopedPath() { unlink(path_.c_str()); }
    ScopedPath(const ScopedPath&) = delete;
    ScopedPath& operator=(const ScopedPath&) = delete;
    [[nodiscard]] const std::string& str() const { return path_; }

private:
    std::string path_;
};

/// Runs `body` in a forked child; its return value is the exit code (exceptions → 100).
inline pid_t spawn(const std::function<int()>& body) {
    const pid_t pid = fork();
    if (pid == 0) {
        int code = 100;
        try {
            code = body();
        } catch (...) {
        }
        _exit(code);
    }
    return pid;
}

/// Exit code of a child (-signal if it was killed).
inline int reap(pid_t pid) {
    int status = 0;
    waitpid(pid, &status, 0);
    if (WIFSIGNALED(status)) return -WTERMSIG(status);
    return WEXITSTATUS(status);
}

/// A frame whose every field derives from its sequence, so a reader can tell a whole frame from a torn
/// one: process i of frame n has pid n, tgid i, cpu_time n*1000+i; the unaccounted record holds a checksum.
inline uint32_t derived_process_count(uint64_t n) { return static_cast<uint32_t>(n % 50 + 1); }

inline void fill_derived_frame(Draft& draft) {
    const uint64_t n = draft.sequence();
    uint64_t sum = 0;
    const uint32_t count = derived_process_count(n);
    for (uint32_t i = 0; i < count; ++i) {
        keplershm_process p{};
        p.pid = static_cast<uint32_t>(n);
        p.tgid = i;
        p.start_time_ticks = n * 7 + i;
        p.cpu_time_ns = n * 1000 + i;
        p.softirq[3] = n ^ i;
        sum += p.cpu_time_ns + p.start_time_ticks + p.softirq[3];
        draft.add_process(p);
    }
    draft.frame().interval_start_ns = n * 10;
    draft.frame().interval_end_ns = n * 10 + 10;
    draft.unaccounted().cpu_time_ns = sum;
    draft.unaccounted().exited_processes = n;
}

/// True if `view` is exactly the frame fill_derived_frame wrote for its sequence.
inline bool derived_frame_intact(const FrameView& view) {
    const uint64_t n = view.sequence();
    const auto processes = view.processes();
    const keplershm_unaccounted* unaccounted = view.unaccounted();
    if (unaccounted == nullptr || processes.size() != derived_process_count(n)) return false;
    if (view.interval_start_ns() != n * 10 || view.interval_end_ns() != n * 10 + 10) return false;
    uint64_t sum = 0;
    for (uint32_t i = 0; i < processes.size(); ++i) {
        const keplershm_process& p = processes[i];
        if (p.pid != n || p.tgid != i || p.cpu_time_ns != n * 1000 + i || p.start_time_ticks != n * 7 + i) return false;
        sum += p.cpu_time_ns + p.start_time_ticks + p.softirq[3];
    }
    return unaccounted->cpu_time_ns == sum && unaccounted->exited_processes == n;
}

/// Keeps an otherwise idle writer alive: heartbeats it from a thread every `period` until destroyed. The
/// writer must not be used by the test meanwhile (a Writer is not thread-safe).
class BackgroundHeartbeat {
public:
    BackgroundHeartbeat(Writer& writer, std::chrono::milliseconds period)
        : thread_([this, &writer, period] {
              while (!stop_.load()) {
                  writer.heartbeat();
                  std::this_thread::sleep_for(period);
              }
          }) {}
    ~BackgroundHeartbeat() {
        stop_.store(true);
        thread_.join();
    }
    BackgroundHeartbeat(const BackgroundHeartbeat&) = delete;
    BackgroundHeartbeat& operator=(const BackgroundHeartbeat&) = delete;

private:
    std::atomic<bool> stop_{false};
    std::thread thread_;
};

/// Publishes `frames` derived frames.
inline void publish(Writer& writer, int frames) {
    for (int i = 0; i < frames; ++i) {
        Draft draft = writer.begin();
        fill_derived_frame(draft);
        writer.commit(draft);
    }
}

inline WriterOptions small_options() {
    WriterOptions o;
    o.slot_count = 4;
    o.process_capacity = 64;
    o.workload_capacity = 4;
    o.zone_capacity = 4;
    o.cpu_capacity = 4;
    o.string_capacity = 1024;
    o.node_name = "test-node";
    o.cpu_model = "Test CPU @ 1.00GHz";
    o.cpu_count = 4;
    return o;
}

}  // namespace keplershm::test
