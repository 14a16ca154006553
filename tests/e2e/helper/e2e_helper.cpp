// e2e_helper: process scenarios for the fault tests, often run as pid 1 of a new pid namespace
// (unshare --pid --fork --mount-proc), where the collector's procfs source sees only what we start.
//
//   e2e_helper crowd --children N --burn-us B --period-ms P -- COMMAND...
//       N children that each burn B µs of CPU every P ms, then COMMAND; exits with COMMAND's status.
//   e2e_helper pidreuse --pid P --burn-ms A,B --hold-ms H -- COMMAND...
//       starts COMMAND, waits until it has been running for H ms, then runs two processes one after the
//       other that both get pid P (through /proc/sys/kernel/ns_last_pid): each burns its CPU, holds H ms
//       so a collector sample sees its final CPU time, prints "process I pid=P start=S ticks=T
//       ticks_at_exit=E" (utime+stime before and after the hold), exits.
//       Finally waits H ms more and stops COMMAND with SIGTERM.
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;
pid_t g_command = -1;

void forward_termination(int sig) {
    if (g_command > 0) kill(g_command, sig);
}

void burn_cpu(std::chrono::microseconds amount) {
    // Thread CPU time, not wall time: the burn is the same however busy the machine is.
    timespec start{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &start);
    const long long target = amount.count() * 1000;
    for (;;) {
        timespec now{};
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
        if ((now.tv_sec - start.tv_sec) * 1'000'000'000LL + (now.tv_nsec - start.tv_nsec) >= target) return;
    }
}

pid_t start_command(char** argv) {
    const pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        execvp(argv[0], argv);
        std::perror("e2e_helper: exec");
        _exit(127);
    }
    g_command = pid;
    signal(SIGTERM, forward_termination);
    signal(SIGINT, forward_termination);
    return pid;
}

int exit_status(int status) { return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status); }

/// Fields 14, 15 (utime, stime) and 22 (start time) of /proc/self/stat, after the ")" of the comm.
void own_stat(unsigned long long& ticks, unsigned long long& start) {
    std::ifstream in("/proc/self/stat");
    std::string text((std::istreambuf_iterator<char>(in)), {});
    std::istringstream fields(text.substr(text.rfind(')') + 2));
    std::string f;
    unsigned long long utime = 0, stime = 0;
    for (int field = 3; fields >> f; ++field) {
        if (field == 14) utime = std::stoull(f);
        if (field == 15) stime = std::stoull(f);
        if (field == 22) start = std::stoull(f);
    }
    ticks = utime + stime;
}

int crowd(int children, long burn_us, long period_ms, char** command) {
    std::vector<pid_t> pids;
    for (int i = 0; i < children; ++i) {
        const pid_t pid = fork();
        if (pid == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            for (;;) {
                burn_cpu(std::chrono::microseconds(burn_us));
                std::this_thread::sleep_for(std::chrono::milliseconds(period_ms));
            }
        }
        pids.push_back(pid);
    }
    const pid_t cmd = start_command(command);
    int status = 0;
    while (waitpid(cmd, &status, 0) < 0 && errno == EINTR) {
    }
    for (pid_t pid : pids) kill(pid, SIGKILL);
    for (pid_t pid : pids) waitpid(pid, nullptr, 0);
    return exit_status(status);
}

int pidreuse(pid_t wanted, const std::vector<long>& burns_ms, long hold_ms, char** command) {
    const pid_t cmd = start_command(command);
    std::this_thread::sleep_for(std::chrono::milliseconds(hold_ms));
    for (size_t i = 0; i < burns_ms.size(); ++i) {
        {
            std::ofstream last("/proc/sys/kernel/ns_last_pid");
            last << wanted - 1;
        }
        int pipe_fd[2];
        if (pipe(pipe_fd) != 0) return 3;
        const pid_t child = fork();
        if (child == 0) {
            close(pipe_fd[0]);
            burn_cpu(std::chrono::milliseconds(burns_ms[i]));
            // Read before and after the hold: the kernel's utime+stime is the scheduler's nanosecond count
            // cut to ticks, and the reads themselves run. A collector scan during the hold sees a value
            // between the two (usually both: the burns are chosen away from a tick's edge).
            unsigned long long ticks = 0, start = 0;
            own_stat(ticks, start);
            std::this_thread::sleep_for(std::chrono::milliseconds(hold_ms));
            unsigned long long ticks_at_exit = 0;
            own_stat(ticks_at_exit, start);
            const std::string line = "process " + std::to_string(i) + " pid=" + std::to_string(getpid()) +
                                     " start=" + std::to_string(start) + " ticks=" + std::to_string(ticks) +
                                     " ticks_at_exit=" + std::to_string(ticks_at_exit) + "\n";
            if (write(pipe_fd[1], line.data(), line.size()) < 0) _exit(4);
            _exit(0);
        }
        close(pipe_fd[1]);
        char buffer[256] = {};
        const ssize_t n = read(pipe_fd[0], buffer, sizeof buffer - 1);
        close(pipe_fd[0]);
        waitpid(child, nullptr, 0);
        if (child != wanted || n <= 0) {
            std::fprintf(stderr, "e2e_helper: child got pid %d, wanted %d\n", child, wanted);
            kill(cmd, SIGKILL);
            return 3;
        }
        std::fputs(buffer, stdout);
        std::fflush(stdout);
        std::this_thread::sleep_for(std::chrono::milliseconds(30));  // the next start time differs by ticks
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(hold_ms));
    kill(cmd, SIGTERM);
    int status = 0;
    while (waitpid(cmd, &status, 0) < 0 && errno == EINTR) {
    }
    return exit_status(status);
}

[[noreturn]] void usage() {
    std::fprintf(stderr, "usage: e2e_helper crowd --children N --burn-us B --period-ms P -- COMMAND...\n"
                         "       e2e_helper pidreuse --pid P --burn-ms A,B --hold-ms H -- COMMAND...\n");
    std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2) usage();
    const std::string mode = argv[1];
    long children = 0, burn_us = 0, period_ms = 0, pid = 0, hold_ms = 0;
    std::vector<long> burns_ms;
    int i = 2;
    for (; i + 1 < argc && std::strcmp(argv[i], "--") != 0; i += 2) {
        const std::string option = argv[i];
        const char* value = argv[i + 1];
        if (option == "--children") children = std::atol(value);
        else if (option == "--burn-us") burn_us = std::atol(value);
        else if (option == "--period-ms") period_ms = std::atol(value);
        else if (option == "--pid") pid = std::atol(value);
        else if (option == "--hold-ms") hold_ms = std::atol(value);
        else if (option == "--burn-ms") {
            std::istringstream list(value);
            for (std::string item; std::getline(list, item, ',');) burns_ms.push_back(std::atol(item.c_str()));
        } else usage();
    }
    if (i >= argc || std::strcmp(argv[i], "--") != 0 || i + 1 >= argc) usage();
    char** command = argv + i + 1;
    if (mode == "crowd") return crowd(static_cast<int>(children), burn_us, period_ms, command);
    if (mode == "pidreuse") return pidreuse(static_cast<pid_t>(pid), burns_ms, hold_ms, command);
    usage();
}
