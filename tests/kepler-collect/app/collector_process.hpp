// collector_process.hpp — the real kepler-collect binary (KEPLER_COLLECT_BINARY, defined for every test of
// this folder) as a child process of a test: it inherits the test's environment, its stdout and stderr go
// to a file for the failure messages, and it is killed at destruction if still running.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "test_support.hpp"

namespace kepler::collect::testing {

/// The collector as a child process, run as `run_as` (uid and gid) when given.
class Collector {
public:
    Collector(const std::vector<std::string>& args, std::optional<uid_t> run_as = std::nullopt) {
        log_path_ = (dir_.path() / "stderr.log").string();
        pid_ = fork();
        if (pid_ == 0) {
            const int fd = ::open(log_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
            dup2(fd, STDERR_FILENO);
            dup2(fd, STDOUT_FILENO);
            if (run_as && (setgid(*run_as) != 0 || setuid(*run_as) != 0)) _exit(126);
            std::vector<std::string> all{KEPLER_COLLECT_BINARY};
            all.insert(all.end(), args.begin(), args.end());
            std::vector<char*> argv;
            for (std::string& a : all) argv.push_back(a.data());
            argv.push_back(nullptr);
            execv(argv[0], argv.data());
            _exit(127);
        }
    }
    ~Collector() {
        if (pid_ > 0) {
            kill(pid_, SIGKILL);
            waitpid(pid_, nullptr, 0);
        }
    }
    pid_t pid() const { return pid_; }
    /// Sends `signal` and returns the exit status (-1 if it did not exit within 10 s).
    int stop(int signal = SIGTERM) {
        kill(pid_, signal);
        for (int i = 0; i < 1000; ++i) {
            int status = 0;
            if (waitpid(pid_, &status, WNOHANG) == pid_) {
                pid_ = -1;
                return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
            }
            testing::sleep_ms(10);
        }
        return -1;
    }
    std::string log() const {
        std::ifstream in(log_path_);
        std::stringstream text;
        text << in.rdbuf();
        return text.str();
    }

private:
    TempDir dir_;
    std::string log_path_;
    pid_t pid_ = -1;
};

}  // namespace kepler::collect::testing
