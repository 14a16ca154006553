// (c) The Prometheus path: the writer keeps the interval's values as prometheus-cpp counters (eight per
// process, labelled by identity) served by its exposer; the reader scrapes them over HTTP on loopback
// (libcurl, keep-alive) and parses the text exposition back into records.
#include <curl/curl.h>
#include <prometheus/counter.h>
#include <prometheus/exposer.h>
#include <prometheus/registry.h>

#include <charconv>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <unordered_map>

#include "harness.hpp"

namespace transport {
namespace {

const char* const kNames[] = {"kepler_process_cpu_time_ns_total", "kepler_process_cycles_total",
                              "kepler_process_instructions_total", "kepler_process_cache_misses_total",
                              "kepler_process_page_cache_hits_total", "kepler_process_softirq_net_tx_total",
                              "kepler_process_softirq_net_rx_total", "kepler_process_softirq_block_total"};

uint64_t* field(keplershm_process& p, size_t k) {
    uint64_t* fields[] = {&p.cpu_time_ns, &p.cycles, &p.instructions, &p.cache_misses, &p.page_cache_hits,
                          &p.softirq[2], &p.softirq[3], &p.softirq[4]};
    return fields[k];
}

std::string_view label(std::string_view labels, std::string_view key) {
    const size_t at = labels.find(key);
    if (at == std::string_view::npos) return {};
    const size_t begin = at + key.size() + 2;  // key="
    return labels.substr(begin, labels.find('"', begin) - begin);
}

uint64_t to_u64(std::string_view text) {
    uint64_t value = 0;
    std::from_chars(text.data(), text.data() + text.size(), value);
    return value;
}

/// Text exposition → records, keyed by (pid, start time) like every other path.
void parse(std::string_view text, std::vector<keplershm_process>& out) {
    out.clear();
    std::unordered_map<uint64_t, size_t> index;
    size_t line_start = 0;
    while (line_start < text.size()) {
        size_t line_end = text.find('\n', line_start);
        if (line_end == std::string_view::npos) line_end = text.size();
        const std::string_view line = text.substr(line_start, line_end - line_start);
        line_start = line_end + 1;
        if (line.empty() || line[0] == '#') continue;
        const size_t brace = line.find('{');
        const size_t close = line.rfind('}');
        if (brace == std::string_view::npos || close == std::string_view::npos) continue;
        const std::string_view name = line.substr(0, brace);
        size_t k = 0;
        while (k < 8 && name != kNames[k]) ++k;
        if (k == 8) continue;
        const std::string_view labels = line.substr(brace + 1, close - brace - 1);
        const uint32_t pid = static_cast<uint32_t>(to_u64(label(labels, "pid")));
        const uint64_t start = to_u64(label(labels, "start_time"));
        auto [it, inserted] = index.emplace((uint64_t{pid} << 32) ^ start, out.size());
        if (inserted) {
            keplershm_process p{};
            p.pid = p.tgid = pid;
            p.start_time_ticks = start;
            p.cgroup_id = to_u64(label(labels, "cgroup_id"));
            const std::string_view comm = label(labels, "comm");
            std::memcpy(p.comm, comm.data(), std::min(comm.size(), sizeof p.comm - 1));
            out.push_back(p);
        }
        std::string_view value = line.substr(close + 2);
        double parsed = 0;
        std::from_chars(value.data(), value.data() + value.size(), parsed);
        *field(out[it->second], k) = static_cast<uint64_t>(parsed);
    }
}

size_t append(char* data, size_t size, size_t count, void* out) {
    static_cast<std::string*>(out)->append(data, size * count);
    return size * count;
}

}  // namespace

Result run_prometheus(size_t processes, int iterations, double budget_s) {
    auto registry = std::make_shared<prometheus::Registry>();
    std::vector<std::vector<prometheus::Counter*>> counters(processes);
    std::vector<prometheus::Family<prometheus::Counter>*> families;
    for (const char* name : kNames) families.push_back(&prometheus::BuildCounter().Name(name).Help(name).Register(*registry));
    const auto first = make_content(processes, 0);
    for (size_t i = 0; i < processes; ++i) {
        const keplershm_process& p = first[i];
        const prometheus::Labels labels{{"pid", std::to_string(p.pid)},
                                        {"start_time", std::to_string(p.start_time_ticks)},
                                        {"cgroup_id", std::to_string(p.cgroup_id)},
                                        {"comm", p.comm}};
        for (auto* family : families) counters[i].push_back(&family->Add(labels));
    }
    prometheus::Exposer exposer("127.0.0.1:0");
    exposer.RegisterCollectable(registry);
    const std::string url = "http://127.0.0.1:" + std::to_string(exposer.GetListeningPorts().at(0)) + "/metrics";
    std::vector<std::vector<keplershm_process>> content;
    for (int i = 0; i < 4; ++i) content.push_back(make_content(processes, static_cast<uint64_t>(i)));
    int poke[2];
    if (pipe(poke) != 0) throw std::runtime_error("pipe");

    auto writer_step = [&](int i) {
        const auto& records = content[static_cast<size_t>(i) % content.size()];
        for (size_t p = 0; p < processes; ++p) {
            for (size_t k = 0; k < 8; ++k) counters[p][k]->Increment(static_cast<double>(*field(const_cast<keplershm_process&>(records[p]), k)));
        }
    };
    auto after_publish = [&] {
        const char go = 1;
        if (write(poke[1], &go, 1) != 1) throw std::runtime_error("poke");
    };
    auto reader_loop = [&](int n, const Channel& channel) {
        CURL* curl = curl_easy_init();
        std::string body;
        curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
        curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, append);
        curl_easy_setopt(curl, CURLOPT_WRITEDATA, &body);
        std::vector<keplershm_process> records;
        volatile uint64_t sink = 0;
        for (int i = 0; i < n; ++i) {
            channel.ready();
            char go = 0;
            if (read(poke[0], &go, 1) != 1) break;  // Prometheus pulls: the scrape starts now
            const uint64_t cpu0 = clock_ns(CLOCK_PROCESS_CPUTIME_ID);
            const uint64_t started = clock_ns(CLOCK_MONOTONIC);
            body.clear();
            if (curl_easy_perform(curl) != CURLE_OK) break;
            parse(body, records);
            uint64_t sum = 0;
            for (const keplershm_process& p : records) sum += read_fields(p);
            sink = sink + sum;
            channel.report(ReaderReport{started, clock_ns(CLOCK_MONOTONIC), clock_ns(CLOCK_PROCESS_CPUTIME_ID) - cpu0});
        }
        curl_easy_cleanup(curl);
    };
    Result result = run_two_processes("prometheus_http", processes, iterations, budget_s, writer_step, after_publish, reader_loop);
    close(poke[0]);
    close(poke[1]);
    return result;
}

}  // namespace transport
