// (d) Kepler 0.7's sidecar style, done well: the writer serializes the interval with RapidJSON and sends
// it length-prefixed over a unix stream socket; the reader receives it whole and parses every field with
// simdjson's On-Demand API into records.
#include <sys/socket.h>

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>
#include <simdjson.h>

#include <cstring>
#include <stdexcept>

#include "harness.hpp"

namespace transport {
namespace {

const char* const kCounters[] = {"cpu_time_ns", "cycles", "instructions", "cache_misses", "page_cache_hits",
                                 "softirq_net_tx", "softirq_net_rx", "softirq_block"};

void serialize(const std::vector<keplershm_process>& records, rapidjson::StringBuffer& out) {
    out.Clear();
    rapidjson::Writer<rapidjson::StringBuffer> w(out);
    w.StartObject();
    w.Key("processes");
    w.StartArray();
    for (const keplershm_process& p : records) {
        w.StartObject();
        w.Key("pid"); w.Uint(p.pid);
        w.Key("start_time"); w.Uint64(p.start_time_ticks);
        w.Key("cgroup_id"); w.Uint64(p.cgroup_id);
        w.Key("comm"); w.String(p.comm);
        const uint64_t values[] = {p.cpu_time_ns, p.cycles, p.instructions, p.cache_misses, p.page_cache_hits,
                                   p.softirq[2], p.softirq[3], p.softirq[4]};
        for (size_t k = 0; k < 8; ++k) {
            w.Key(kCounters[k]);
            w.Uint64(values[k]);
        }
        w.EndObject();
    }
    w.EndArray();
    w.EndObject();
}

bool read_exact(int fd, void* data, size_t size) {
    auto* p = static_cast<char*>(data);
    while (size > 0) {
        const ssize_t n = read(fd, p, size);
        if (n <= 0) return false;
        p += n;
        size -= static_cast<size_t>(n);
    }
    return true;
}

bool write_exact(int fd, const void* data, size_t size) {
    const auto* p = static_cast<const char*>(data);
    while (size > 0) {
        const ssize_t n = write(fd, p, size);
        if (n <= 0) return false;
        p += n;
        size -= static_cast<size_t>(n);
    }
    return true;
}

void parse(simdjson::ondemand::parser& parser, const simdjson::padded_string_view json, std::vector<keplershm_process>& out) {
    out.clear();
    simdjson::ondemand::document doc = parser.iterate(json);
    for (simdjson::ondemand::object o : doc["processes"].get_array()) {
        keplershm_process p{};
        p.pid = p.tgid = static_cast<uint32_t>(uint64_t(o["pid"]));
        p.start_time_ticks = o["start_time"];
        p.cgroup_id = o["cgroup_id"];
        const std::string_view comm = o["comm"];
        std::memcpy(p.comm, comm.data(), std::min(comm.size(), sizeof p.comm - 1));
        p.cpu_time_ns = o["cpu_time_ns"];
        p.cycles = o["cycles"];
        p.instructions = o["instructions"];
        p.cache_misses = o["cache_misses"];
        p.page_cache_hits = o["page_cache_hits"];
        p.softirq[2] = o["softirq_net_tx"];
        p.softirq[3] = o["softirq_net_rx"];
        p.softirq[4] = o["softirq_block"];
        out.push_back(p);
    }
}

}  // namespace

Result run_json_socket(size_t processes, int iterations, double budget_s) {
    int sockets[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sockets) != 0) throw std::runtime_error("socketpair");
    std::vector<std::vector<keplershm_process>> content;
    for (int i = 0; i < 4; ++i) content.push_back(make_content(processes, static_cast<uint64_t>(i)));
    rapidjson::StringBuffer buffer;

    auto writer_step = [&](int i) {
        serialize(content[static_cast<size_t>(i) % content.size()], buffer);
        const uint32_t length = static_cast<uint32_t>(buffer.GetSize());
        if (!write_exact(sockets[0], &length, sizeof length) || !write_exact(sockets[0], buffer.GetString(), length)) {
            throw std::runtime_error("send");
        }
    };
    auto reader_loop = [&](int n, const Channel& channel) {
        close(sockets[0]);
        simdjson::ondemand::parser parser;
        std::vector<char> payload;
        std::vector<keplershm_process> records;
        volatile uint64_t sink = 0;
        for (int i = 0; i < n; ++i) {
            channel.ready();
            uint32_t length = 0;
            if (!read_exact(sockets[1], &length, sizeof length)) return;  // blocks until data
            const uint64_t cpu0 = clock_ns(CLOCK_PROCESS_CPUTIME_ID);
            const uint64_t started = clock_ns(CLOCK_MONOTONIC);
            payload.resize(length + simdjson::SIMDJSON_PADDING);
            if (!read_exact(sockets[1], payload.data(), length)) return;
            parse(parser, simdjson::padded_string_view(payload.data(), length, payload.size()), records);
            uint64_t sum = 0;
            for (const keplershm_process& p : records) sum += read_fields(p);
            sink = sink + sum;
            channel.report(ReaderReport{started, clock_ns(CLOCK_MONOTONIC), clock_ns(CLOCK_PROCESS_CPUTIME_ID) - cpu0});
        }
    };
    Result result = run_two_processes("json_unix_socket", processes, iterations, budget_s, writer_step, [] {}, reader_loop);
    close(sockets[0]);
    close(sockets[1]);
    return result;
}

}  // namespace transport
