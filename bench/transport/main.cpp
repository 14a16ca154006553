// keplershm-bench-transport: runs every transport at each size and prints the table of medians with ratios;
// --json writes the same numbers machine-readable. See bench/README.md.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>
#include <iostream>

#include "transport.hpp"

namespace {

double median(std::vector<double> values) {
    if (values.empty()) return 0;
    std::sort(values.begin(), values.end());
    return values[values.size() / 2];
}

struct Row {
    std::string method;
    size_t processes;
    size_t samples;
    double writer_us, reader_us, end_to_end_us, cpu_us;
};

Row summarize(const transport::Result& r) {
    std::vector<double> w, rd, e, c;
    for (const auto& s : r.samples) {
        w.push_back(s.writer_us);
        rd.push_back(s.reader_us);
        e.push_back(s.end_to_end_us);
        c.push_back(s.cpu_us);
    }
    return {r.method, r.processes, r.samples.size(), median(w), median(rd), median(e), median(c)};
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"Moves the same per-process content through each transport and reports medians."};
    std::vector<size_t> sizes{100, 1000, 10000};
    int iterations = 200;
    double budget = 3.0;
    std::string json_path;
    app.add_option("--sizes", sizes, "process counts")->delimiter(',');
    app.add_option("--iterations", iterations, "intervals per method and size (at most)");
    app.add_option("--budget", budget, "seconds per method and size (at least 3 samples)");
    app.add_option("--json", json_path, "write the results as JSON here");
    CLI11_PARSE(app, argc, argv);

    std::vector<Row> rows;
    for (size_t n : sizes) {
        rows.push_back(summarize(transport::run_floor(n, iterations, budget)));
        rows.push_back(summarize(transport::run_shm(n, iterations, budget, false)));
        rows.push_back(summarize(transport::run_shm(n, iterations, budget, true)));
        rows.push_back(summarize(transport::run_json_socket(n, iterations, budget)));
        rows.push_back(summarize(transport::run_prometheus(n, iterations, budget)));
    }
    auto find = [&](const std::string& method, size_t n) -> const Row& {
        return *std::find_if(rows.begin(), rows.end(), [&](const Row& r) { return r.method == method && r.processes == n; });
    };
    nlohmann::json out = nlohmann::json::array();
    fmt::print("{:>18} {:>7} {:>8} {:>11} {:>11} {:>12} {:>12} {:>9} {:>9}\n", "method", "procs", "samples", "writer_us",
               "reader_us", "end2end_us", "cpu%@1Hz", "x floor", "x shm");
    for (const Row& r : rows) {
        const double floor = find("floor_memcpy_read", r.processes).end_to_end_us;
        const double shm = find("shm_in_place", r.processes).end_to_end_us;
        const double cpu_percent = r.cpu_us / 1e6 * 100.0;  // one interval per second
        fmt::print("{:>18} {:>7} {:>8} {:>11.2f} {:>11.2f} {:>12.2f} {:>12.5f} {:>9.2f} {:>9.2f}\n", r.method, r.processes,
                   r.samples, r.writer_us, r.reader_us, r.end_to_end_us, cpu_percent, r.end_to_end_us / floor,
                   r.end_to_end_us / shm);
        out.push_back({{"method", r.method}, {"processes", r.processes}, {"samples", r.samples},
                       {"writer_us", r.writer_us}, {"reader_us", r.reader_us}, {"end_to_end_us", r.end_to_end_us},
                       {"cpu_us", r.cpu_us}, {"cpu_percent_at_1hz", cpu_percent},
                       {"ratio_to_floor", r.end_to_end_us / floor}, {"ratio_to_shm_in_place", r.end_to_end_us / shm}});
    }
    if (!json_path.empty()) std::ofstream(json_path) << out.dump(2) << "\n";
    return 0;
}
