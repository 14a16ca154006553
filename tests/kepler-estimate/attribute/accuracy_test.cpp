// Attribution accuracy: three CPU-bound children with known duty cycles run under a fake RAPL meter
// (node power = idle + k x busy CPU time). A test collector builds frames from their real /proc CPU
// times; the estimator reads them through shared memory. Their energy shares must be within
// +-3 points of their CPU shares.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "pipeline/estimator.hpp"
#include "read/frame_source.hpp"
#include "support/subprocess.hpp"
#include "support/test_frames.hpp"

using namespace kepler::estimate;
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

/// Three children burning their duty cycles; killed at destruction. Not thread-safe.
struct DutyChildren {
    std::vector<double> duties{0.10, 0.20, 0.40};
    std::vector<pid_t> pids;
    DutyChildren() {
        for (double duty : duties) {
            const pid_t pid = fork();
            if (pid == 0) burn(duty);
            pids.push_back(pid);
        }
    }
    ~DutyChildren() {
        for (pid_t p : pids) {
            kill(p, SIGKILL);
            waitpid(p, nullptr, 0);
        }
    }
};

/// Sum over both modes of `family{pid="<pid>",...}` in Prometheus text.
double process_joules(const std::string& text, pid_t pid) {
    double sum = 0;
    const std::string key = "kepler_process_joules_total{pid=\"" + std::to_string(pid) + "\"";
    for (size_t at = text.find(key); at != std::string::npos; at = text.find(key, at + 1)) {
        const size_t space = text.find("} ", at);
        sum += std::stod(text.substr(space + 2, text.find('\n', space) - space - 2));
    }
    return sum;
}

}  // namespace

TEST(Accuracy, EnergySharesFollowCpuSharesUnderAFakeRaplMeter) {
    DutyChildren kids;
    const std::vector<double>& duties = kids.duties;
    const std::vector<pid_t>& children = kids.pids;
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

#ifdef COLLECT_BINARY
// The same with the real collector (procfs) reading a fake RAPL tree (--sysfs-root) whose counter a
// thread here advances like a meter would: idle + k x busy CPU time from /proc/stat.
TEST(Accuracy, WithTheRealCollectorAndAFakeRaplTree) {
    TempDir dir;
    const std::filesystem::path zone = dir.path() / "class" / "powercap" / "intel-rapl:0";
    std::filesystem::create_directories(zone);
    std::ofstream(zone / "name") << "package-0\n";
    std::ofstream(zone / "max_energy_range_uj") << "262143328850\n";
    std::ofstream(zone / "energy_uj") << "1000\n";
    std::atomic<bool> stop{false};
    std::thread meter([&] {
        double energy_uj = 1000;
        std::vector<uint64_t> last = node_busy_ns();
        uint64_t last_t = now_ns();
        while (!stop) {
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
            const std::vector<uint64_t> busy = node_busy_ns();
            const uint64_t t = now_ns();
            uint64_t busy_ns = 0;
            for (size_t c = 0; c < busy.size(); ++c) busy_ns += busy[c] - last[c];
            energy_uj += kIdleWatts * static_cast<double>(t - last_t) / 1e3 + kWattsPerBusyCore * static_cast<double>(busy_ns) / 1e3;
            last = busy;
            last_t = t;
            std::ofstream(zone / "energy_uj.tmp") << static_cast<uint64_t>(energy_uj) << "\n";
            std::filesystem::rename(zone / "energy_uj.tmp", zone / "energy_uj");  // a reader never sees half a number
        }
    });
    struct Join {
        std::atomic<bool>& stop;
        std::thread& thread;
        ~Join() {
            stop = true;
            thread.join();
        }
    } join{stop, meter};

    DutyChildren children;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    // The estimator waits for the segment, so it reads every frame of the collector's run; the children's
    // CPU time is sampled just before the collector starts and just after its last frame.
    const std::string segment = unique_segment_name("accuracy-collect");
    const SegmentCleanup cleanup{segment};
    const std::filesystem::path prom = dir.path() / "out.prom";
    Child estimator({ESTIMATE_BINARY, "--shm-name", segment, "--listen", "none", "--process-metrics", "--prom-out", prom.string()},
                    (dir.path() / "estimator.log").string());
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    std::vector<uint64_t> start_cpu, end_cpu;
    for (pid_t p : children.pids) start_cpu.push_back(cpu_ns(p));
    Child collector({COLLECT_BINARY, "--shm-name", segment, "--interval", "250ms", "--source", "procfs", "--kube", "off",
                     "--sysfs-root", dir.path().string(), "--frames", "20"},
                    (dir.path() / "collector.log").string());
    ASSERT_EQ(collector.wait(std::chrono::seconds(60)), 0) << read_file((dir.path() / "collector.log").string());
    for (pid_t p : children.pids) end_cpu.push_back(cpu_ns(p));
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    estimator.terminate();  // writes --prom-out on the way out
    ASSERT_TRUE(std::filesystem::exists(prom)) << read_file((dir.path() / "estimator.log").string());
    std::vector<double> cpu, energy;
    const std::string text = read_file(prom.string());
    for (size_t i = 0; i < children.pids.size(); ++i) {
        cpu.push_back(static_cast<double>(end_cpu[i] - start_cpu[i]));
        energy.push_back(process_joules(text, children.pids[i]));
    }
    EXPECT_NE(text.find("kepler_estimator_frames_missed_total 0"), std::string::npos) << text.substr(0, 3000);
    ASSERT_NE(text.find("source=\"rapl\""), std::string::npos) << "the fake meter must be the power source\n"
                                                               << read_file((dir.path() / "collector.log").string());
    const double cpu_sum = cpu[0] + cpu[1] + cpu[2], energy_sum = energy[0] + energy[1] + energy[2];
    ASSERT_GT(energy_sum, 0) << text.substr(0, 2000);
    for (size_t i = 0; i < cpu.size(); ++i) {
        const double energy_share = 100 * energy[i] / energy_sum, cpu_share = 100 * cpu[i] / cpu_sum;
        std::printf("child %zu (duty %.0f%%): cpu share %.1f%%, energy share %.1f%%\n", i, 100 * children.duties[i], cpu_share, energy_share);
        EXPECT_NEAR(energy_share, cpu_share, 3.0) << "child " << i;
    }
}
#endif
