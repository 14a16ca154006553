#include "test_support.hpp"

#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <new>
#include <random>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "common/text_io.hpp"
#include "sources/bpf_loader.hpp"
#include "sources/proc_stat.hpp"

namespace kepler::collect::testing {

namespace {
uint64_t thread_cpu_ns() {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

[[noreturn]] void child_main(int cpu, double duty, int ready_fd, std::atomic<uint64_t>& clock) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    // With autogroups (CONFIG_SCHED_AUTOGROUP) nice only ranks tasks inside one session's group, and
    // each busy session elsewhere (parallel builds) weighs as much as ours: take a session of our own
    // and raise its group too. Both fail without privilege; the tests say what they then check.
    setsid();
    if (FILE* group = std::fopen("/proc/self/autogroup", "w")) {
        std::fputs("-20", group);
        std::fclose(group);
    }
    setpriority(PRIO_PROCESS, 0, -20);
    // Only then onto the test's CPU: a child still at its parent's weight there can wait hundreds of
    // milliseconds behind a raised sibling before it even gets to raise itself (measured: 0 ns of CPU
    // in a 500 ms interval under load).
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    sched_setaffinity(0, sizeof set, &set);
    clock.store(thread_cpu_ns(), std::memory_order_relaxed);
    const char ready = 1;
    if (write(ready_fd, &ready, 1) != 1) _exit(3);
    close(ready_fd);
    constexpr uint64_t period_ns = 10'000'000;
    volatile uint64_t sink = 0;
    for (;;) {
        const uint64_t until = thread_cpu_ns() + static_cast<uint64_t>(duty * period_ns);
        for (uint64_t now = thread_cpu_ns(); now < until; now = thread_cpu_ns()) {
            clock.store(now, std::memory_order_relaxed);  // a reading, ordered with nothing else
            for (int i = 0; i < 1000; ++i) sink = sink + static_cast<uint64_t>(i);
        }
        clock.store(thread_cpu_ns(), std::memory_order_relaxed);
        if (duty < 1.0) {
            const auto idle = std::chrono::nanoseconds(static_cast<int64_t>((1.0 - duty) * period_ns));
            std::this_thread::sleep_for(idle);
        }
    }
}
}  // namespace

BusyChild::BusyChild(int cpu, double duty) {
    void* page = mmap(nullptr, sizeof(std::atomic<uint64_t>), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (page == MAP_FAILED) throw std::runtime_error("mmap of the child's clock failed");
    clock_ = new (page) std::atomic<uint64_t>(0);
    int ready[2];
    if (pipe(ready) != 0) throw std::runtime_error("pipe failed");
    pid_ = fork();
    if (pid_ < 0) throw std::runtime_error("fork failed");
    if (pid_ == 0) {
        close(ready[0]);
        child_main(cpu, duty, ready[1], *clock_);
    }
    close(ready[1]);
    // Returns once the child runs at its final priority on its CPU, so tests measure it from there.
    char byte = 0;
    while (read(ready[0], &byte, 1) < 0 && errno == EINTR) {
    }
    close(ready[0]);
}

BusyChild::~BusyChild() {
    stop();
    munmap(clock_, sizeof(std::atomic<uint64_t>));
}

uint64_t BusyChild::cpu_ns() const noexcept { return clock_->load(std::memory_order_relaxed); }

uint64_t BusyChild::stop() {
    if (pid_ <= 0) return 0;
    kill(pid_, SIGKILL);
    int status = 0;
    rusage usage{};
    wait4(pid_, &status, 0, &usage);
    pid_ = -1;
    auto ns = [](const timeval& tv) {
        return static_cast<uint64_t>(tv.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(tv.tv_usec) * 1000ull;
    };
    return ns(usage.ru_utime) + ns(usage.ru_stime);
}

ProcTimes proc_times(pid_t pid) {
    const auto stat = parse_proc_pid_stat(read_text_file_or_throw("/proc/" + std::to_string(pid) + "/stat", 4096));
    if (!stat) throw std::runtime_error("unparsable /proc/<pid>/stat");
    return ProcTimes{stat->start_ticks, (stat->utime_ticks + stat->stime_ticks) * ns_per_tick()};
}

uint64_t process_cpu_ns(pid_t pid) {
    clockid_t clock{};
    timespec ts{};
    if (clock_getcpuclockid(pid, &clock) != 0 || clock_gettime(clock, &ts) != 0) {
        throw std::runtime_error("cannot read the CPU clock of pid " + std::to_string(pid));
    }
    return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

Bracketed sample_bracketed(ProcessSource& source, const BusyChild& child) {
    Bracketed b;
    b.before_ns = child.cpu_ns();
    b.sample = source.sample();
    b.after_ns = child.cpu_ns();
    return b;
}

TempDir::TempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string pattern = std::string(base != nullptr ? base : "/tmp") + "/kepler-collect-test-XXXXXX";
    if (mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
}

TempDir::~TempDir() {
    std::error_code ignored;
    std::filesystem::permissions(path_, std::filesystem::perms::owner_all, std::filesystem::perm_options::add, ignored);
    std::filesystem::remove_all(path_, ignored);
}

void TempDir::write(const std::string& relative, const std::string& content) const {
    const std::filesystem::path file = path_ / relative;
    std::filesystem::create_directories(file.parent_path());
    // Written aside and renamed into place: a collector reading concurrently (as it reads sysfs) sees
    // the old or the new content, never a truncated file.
    const std::filesystem::path temporary = file.string() + ".writing";
    {
        std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
        out << content;
        if (!out) throw std::runtime_error("cannot write " + temporary.string());
    }
    std::filesystem::rename(temporary, file);
}

std::string fixture(const std::string& name) {
    std::ifstream in(std::string(KEPLER_COLLECT_FIXTURES) + "/" + name, std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    if (!in) throw std::runtime_error("missing fixture " + name);
    return text.str();
}

std::string proc_stat_line(uint32_t pid, const std::string& comm, uint64_t utime, uint64_t stime, uint64_t start,
                           uint32_t ppid, uint64_t children) {
    return std::to_string(pid) + " (" + comm + ") R " + std::to_string(ppid) + " 1 1 0 -1 4194304 0 0 0 0 " +
           std::to_string(utime) + " " + std::to_string(stime) + " " + std::to_string(children) + " 0 20 0 1 0 " +
           std::to_string(start) + " 1000 100 0\n";
}

std::string bpf_skip_reason() {
    if (geteuid() != 0) return "needs root (CAP_BPF + CAP_PERFMON) to load eBPF programs";
    return bpf_prerequisite_problem();
}

std::string unique_segment_name(const std::string& stem) {
    std::random_device entropy;
    return stem + "-" + std::to_string(getpid()) + "-" + std::to_string(entropy() % 1000000);
}

int test_cpu() {
    const long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 1 ? static_cast<int>(n - 1) : 0;
}

void sleep_ms(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

}  // namespace kepler::collect::testing
