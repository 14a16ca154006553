// keplershm-bench-feed: a synthetic writer publishes frames of N processes at a fixed rate; kepler-feed
// serves them to S in-process gRPC subscribers. Measured: kepler-feed's CPU time (from /proc, over the
// window) per frame and per subscriber, and the bytes of one Frame message with every field and with a
// two-field selection. A goal-setting benchmark, never pass/fail.
//   keplershm-bench-feed [seconds per point] [frames per second] [processes subscribers]
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>
#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>
#include <vector>

#include "keplershm/keplershm.hpp"
#include "keplershm_feed/v1/feed.grpc.pb.h"

namespace v1 = keplershm::feed::v1;
using namespace std::chrono_literals;

namespace {

/// utime + stime of `pid` in seconds.
double cpu_seconds(pid_t pid) {
    std::ifstream in(fmt::format("/proc/{}/stat", pid));
    std::string text((std::istreambuf_iterator<char>(in)), {});
    std::istringstream fields(text.substr(text.rfind(')') + 2));
    std::string skip;
    for (int i = 0; i < 11; ++i) fields >> skip;  // fields 3..13
    double utime = 0, stime = 0;
    fields >> utime >> stime;
    return (utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

void publish(keplershm::Writer& writer, uint32_t processes, uint64_t n) {
    keplershm::Draft draft = writer.begin();
    keplershm_frame& f = draft.frame();
    f.interval_start_ns = n * 1'000'000'000ull;
    f.interval_end_ns = f.interval_start_ns + 1'000'000'000ull;
    f.source = KEPLERSHM_SOURCE_SYNTHETIC;
    f.metric_mask = KEPLERSHM_METRIC_CPU_TIME;
    for (uint32_t i = 0; i < processes; ++i) {
        keplershm_process p{};
        p.pid = p.tgid = 1000 + i;
        p.start_time_ticks = 100 + i;
        p.cpu_time_ns = (n * 7919 + i * 104729) % 1'000'000'000ull;
        p.workload_index = KEPLERSHM_NO_WORKLOAD;
        keplershm::set_text(p.comm, fmt::format("proc-{}", i));
        draft.add_process(p);
    }
    writer.commit(draft);
}

struct Point {
    uint32_t processes, subscribers;
    double feed_cpu_per_frame_ms, per_subscriber_us;
    uint64_t frames, bytes_all, bytes_selected;
};

/// Starts kepler-feed on `name`; returns its pid and port.
pid_t start_feed(const std::string& name, const std::string& port_file, int& port) {
    std::filesystem::remove(port_file);
    const pid_t pid = fork();
    if (pid == 0) {
        execl(FEED_BINARY, FEED_BINARY, "--shm-name", name.c_str(), "--listen", "127.0.0.1:0", "--port-file",
              port_file.c_str(), "--max-subscribers", "200", "--queue-frames", "64", static_cast<char*>(nullptr));
        _exit(127);
    }
    for (int i = 0; i < 600 && !std::filesystem::exists(port_file); ++i) std::this_thread::sleep_for(50ms);
    std::ifstream(port_file) >> port;
    return pid;
}

uint64_t frame_bytes(v1::Feed::Stub& stub, const v1::SubscribeRequest& request) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + 30s);
    auto reader = stub.Subscribe(&context, request);
    v1::Frame frame;
    uint64_t bytes = 0;
    if (reader->Read(&frame)) {  // the newest frame, at once
        frame.clear_segment();   // sent once per subscription and generation, not with every frame
        bytes = frame.ByteSizeLong();
    }
    context.TryCancel();
    reader->Finish();
    return bytes;
}

Point measure(uint32_t processes, uint32_t subscribers, double seconds, double rate) {
    const std::string name = fmt::format("kshm-bench-feed-{}-{}", getpid(), std::random_device{}());
    keplershm::WriterOptions options;
    options.process_capacity = processes;
    options.slot_count = 8;
    keplershm::Writer writer(name, options);
    uint64_t n = 0;
    publish(writer, processes, ++n);
    int port = 0;
    const pid_t feed = start_feed(name, "/tmp/" + name + ".port", port);
    auto channel = grpc::CreateChannel(fmt::format("127.0.0.1:{}", port), grpc::InsecureChannelCredentials());
    auto stub = v1::Feed::NewStub(channel);

    std::atomic<bool> stop{false};
    std::atomic<uint64_t> received{0};
    std::vector<std::thread> readers;
    std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
    for (uint32_t s = 0; s < subscribers; ++s) contexts.push_back(std::make_unique<grpc::ClientContext>());
    for (uint32_t s = 0; s < subscribers; ++s) {
        readers.emplace_back([&, s] {
            auto reader = stub->Subscribe(contexts[s].get(), v1::SubscribeRequest{});
            v1::Frame frame;
            while (reader->Read(&frame)) ++received;
            reader->Finish();
        });
    }
    std::this_thread::sleep_for(500ms);  // subscriptions established
    const double cpu0 = cpu_seconds(feed);
    const uint64_t received0 = received;
    const auto start = std::chrono::steady_clock::now();
    const auto period = std::chrono::duration<double>(1.0 / rate);
    uint64_t frames = 0;
    while (std::chrono::steady_clock::now() - start < std::chrono::duration<double>(seconds)) {
        publish(writer, processes, ++n);
        ++frames;
        std::this_thread::sleep_until(start + period * static_cast<double>(frames));
    }
    std::this_thread::sleep_for(200ms);  // the last frame delivered
    const double cpu = cpu_seconds(feed) - cpu0;
    const uint64_t deliveries = received - received0;

    v1::SubscribeRequest selected;
    auto* section = selected.add_sections();
    section->set_name("processes");
    section->add_fields("pid");
    section->add_fields("cpu_time_ns");
    Point p{processes, subscribers, cpu / static_cast<double>(frames) * 1e3,
            deliveries ? cpu / static_cast<double>(deliveries) * 1e6 : 0, frames,
            frame_bytes(*stub, v1::SubscribeRequest{}), frame_bytes(*stub, selected)};
    stop = true;
    for (auto& c : contexts) c->TryCancel();
    for (auto& t : readers) t.join();
    kill(feed, SIGTERM);
    waitpid(feed, nullptr, 0);
    if (deliveries < frames * subscribers * 9 / 10)
        fmt::print(stderr, "note: {} of {} deliveries (subscribers fell behind or were dropped)\n", deliveries, frames * subscribers);
    return p;
}

}  // namespace

