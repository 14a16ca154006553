// collector.hpp — the kepler-collect daemon as a library: its options, the command-line parser and
// the collection loop. kepler-collect's main() is these three calls; tests run the same code.
//
// The data path of one interval (see DESIGN.md "The data path of one interval"): per-process source
// (eBPF or procfs, which also measures node CPU time on the processes' clock, never from /proc/stat)
// → node energy (RAPL, hwmon, the BMC) → workloads (cgroups, Kubernetes metadata) → one frame.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

namespace kepler::collect {

struct CollectorOptions {
    std::string shm_name;                                   // --shm-name (required)
    std::chrono::nanoseconds interval = std::chrono::seconds(1);
    std::string source = "auto";                            // auto | bpf | procfs
    std::string sysfs_root = "/sys";                        // powercap and hwmon live below it
    std::string proc_root = "/proc";
    std::string docker_data_root = "/var/lib/docker";       // dockerd's --data-root: container names
    std::string node_name;                                  // "": $NODE_NAME, else uname
    uint64_t frames = 0;                                    // stop after this many frames (0: until a signal)

    // Segment (libkeplershm WriterOptions).
    uint32_t process_capacity = 4096;
    uint32_t workload_capacity = 512;
    uint32_t string_capacity = 64 * 1024;
    uint32_t slot_count = 8;
    uint64_t max_segment_bytes = 256ull << 20;
    uint32_t segment_mode = 0640;
    bool replace_live = false;

    // eBPF.
    std::string bpf_attach = "auto";                        // auto | tp_btf | raw_tp | tracepoint
    uint32_t bpf_max_processes = 16384;
    uint32_t bpf_max_threads = 32768;
    bool hardware_counters = true;

    // Kubernetes metadata.
    std::string kube = "auto";                              // auto | off | api | kubelet
    std::string kube_api_url;
    std::string kubelet_url;
    std::string kube_token_file;
    std::string kube_ca_file;
    bool kube_insecure_skip_tls_verify = false;
    std::chrono::milliseconds metadata_refresh = std::chrono::seconds(30);

    // Platform power from the node's BMC over Redfish (off unless a config or an endpoint is given).
    std::string redfish_config;            // Kepler's BMC configuration (JSON): node name → BMC
    std::string redfish_endpoint;          // or one BMC given directly
    std::string redfish_bmc_id;            // its bmc_id label (default: the endpoint's host)
    std::string redfish_ca_file;
    bool redfish_insecure = false;
    bool redfish_allow_plain_http = false;  // credentials over http:// (refused otherwise)
    std::string redfish_auth = "session";  // session | basic
    std::string redfish_credentials_file;  // username on line 1, password on line 2 (or $KEPLER_BMC_*)
    std::chrono::milliseconds redfish_poll = std::chrono::seconds(2);
    std::chrono::milliseconds redfish_timeout = std::chrono::seconds(5);
    std::chrono::milliseconds redfish_max_age = std::chrono::seconds(10);

    // GPUs: NVIDIA through NVML, loaded at run time (a node without it simply has no NVIDIA zones).
    std::string gpu = "auto";                       // auto | off
    std::string nvml_library = "libnvidia-ml.so.1";  // a path, or a name the dynamic loader searches
    std::string dcgm_endpoint;                      // dcgm-exporter, for MIG activity without GPM; "" none
    std::chrono::nanoseconds gpu_rescan = std::chrono::seconds(10);  // GPU set checked this often; 0 never
    uint32_t gpu_usage_capacity = 4096;             // GPU_USAGE records per frame ((process, device) pairs)

    std::string log_level = "info";
};

/// Parses argv. Returns the options, or nullopt with `exit_code` set (0 after --help, 2 on bad usage;
/// the message is already printed).
[[nodiscard]] std::optional<CollectorOptions> parse_command_line(int argc, char** argv, int& exit_code);

/// Runs until SIGTERM/SIGINT (or `frames` frames), then retires the segment. Returns the process exit
/// code: 0 after a clean stop, 1 on a fatal error (logged).
int run_collector(const CollectorOptions& options);

}  // namespace kepler::collect
