#include "support/process.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <stdexcept>

namespace e2e {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

namespace {

Exit decode(int status) {
    Exit e;
    if (WIFEXITED(status)) e.code = WEXITSTATUS(status);
    if (WIFSIGNALED(status)) e.signal = WTERMSIG(status);
    return e;
}

/// fork + exec with stdout/stderr redirected; the child leads a new process group.
pid_t spawn(const std::vector<std::string>& argv, const fs::path& out, const fs::path& err) {
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    const pid_t pid = fork();
    if (pid < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
    if (pid == 0) {
        setpgid(0, 0);
        const int o = open(out.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
        const int e = out == err ? o : open(err.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
        dup2(o, 1);
        dup2(e, 2);
        execvp(args[0], args.data());
        std::fprintf(stderr, "exec %s: %s\n", args[0], std::strerror(errno));
        _exit(127);
    }
    setpgid(pid, pid);  // also from the parent: no race with an early signal_group()
    return pid;
}

std::optional<Exit> wait_for(pid_t pid, std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
        int status = 0;
        const pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid) return decode(status);
        if (r < 0) return Exit{};
        if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
        std::this_thread::sleep_for(5ms);
    }
}

}  // namespace

std::string Exit::describe() const {
    return signal != 0 ? "killed by signal " + std::to_string(signal) + " (" + strsignal(signal) + ")"
                       : "exit status " + std::to_string(code);
}

Child::Child(std::vector<std::string> argv, fs::path log) : log_(std::move(log)) {
    std::ofstream(log_, std::ios::trunc).close();
    pid_ = spawn(argv, log_, log_);
}

Child::~Child() {
    if (exit_ || pid_ < 0) return;
    kill(-pid_, SIGKILL);
    kill(pid_, SIGKILL);
    wait(5s);
}

bool Child::running() { return !wait(0ms).has_value(); }

void Child::signal(int sig) const {
    if (!exit_) kill(pid_, sig);
}

void Child::signal_group(int sig) const {
    if (!exit_) kill(-pid_, sig);
}

std::optional<Exit> Child::wait(std::chrono::milliseconds timeout) {
    if (!exit_) exit_ = wait_for(pid_, timeout);
    return exit_;
}

Exit Child::stop(std::chrono::milliseconds grace) {
    signal(SIGTERM);
    if (auto e = wait(grace)) return *e;
    signal_group(SIGKILL);
    return wait(10s).value_or(Exit{});
}

std::string Child::log() const { return read_file(log_); }

Result run(const std::vector<std::string>& argv, std::chrono::milliseconds timeout) {
    TempDir tmp;
    const fs::path out = tmp / "out", err = tmp / "err";
    const pid_t pid = spawn(argv, out, err);
    Result r;
    std::optional<Exit> e = wait_for(pid, timeout);
    if (!e) {
        r.timed_out = true;
        kill(-pid, SIGKILL);
        kill(pid, SIGKILL);
        e = wait_for(pid, 10s);
    }
    r.exit = e.value_or(Exit{});
    r.out = read_file(out);
    r.err = read_file(err);
    return r;
}

TempDir::TempDir() {
    std::string pattern = (fs::temp_directory_path() / "keplershm-e2e-XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
}

TempDir::~TempDir() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
}

std::string unique_name(const std::string& stem) {
    // The pid alone is not unique: test runs in other pid namespaces (containers, CI jobs) may share
    // /dev/shm and reuse our pid. A random part per process makes a clash with them vanishingly unlikely.
    static const std::string random = std::to_string(std::random_device{}());
    static int counter = 0;
    return "kshm-fault-" + stem + "-" + std::to_string(getpid()) + "-" + random + "-" + std::to_string(++counter);
}

std::string read_file(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
}

void write_file(const fs::path& path, const std::string& text) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << text;
    if (!out) throw std::runtime_error("cannot write " + path.string());
}

unsigned online_cpus() {
    const long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? static_cast<unsigned>(n) : 1;
}

}  // namespace e2e