int main(int argc, char** argv) {
    const double seconds = argc > 1 ? std::stod(argv[1]) : 5;
    // Frames per second; 0: 5 Hz, 2 Hz at 10,000 processes (100 subscribers of 10,000-process frames at 5 Hz
    // would be ~200 MB/s of encoding on a shared 2-CPU machine).
    const double fixed_rate = argc > 2 ? std::stod(argv[2]) : 0;
    fmt::print("| processes | subscribers | Hz | frames | kepler-feed CPU ms per frame | µs per frame per subscriber | "
               "CPU % at 1 Hz | bytes per frame, all fields | bytes, processes pid+cpu_time_ns |\n"
               "|---|---|---|---|---|---|---|---|---|\n");
    // Optional: one point only (processes, subscribers).
    const std::vector<uint32_t> process_counts = argc > 4 ? std::vector<uint32_t>{static_cast<uint32_t>(std::stoul(argv[3]))}
                                                          : std::vector<uint32_t>{100, 1000, 10000};
    const std::vector<uint32_t> subscriber_counts = argc > 4 ? std::vector<uint32_t>{static_cast<uint32_t>(std::stoul(argv[4]))}
                                                             : std::vector<uint32_t>{1, 10, 100};
    for (const uint32_t processes : process_counts) {
        for (const uint32_t subscribers : subscriber_counts) {
            const double rate = fixed_rate > 0 ? fixed_rate : processes >= 10000 ? 2 : 5;
            const Point p = measure(processes, subscribers, seconds, rate);
            fmt::print("| {} | {} | {:g} | {} | {:.3f} | {:.1f} | {:.3f} | {} | {} |\n", p.processes, p.subscribers, rate,
                       p.frames, p.feed_cpu_per_frame_ms, p.per_subscriber_us, p.feed_cpu_per_frame_ms / 10.0,
                       p.bytes_all, p.bytes_selected);
            std::fflush(stdout);
        }
    }
}
