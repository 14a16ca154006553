// load_processes — N live processes for the collector benchmark: each wakes about once per period,
// burns a little CPU and sleeps again, so every frame has work to publish for a good share of them.
//
//   kepler_collect_load_processes N [busy_us=200] [period_ms=1000]
//
// Runs until SIGTERM/SIGINT, then kills and reaps its children. Children die with it (PDEATHSIG).
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <random>
#include <thread>
#include <vector>

namespace {

uint64_t thread_cpu_us() {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<uint64_t>(ts.tv_sec) * 1'000'000ull + static_cast<uint64_t>(ts.tv_nsec) / 1000;
}

[[noreturn]] void child(unsigned seed, long busy_us, long period_ms) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    std::mt19937 random(seed);
    std::uniform_int_distribution<long> jitter(period_ms / 2, period_ms * 3 / 2);
    volatile uint64_t sink = 0;
    for (;;) {
        std::this_thread::sleep_for(std::chrono::milliseconds(jitter(random)));
        const uint64_t until = thread_cpu_us() + static_cast<uint64_t>(busy_us);
        while (thread_cpu_us() < until) sink = sink + 1;
    }
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: %s N [busy_us=200] [period_ms=1000]\n", argv[0]);
        return 2;
    }
    const long count = std::strtol(argv[1], nullptr, 10);
    const long busy_us = argc > 2 ? std::strtol(argv[2], nullptr, 10) : 200;
    const long period_ms = argc > 3 ? std::strtol(argv[3], nullptr, 10) : 1000;
    if (count <= 0 || count > 100000 || busy_us < 0 || period_ms <= 0) {
        std::fprintf(stderr, "load_processes: bad arguments\n");
        return 2;
    }
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGTERM);
    sigaddset(&stop, SIGINT);
    sigprocmask(SIG_BLOCK, &stop, nullptr);

    std::vector<pid_t> children;
    for (long i = 0; i < count; ++i) {
        const pid_t pid = fork();
        if (pid == 0) {
            sigprocmask(SIG_UNBLOCK, &stop, nullptr);
            child(static_cast<unsigned>(i), busy_us, period_ms);
        }
        if (pid > 0) children.push_back(pid);
    }
    std::printf("load_processes: %zu children running\n", children.size());
    std::fflush(stdout);
    int signal = 0;
    sigwait(&stop, &signal);
    for (pid_t pid : children) kill(pid, SIGKILL);
    for (pid_t pid : children) waitpid(pid, nullptr, 0);
    return 0;
}
