// platform_latency SEGMENT FRAMES — how long a remote meter's reading waits before a frame carries it:
// for every platform zone, each time its read time (the reading's arrival) changes, the frame's end
// minus that arrival. Prints the median, p99 and max over FRAMES frames.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "keplershm/keplershm.hpp"

int main(int argc, char** argv) {
    if (argc != 3) {
        std::fprintf(stderr, "usage: platform_latency SEGMENT FRAMES\n");
        return 2;
    }
    keplershm::Reader reader = keplershm::Reader::open(argv[1]);
    const long frames = std::strtol(argv[2], nullptr, 10);
    std::map<uint32_t, uint64_t> last_read;
    std::vector<double> waits_ms;
    keplershm::FrameView view;
    for (long seen = 0; seen < frames;) {
        const keplershm::Status status = reader.next(std::chrono::seconds(10), view);
        if (status == keplershm::Status::lapped) continue;
        if (status != keplershm::Status::ok) break;
        ++seen;
        for (const keplershm_zone_sample& z : view.zones()) {
            if (view.segment().zones[z.zone_index].kind != KEPLERSHM_ZONE_PLATFORM || z.read_time_ns == 0) continue;
            auto [it, fresh] = last_read.try_emplace(z.zone_index, z.read_time_ns);
            if (!fresh && it->second != z.read_time_ns && view.interval_end_ns() >= z.read_time_ns) {
                waits_ms.push_back(static_cast<double>(view.interval_end_ns() - z.read_time_ns) / 1e6);
            }
            it->second = z.read_time_ns;
        }
    }
    if (waits_ms.empty()) {
        std::fprintf(stderr, "platform_latency: no platform zone changed its reading in %ld frames\n", frames);
        return 1;
    }
    std::sort(waits_ms.begin(), waits_ms.end());
    auto at = [&](double q) { return waits_ms[std::min(waits_ms.size() - 1, static_cast<size_t>(q * static_cast<double>(waits_ms.size())))]; };
    std::printf("  reading → frame: median %.1f ms, p99 %.1f ms, max %.1f ms over %zu readings\n", at(0.5), at(0.99),
                waits_ms.back(), waits_ms.size());
    return 0;
}
