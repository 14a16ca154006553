// keplershm-probe, the liveness/readiness command of both containers: healthy only while a writer is
// ACTIVE and its heartbeat advances while probed; every other case exits 1 with a line that names the cause.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "keplershm/keplershm.hpp"

namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

struct Outcome {
    int status = -1;  // exit status, 128 + signal when killed
    std::string out;
    std::string err;
};

std::string slurp(const std::string& path) {
    std::ifstream in(path);
    return {std::istreambuf_iterator<char>(in), {}};
}

/// Runs the probe (optionally as another user through setpriv) and captures both streams.
Outcome run_probe(std::vector<std::string> args, const std::string& as_user = {}) {
    std::vector<std::string> argv;
    if (!as_user.empty()) argv = {"setpriv", "--reuid=" + as_user, "--regid=" + as_user, "--clear-groups", "--"};
    argv.push_back(PROBE_BINARY);
    argv.insert(argv.end(), args.begin(), args.end());
    const std::string stem = fs::temp_directory_path() / ("probe-test-" + std::to_string(getpid()));
    const pid_t pid = fork();
    if (pid == 0) {
        const int out = open((stem + ".out").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
        const int err = open((stem + ".err").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
        dup2(out, 1);
        dup2(err, 2);
        std::vector<char*> raw;
        for (std::string& a : argv) raw.push_back(a.data());
        raw.push_back(nullptr);
        execvp(raw[0], raw.data());
        _exit(127);
    }
    Outcome o;
    int status = 0;
    waitpid(pid, &status, 0);
    o.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    o.out = slurp(stem + ".out");
    o.err = slurp(stem + ".err");
    fs::remove(stem + ".out");
    fs::remove(stem + ".err");
    return o;
}

std::string unique_name(const std::string& stem) {
    static int counter = 0;
    return "kshm-deploy-probe-" + stem + "-" + std::to_string(getpid()) + "-" + std::to_string(++counter);
}

keplershm::WriterOptions small_writer(std::chrono::nanoseconds heartbeat_period = 1s) {
    keplershm::WriterOptions o;
    o.slot_count = 2;
    o.process_capacity = 4;
    o.workload_capacity = 2;
    o.string_capacity = 256;
    o.heartbeat_period = heartbeat_period;
    return o;
}

void publish_one_frame(keplershm::Writer& writer) {
    keplershm::Draft draft = writer.begin();
    draft.frame().source = KEPLERSHM_SOURCE_SYNTHETIC;
    writer.commit(draft);
}

/// Keeps an idle writer alive as a collector does between frames: a heartbeat every `period` from a
/// thread, until destroyed (the writer is not used elsewhere meanwhile).
class Heartbeating {
public:
    Heartbeating(keplershm::Writer& writer, std::chrono::milliseconds period)
        : thread_([this, &writer, period] {
              while (!stop_.load()) {
                  writer.heartbeat();
                  std::this_thread::sleep_for(period);
              }
          }) {}
    ~Heartbeating() {
        stop_.store(true);
        thread_.join();
    }

private:
    std::atomic<bool> stop_{false};
    std::thread thread_;
};

using Clock = std::chrono::steady_clock;

TEST(Probe, ActiveWriterWithAnAdvancingHeartbeatIsHealthy) {
    const std::string name = unique_name("alive");
    keplershm::Writer writer(name, small_writer());
    publish_one_frame(writer);
    Heartbeating beating(writer, 200ms);
    const auto start = Clock::now();
    const Outcome o = run_probe({"--shm-name", name, "--max-age", "10s"});
    EXPECT_LT(Clock::now() - start, 3s) << "healthy as soon as a beat is seen, not after the limit";
    EXPECT_EQ(o.status, 0) << o.err;
    EXPECT_NE(o.out.find("OK"), std::string::npos) << o.out;
    EXPECT_NE(o.out.find("frame 1"), std::string::npos) << o.out;
    EXPECT_NE(o.out.find("heartbeat advancing"), std::string::npos) << o.out;
    EXPECT_EQ(run_probe({"--shm-name", name, "--quiet"}).out, "") << "--quiet prints nothing when healthy";
    EXPECT_EQ(run_probe({"--shm-name=" + name, "--max-age=10s"}).status, 0) << "--option=value works too";
}

TEST(Probe, DefaultLimitIsTheReadersOwnThreeHeartbeatPeriodsPlusOneSecond) {
    const std::string name = unique_name("default-limit");
    keplershm::Writer writer(name, small_writer(100ms));  // limit 3 x 0.1 s + 1 s = 1.3 s
    Outcome o;
    {
        Heartbeating beating(writer, 100ms);
        o = run_probe({"--shm-name", name});
        EXPECT_EQ(o.status, 0) << o.err;
        EXPECT_NE(o.out.find("limit 1.3 s"), std::string::npos) << o.out;
    }
    // No beat any more: the probe watches the heartbeat stand still for the 1.3 s limit, then says so.
    const auto start = Clock::now();
    o = run_probe({"--shm-name", name});
    const auto watched = Clock::now() - start;
    EXPECT_EQ(o.status, 1) << o.out;
    EXPECT_NE(o.err.find("stale"), std::string::npos) << o.err;
    EXPECT_NE(o.err.find("limit 1.3 s"), std::string::npos) << o.err;
    EXPECT_GE(watched, 1300ms);
    EXPECT_LT(watched, 5s);
}

TEST(Probe, StaleSaysSinceWhenInWallTime) {
    const std::string name = unique_name("since");
    keplershm::Writer writer(name, small_writer(100ms));
    publish_one_frame(writer);  // the last beat: its wall time is what the probe reports
    const Outcome o = run_probe({"--shm-name", name, "--max-age", "300ms"});
    EXPECT_EQ(o.status, 1) << o.out;
    const time_t last_beat = static_cast<time_t>(writer.header().heartbeat_realtime_ns / 1'000'000'000ull);
    char text[32];
    strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", gmtime(&last_beat));
    EXPECT_NE(o.err.find(std::string("writer stale since ") + text), std::string::npos) << o.err;
}

TEST(Probe, KilledWriterIsStaleOnceItsHeartbeatStoodStillForTheLimit) {
    const std::string name = unique_name("killed");
    const pid_t child = fork();
    if (child == 0) {  // a collector stand-in: publishes and heartbeats until SIGKILL
        keplershm::Writer writer(name, small_writer(100ms));
        for (;;) {
            publish_one_frame(writer);
            std::this_thread::sleep_for(50ms);
        }
    }
    Outcome o;
    for (int i = 0; i < 100 && o.status != 0; ++i) {  // until the child's segment exists
        std::this_thread::sleep_for(50ms);
        o = run_probe({"--shm-name", name, "--max-age", "400ms"});
    }
    ASSERT_EQ(o.status, 0) << o.err;
    kill(child, SIGKILL);
    waitpid(child, nullptr, 0);
    o = run_probe({"--shm-name", name, "--max-age", "400ms"});
    EXPECT_EQ(o.status, 1) << o.out;
    EXPECT_NE(o.err.find("stale"), std::string::npos) << o.err;
    EXPECT_NE(o.err.find("limit 0.4 s"), std::string::npos) << o.err;
    fs::remove("/dev/shm/" + name);  // a killed writer leaves its segment behind
}

TEST(Probe, RetiredSegmentIsUnhealthy) {
    const std::string name = unique_name("retired");
    keplershm::Writer writer(name, small_writer());
    publish_one_frame(writer);
    writer.close(/*keep_name=*/true);  // a clean stop that leaves the name, as a reader would find it
    const Outcome o = run_probe({"--shm-name", name, "--max-age", "1h"});
    EXPECT_EQ(o.status, 1);
    EXPECT_NE(o.err.find("retired"), std::string::npos) << o.err;
    fs::remove("/dev/shm/" + name);
}

TEST(Probe, MissingSegmentIsUnhealthy) {
    const Outcome o = run_probe({"--shm-name", unique_name("missing")});
    EXPECT_EQ(o.status, 1);
    EXPECT_NE(o.err.find("no segment"), std::string::npos) << o.err;
}

TEST(Probe, GarbageUnderTheNameIsUnhealthyNotACrash) {
    const std::string name = unique_name("garbage");
    {
        std::ofstream out("/dev/shm/" + name, std::ios::binary);
        std::string noise(8192, '\0');
        for (size_t i = 0; i < noise.size(); ++i) noise[i] = static_cast<char>((i * 2654435761u) >> 13);
        out << noise;
    }
    const Outcome o = run_probe({"--shm-name", name});
    EXPECT_EQ(o.status, 1) << "exit 1, not a signal";
    EXPECT_NE(o.err.find("not a segment this library reads"), std::string::npos) << o.err;
    fs::remove("/dev/shm/" + name);
}

TEST(Probe, SegmentTheUserCannotReadIsUnhealthyWithAHint) {
    if (geteuid() != 0) GTEST_SKIP() << "needs root to run the probe as another user (setpriv)";
    const std::string name = unique_name("unreadable");
    keplershm::WriterOptions options = small_writer();
    options.mode = 0600;  // owner only: 'nobody' may not read it
    keplershm::Writer writer(name, options);
    const Outcome o = run_probe({"--shm-name", name}, "65534");  // nobody:nogroup
    EXPECT_EQ(o.status, 1);
    EXPECT_NE(o.err.find("not readable by this user"), std::string::npos) << o.err;
}

TEST(Probe, GroupReadableSegmentIsHealthyForAnotherUserOfThatGroup) {
    if (geteuid() != 0) GTEST_SKIP() << "needs root to run the probe as another user (setpriv)";
    // The deployment's arrangement: collector root (group 65532 through fsGroup), mode 0640, the
    // estimator a non-root user in that group.
    const std::string name = unique_name("group");
    keplershm::Writer writer(name, small_writer());
    ASSERT_EQ(chown(("/dev/shm/" + name).c_str(), 0, 65532), 0);
    Heartbeating beating(writer, 200ms);
    const Outcome o = run_probe({"--shm-name", name},
                                "65532");  // setpriv --regid=65532: the group that may read it
    EXPECT_EQ(o.status, 0) << o.err;
}

/// A file for --alive-file whose mtime is `age` before now (negative: in the future); removed when destroyed.
class AliveFile {
public:
    explicit AliveFile(std::chrono::seconds age) : path_(fs::temp_directory_path() / unique_name("alive-file")) {
        std::ofstream(path_).put('\n');
        timespec times[2];
        clock_gettime(CLOCK_REALTIME, &times[1]);
        times[1].tv_sec -= age.count();
        times[0] = times[1];
        EXPECT_EQ(utimensat(AT_FDCWD, path_.c_str(), times, 0), 0);
    }
    ~AliveFile() { fs::remove(path_); }
    const std::string& path() const { return path_; }

private:
    std::string path_;
};

TEST(ProbeAliveFile, FreshFileIsHealthyAtOnce) {
    const AliveFile file(0s);
    const auto start = Clock::now();
    const Outcome o = run_probe({"--alive-file", file.path(), "--max-age", "30s"});
    EXPECT_LT(Clock::now() - start, 2s) << "a file's age needs no watching";
    EXPECT_EQ(o.status, 0) << o.err;
    EXPECT_NE(o.out.find("OK"), std::string::npos) << o.out;
    EXPECT_NE(o.out.find("limit 30.0 s"), std::string::npos) << o.out;
    EXPECT_EQ(run_probe({"--alive-file=" + file.path(), "--quiet"}).out, "") << "--quiet prints nothing when healthy";
    EXPECT_EQ(run_probe({"--alive-file", AliveFile(5s).path(), "--max-age", "30s"}).status, 0) << "5 s old, 30 s allowed";
}

TEST(ProbeAliveFile, StaleFileIsUnhealthyWithItsAge) {
    const AliveFile file(40s);
    const Outcome o = run_probe({"--alive-file", file.path(), "--max-age", "30s", "--quiet"});
    EXPECT_EQ(o.status, 1) << o.out;
    EXPECT_NE(o.err.find("stale: age 40"), std::string::npos) << o.err;
    EXPECT_NE(o.err.find("limit 30.0 s"), std::string::npos) << o.err;
    EXPECT_EQ(run_probe({"--alive-file", file.path()}).status, 1) << "40 s is past the default 10 s too";
}

TEST(ProbeAliveFile, FileFromTheFutureIsUnhealthy) {
    const AliveFile file(-60s);  // would otherwise pass for the next minute whatever the estimator does
    const Outcome o = run_probe({"--alive-file", file.path(), "--max-age", "30s"});
    EXPECT_EQ(o.status, 1) << o.out;
    EXPECT_NE(o.err.find("in the future"), std::string::npos) << o.err;
}

TEST(ProbeAliveFile, MissingFileOrDirectoryIsUnhealthy) {
    const std::string missing = fs::temp_directory_path() / unique_name("no-alive-file");
    Outcome o = run_probe({"--alive-file", missing, "--max-age", "30s"});
    EXPECT_EQ(o.status, 1);
    EXPECT_NE(o.err.find("no alive file " + missing), std::string::npos) << o.err;
    o = run_probe({"--alive-file", fs::temp_directory_path(), "--max-age", "30s"});
    EXPECT_EQ(o.status, 1);
    EXPECT_NE(o.err.find("not a regular file"), std::string::npos) << o.err;
}

TEST(ProbeAliveFile, UsageErrorsExitTwo) {
    const AliveFile file(0s);
    EXPECT_EQ(run_probe({"--alive-file"}).status, 2) << "a missing value";
    EXPECT_EQ(run_probe({"--alive-file="}).status, 2) << "an empty path";
    EXPECT_EQ(run_probe({"--alive-file", file.path(), "--shm-name", "keplershm"}).status, 2) << "a file or a segment";
    EXPECT_EQ(run_probe({"--alive-file", file.path(), "--max-age", "soon"}).status, 2);
}

TEST(Probe, UsageErrorsExitTwo) {
    EXPECT_EQ(run_probe({"--max-age", "soon"}).status, 2);
    EXPECT_EQ(run_probe({"--no-such-option"}).status, 2);
    EXPECT_EQ(run_probe({"--max-age"}).status, 2) << "a missing value";
    EXPECT_EQ(run_probe({"--shm-namex"}).status, 2) << "a prefix of an option is not that option";
    EXPECT_EQ(run_probe({"--shm-name", "../etc/passwd"}).status, 2);
    EXPECT_EQ(run_probe({"--help"}).status, 0);
}

}  // namespace
