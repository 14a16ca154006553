// Command line of kepler-estimate (CLI11) and its translation into component options.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "pipeline/estimator.hpp"
#include "export/prometheus_export.hpp"

namespace kepler::estimate {

/// Parsed command line. Plain value.
struct Options {
    std::string shm_name;            // live input
    std::string replay;              // recording input
    std::string csv;                 // estimates CSV (replay and live)
    std::string prom_out;            // Prometheus text written at the end
    std::string listen = "0.0.0.0:9102";
    std::string log_level = "info";  // debug, info, warning, error
    bool listen_given = false;
    std::vector<std::string> models;  // NAME=SPEC
    std::string primary;
    std::string idle_policy = "cpu-share";
    std::string gpu_idle_watts;       // "" (detect), "W" or "INDEX=W,..."
    double retention_s = 300;
    bool process_metrics = false;
    std::string metric_names = "kepler-0.7";  // kepler-0.7 | kepler-0.10 | both
    bool hide_estimated_idle = false;          // Kepler's EXPOSE_ESTIMATED_IDLE_POWER_METRICS=false
    size_t max_process_series = 1000;
    bool top = false;
    std::string model_server;
    std::string model_server_ca;     // PEM bundle for an https model server
    bool model_server_insecure = false;
    int xgboost_threads = 1;
    int external_wait_ms = 100;      // longest wait for an external --primary model's answer
    std::string publish_estimates;   // PREFIX: every model's answers in segments PREFIX-<model>
    double duration_s = 0;           // live: stop after this long (0: until SIGINT/SIGTERM)
    bool quiet = false;              // replay: no progress on stderr
    std::string segment_owner;       // uid or user accepted besides root as the owner of segments read; "any"
    uint32_t max_frame_mib = 64;     // segments whose slots hold larger frames are refused
    std::string alive_file;          // live: touched at least once a second while the pipeline runs
    std::string pod_resources = "/var/lib/kubelet/pod-resources/kubelet.sock";  // "off": not read
    bool pod_resources_given = false;
    double pod_resources_refresh_s = 10;
    double pod_resources_expiry_s = 60;  // the last allocations, believed this long while the kubelet fails
};

/// Parses argv. Returns nullopt when the program should exit with `exit_code` (help, bad usage).
[[nodiscard]] std::optional<Options> parse_options(int argc, char** argv, int& exit_code);
/// Throws std::invalid_argument naming the bad option.
[[nodiscard]] EstimatorOptions estimator_options(const Options& options);
/// Throws std::invalid_argument naming the bad option.
[[nodiscard]] ExportOptions export_options(const Options& options);
/// Where missing model files are fetched from, and how (--model-server and its TLS options). Throws
/// std::invalid_argument naming the bad option.
[[nodiscard]] ModelServer model_server(const Options& options);
/// What an operator should hear about the model server before anything is fetched (plain http, no
/// certificate check); empty when nothing.
[[nodiscard]] std::vector<std::string> model_server_warnings(const Options& options);
/// How segments (the collector's, external models') are opened. Throws std::invalid_argument naming the
/// bad option (an unknown user).
[[nodiscard]] keplershm::ReaderOptions reader_options(const Options& options);

}  // namespace kepler::estimate
