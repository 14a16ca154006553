// kepler-estimate: reads keplershm frames, estimates node power, attributes it and exports it.
#include <curl/curl.h>
#include <fmt/format.h>
#include <malloc.h>

#include <atomic>
#include <csignal>
#include <exception>

#include "app/runner.hpp"

namespace {
std::atomic<bool> g_stop{false};
extern "C" void on_signal(int) { g_stop.store(true); }
}  // namespace

int main(int argc, char** argv) {
    int exit_code = 0;
    const std::optional<kepler_estimate::Options> options = kepler_estimate::parse_options(argc, argv, exit_code);
    if (!options) return exit_code;
    std::signal(SIGINT, on_signal);
    std::signal(SIGTERM, on_signal);
    curl_global_init(CURL_GLOBAL_DEFAULT);  // before any thread: not thread-safe
    // One malloc arena for all threads: each /metrics worker otherwise keeps an arena the size of the last
    // response (4 MB of text at 1,000 processes): with prometheus-cpp's families that was 56 MiB RSS with
    // 1 s scrapes against 35 MiB with one arena, at the same CPU (bench/kepler-estimate/README.md).
    mallopt(M_ARENA_MAX, 1);
    // Keep freed heap for the next scrape instead of returning it to the kernel after each one: a scrape
    // allocates and frees ~10 MB (snapshot, text chunks, gzip), and refaulting those pages every second
    // cost 0.80% → 0.57% of a core with 1 s scrapes of 1,000 processes, for 3 MiB more RSS.
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TRIM_THRESHOLD, 64 << 20);
    int rc = 1;
    try {
        rc = kepler_estimate::run(*options, g_stop);
    } catch (const std::exception& e) {
        fmt::print(stderr, "kepler-estimate: {}\n", e.what());
        rc = 1;
    }
    curl_global_cleanup();
    return rc;
}
