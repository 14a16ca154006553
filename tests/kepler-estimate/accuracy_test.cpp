// Attribution accuracy: three CPU-bound children with known duty cycles run under a fake RAPL meter
// (node power = idle + k x busy CPU time). A test collector builds frames from their real /proc CPU
// times; the estimator reads them through shared memory. Their energy shares must be within
// +-3 points of their CPU shares.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <fstream>
#include <sstream>
#include <thread>

#include "app/estimator.hpp"
#include "read/frame_source.hpp"
#include "support/test_frames.hpp"

using namespace kepler_estimate;
using namespace estimate_test;
using Clock = std::chrono::steady_clock;

namespace {

constexpr double kIdleWatts = 10.0;
constexpr double kWattsPerBusyCore = 20.0;

uint64_t now_ns() {
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

/// Busy for `duty` of every 20 ms period, asleep for the rest, until killed.
[[noreturn]] void burn(double duty) {
    const uint64_t period = 20'000'000;
    for (;;) {
        const uint64_t start = now_ns();
        while (now_ns() - start < static_cast<uint64_t>(duty * period)) {
        }
        const uint64_t spent = now_ns() - start;
        if (spent < period) {
            const timespec rest{0, static_cast<long>(period - spent)};
            nanosleep(&rest, nullptr);
        }
    }
}

/// On-CPU nanoseconds of a process: /proc/<pid>/schedstat (ns), else utime+stime ticks.
uint64_t cpu_ns(pid_t pid) {
    std::ifstream sched("/proc/" + std::to_string(pid) + "/schedstat");
    uint64_t ns = 0;
    if (sched >> ns) return ns;
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string text((std::istreambuf_iterator<char>(stat)), {});
    std::istringstream rest(text.substr(text.rfind(')') + 2));
    std::string field;
    uint64_t utime = 0, stime = 0;
    for (int i = 3; rest >> field; ++i) {
        if (i == 14) utime = std::stoull(field);
        if (i == 15) stime = std::stoull(field);
    }
    return (utime + stime) * (1'000'000'000ull / static_cast<uint64_t>(sysconf(_SC_CLK_TCK)));
}

uint64_t start_ticks(pid_t pid) {
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string text((std::istreambuf_iterator<char>(stat)), {});
    std::istringstream rest(text.substr(text.rfind(')') + 2));
    std::string field;
    for (int i = 3; rest >> field; ++i) {
        if (i == 22) return std::stoull(field);
    }
    return 0;
}

/// Busy nanoseconds of every CPU from /proc/stat (user+nice+system+irq+softirq+steal).
std::vector<uint64_t> node_busy_ns() {
    std::ifstream stat("/proc/stat");
    std::string line;
    std::vector<uint64_t> out;
    const uint64_t tick_ns = 1'000'000'000ull / static_cast<uint64_t>(sysconf(_SC_CLK_TCK));
    while (std::getline(stat, line)) {
        if (line.rfind("cpu", 0) != 0 || line[3] == ' ') continue;
        std::istringstream in(line);
        std::string name;
        uint64_t user, nice, system, idle, iowait, irq, softirq, steal;
        in >> name >> user >> nice >> system >> idle >> iowait >> irq >> softirq >> steal;
        out.push_back((user + nice + system + irq + softirq + steal) * tick_ns);
    }
    return out;
}

}  // namespace

TEST(Accuracy, EnergySharesFollowCpuSharesUnderAFakeRaplMeter) {
    const std::vector<double> duties = {0.10, 0.20, 0.40};
    std::vector<pid_t> children;
    for (double duty : duties) {
        const pid_t pid = fork();
        ASSERT_GE(pid, 0);
        if (pid == 0) burn(duty);
        children.push_back(pid);
    }
    struct Reap {
        std::vector<pid_t>& pids;
        ~Reap() {
            for (pid_t p : pids) {
                kill(p, SIGKILL);
                waitpid(p, nullptr, 0);
            }
        }
    } reap{children};
    std::this_thread::sleep_for(std::chrono::milliseconds(100));

    const uint32_t cpus = static_cast<uint32_t>(node_busy_ns().size());
    const std::string name = unique_segment_name("accuracy");
    TestWriter writer(name, node_options(cpus, kProcfsMetrics, {zone_info("package-0", KEPLERSHM_ZONE_PACKAGE, 0)}));
    FrameSource source = FrameSource::live(name);
    Estimator estimator(EstimatorOptions{});

    std::vector<uint64_t> start_cpu, last_cpu, ticks;
    for (pid_t p : children) {
        last_cpu.push_back(cpu_ns(p));
        ticks.push_back(start_ticks(p));
    }
    start_cpu = last_cpu;
    std::vector<uint64_t> last_node = node_busy_ns();
    uint64_t last_t = now_ns();
    keplershm::FrameView view;
    for (int interval = 0; interval < 20; ++interval) {
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        TestFrame f;
        f.start_ns = last_t;
        f.end_ns = last_t = now_ns();
        uint64_t children_ns = 0;
        for (size_t i = 0; i < children.size(); ++i) {
            const uint64_t c = cpu_ns(children[i]);
            f.processes.push_back(TestProcess{.pid = static_cast<uint32_t>(children[i]), .start_time_ticks = ticks[i],
                                              .cpu_time_ns = c - last_cpu[i], .comm = "burn"});
            children_ns += c - last_cpu[i];
            last_cpu[i] = c;
        }
        const std::vector<uint64_t> node = node_busy_ns();
        uint64_t busy = 0;
        for (size_t c = 0; c < node.size(); ++c) {
            f.cpu_busy_ns.push_back(node[c] - last_node[c]);
            busy += node[c] - last_node[c];
        }
        last_node = node;
        // Everything else on this shared machine (other tests, builds) is the unaccounted record's.
        f.unaccounted_cpu_ns = busy > children_ns ? busy - children_ns : 0;
        const double dt = static_cast<double>(f.end_ns - f.start_ns) / 1e9;
        const double joules = kIdleWatts * dt + kWattsPerBusyCore * static_cast<double>(std::max(busy, children_ns)) / 1e9;
        f.zones = {TestZone{0, static_cast<uint64_t>(joules * 1e6), true}};
        writer.write(f);
        ASSERT_EQ(source.next(view, std::chrono::milliseconds(1000)), FrameSource::Result::frame);
        ASSERT_TRUE(estimator.process(view));
    }

    const Ledger& ledger = estimator.ledger();
    double energy_sum = 0, cpu_sum = 0;
    std::vector<double> energy, cpu;
    for (size_t i = 0; i < children.size(); ++i) {
        energy.push_back(static_cast<double>(ledger.total_uj(ledger.processes().at(ProcessKey{static_cast<uint32_t>(children[i]), ticks[i]}).energy.total)));
        cpu.push_back(static_cast<double>(last_cpu[i] - start_cpu[i]));
        energy_sum += energy.back();
        cpu_sum += cpu.back();
    }
    ASSERT_GT(cpu_sum, 0);
    const double duty_sum = duties[0] + duties[1] + duties[2];
    for (size_t i = 0; i < children.size(); ++i) {
        const double energy_share = 100 * energy[i] / energy_sum;
        const double cpu_share = 100 * cpu[i] / cpu_sum;
        EXPECT_NEAR(energy_share, cpu_share, 3.0) << "child " << i << " with duty " << duties[i];
        RecordProperty("child" + std::to_string(i), fmt::format("duty share {:.1f}%, cpu share {:.1f}%, energy share {:.1f}%",
                                                                100 * duties[i] / duty_sum, cpu_share, energy_share));
        std::printf("child %zu: duty share %.1f%%, cpu share %.1f%%, energy share %.1f%%\n", i, 100 * duties[i] / duty_sum, cpu_share,
                    energy_share);
    }
    EXPECT_EQ(estimator.primary_model(), "measured");
}
