// Command line of kepler-collect (CLI11).
#include <iostream>

#include <CLI/CLI.hpp>

#include "energy/gpu/dcgm_exporter.hpp"
#include "kepler_collect/collector.hpp"
#include "support/cli/units.hpp"
#include "support/version/build_info.hpp"

namespace kepler::collect {

namespace {

/// Options converted after parsing: durations in seconds and sizes in bytes as CLI11's unit transforms
/// leave them (support/cli/units.hpp), and the octal mode.
struct UnitOptions {
    double interval_s = 1;
    uint64_t max_bytes = 256ull << 20;
    double refresh_s = 30;
    std::string mode = "0640";
    double redfish_poll_s = 2;
    double redfish_timeout_s = 5;
    double redfish_max_age_s = 10;
    double gpu_rescan_s = 10;
};

/// A duration option: "500ms", "2s", "5m" (a bare number is seconds), shown with its default as written.
CLI::Option* add_duration(CLI::App& app, const std::string& flag, double& seconds, const std::string& help,
                          const std::string& default_text) {
    return support::duration_option(app.add_option(flag, seconds, help))->default_str(default_text);
}

void add_general_options(CLI::App& app, CollectorOptions& o, UnitOptions& units) {
    app.add_option("--shm-name", o.shm_name, "Segment name under /dev/shm")->required();
    add_duration(app, "--interval", units.interval_s, "Frame interval, e.g. 1s, 500ms (a bare number is seconds)", "1s")
        ->check(CLI::Range(0.01, 86400.0));
    app.add_option("--source", o.source, "Per-process source: auto (bpf, else procfs), bpf or procfs")
        ->check(CLI::IsMember({"auto", "bpf", "procfs"}))->capture_default_str();
    app.add_option("--sysfs-root", o.sysfs_root, "Root of sysfs for powercap/hwmon (tests point it at a fake tree)")
        ->capture_default_str();
    app.add_option("--proc-root", o.proc_root, "Root of procfs (the host's, with hostPID)")->capture_default_str();
    app.add_option("--docker-data-root", o.docker_data_root,
                   "dockerd's data root, where docker containers' names are read (containers/<id>/config.v2.json)")
        ->capture_default_str();
    app.add_option("--node-name", o.node_name, "Node name for the header and the pod query (default $NODE_NAME, else uname)");
    app.add_option("--frames", o.frames, "Stop after this many frames (0: run until SIGTERM/SIGINT)")->capture_default_str();
    app.add_option("--log-level", o.log_level, "debug, info, warning or error")
        ->check(CLI::IsMember({"debug", "info", "warning", "error"}))->capture_default_str();
}

void add_segment_options(CLI::App& app, CollectorOptions& o, UnitOptions& units) {
    app.add_option("--process-capacity", o.process_capacity, "Process records per frame (grows up to the byte cap)")
        ->check(CLI::Range(1u, 1u << 24))->capture_default_str();
    app.add_option("--workload-capacity", o.workload_capacity, "Workload records per frame")
        ->check(CLI::Range(1u, 1u << 20))->capture_default_str();
    app.add_option("--string-capacity", o.string_capacity, "Bytes of cgroup path text per frame")
        ->check(CLI::Range(256u, 1u << 28))->capture_default_str();
    app.add_option("--slots", o.slot_count, "Frames kept in the ring")->check(CLI::Range(2u, 4096u))->capture_default_str();
    support::size_option(app.add_option("--max-segment-bytes", units.max_bytes, "Cap on the segment size, e.g. 256Mi"))
        ->check(CLI::Range(uint64_t{4096}, UINT64_MAX))->default_str("256Mi");
    app.add_option("--segment-mode", units.mode, "File mode of the segment (octal)")->capture_default_str();
    app.add_flag("--replace-live", o.replace_live, "Take the name even from a live collector");
}

void add_bpf_options(CLI::App& app, CollectorOptions& o) {
    app.add_option("--bpf-attach", o.bpf_attach, "sched_switch attach: auto (tp_btf, raw_tp, tracepoint) or one of them")
        ->check(CLI::IsMember({"auto", "tp_btf", "raw_tp", "tracepoint"}))->capture_default_str();
    app.add_option("--bpf-max-processes", o.bpf_max_processes, "Entries of the eBPF process map (more are counted as dropped)")
        ->check(CLI::Range(64u, 1u << 22))->capture_default_str();
    app.add_option("--bpf-max-threads", o.bpf_max_threads, "Entries of the eBPF per-thread runtime map (LRU)")
        ->check(CLI::Range(64u, 1u << 22))->capture_default_str();
    app.add_flag("!--no-hardware-counters", o.hardware_counters, "Do not open cycles/instructions/LLC-miss counters");
}

void add_kube_options(CLI::App& app, CollectorOptions& o, UnitOptions& units) {
    app.add_option("--kube", o.kube, "Pod metadata: auto (in-cluster or when a URL is given), off, api, kubelet")
        ->check(CLI::IsMember({"auto", "off", "api", "kubelet"}))->capture_default_str();
    app.add_option("--kube-api-url", o.kube_api_url, "API server URL (default: in-cluster service)");
    app.add_option("--kubelet-url", o.kubelet_url, "Kubelet URL, e.g. https://$NODE_IP:10250 (needs nodes/proxy)");
    app.add_option("--kube-token-file", o.kube_token_file, "Bearer token file (default: the service account's)");
    app.add_option("--kube-ca-file", o.kube_ca_file, "CA bundle for the API server or kubelet");
    app.add_flag("--kube-insecure-skip-tls-verify", o.kube_insecure_skip_tls_verify, "Do not verify the server certificate");
    add_duration(app, "--metadata-refresh", units.refresh_s, "Pod list refresh period", "30s")->check(CLI::Range(0.001, 86400.0));
}

void add_gpu_options(CLI::App& app, CollectorOptions& o, UnitOptions& units) {
    app.add_option("--gpu", o.gpu, "GPUs as energy zones, with their per-process use: auto (NVIDIA through NVML when "
                   "its library loads; AMD and Intel through the kernel's DRM cards, hwmon and fdinfo) or off")->check(CLI::IsMember({"auto", "off"}))->capture_default_str();
    app.add_option("--nvml-library", o.nvml_library, "NVML to load: a path, or a name the dynamic loader searches")
        ->capture_default_str();
    app.add_option("--dcgm-endpoint", o.dcgm_endpoint,
                   "dcgm-exporter's metrics URL (http or https), read for MIG instances' activity on GPUs without GPM "
                   "(DCGM_FI_PROF_GR_ENGINE_ACTIVE; \"/metrics\" when no path is given)")
        ->check([](const std::string& endpoint) {
            try {
                (void)dcgm_metrics_url(endpoint);
                return std::string();
            } catch (const std::exception& e) {
                return std::string(e.what());
            }
        });
    add_duration(app, "--gpu-rescan", units.gpu_rescan_s,
                 "How often the node's GPUs are checked for new ones (a GPU or MIG layout added, a driver loaded "
                 "after the collector): a new set is published as a new segment generation (0: never)",
                 "10s")
        ->check(CLI::Range(0.0, 86400.0));
    app.add_option("--gpu-usage-capacity", o.gpu_usage_capacity, "(process, GPU) records a frame holds")
        ->check(CLI::Range(1u, 1u << 20))->capture_default_str();
}

void add_redfish_options(CLI::App& app, CollectorOptions& o, UnitOptions& units) {
    app.add_option("--redfish-config", o.redfish_config,
                   "Platform power from the BMC: Kepler's BMC configuration as JSON (nodes: node → BMC id; bmcs: endpoint, "
                   "username/password or *_file, ca_file, insecure, auth)");
    app.add_option("--redfish-endpoint", o.redfish_endpoint, "Or one BMC: https://host[:port]")->excludes("--redfish-config");
    app.add_option("--redfish-bmc-id", o.redfish_bmc_id, "bmc_id label of --redfish-endpoint (default: its host)");
    app.add_option("--redfish-ca-file", o.redfish_ca_file, "CA bundle to verify the BMC with");
    app.add_flag("--redfish-insecure", o.redfish_insecure, "Do not verify the BMC's certificate (lab BMCs; logged as a warning)");
    app.add_flag("--redfish-allow-plain-http", o.redfish_allow_plain_http,
                 "Send BMC credentials over an http:// endpoint, in clear text (lab BMCs; logged as a warning)");
    app.add_option("--redfish-auth", o.redfish_auth, "session (X-Auth-Token) or basic")
        ->check(CLI::IsMember({"session", "basic"}))->capture_default_str();
    app.add_option("--redfish-credentials-file", o.redfish_credentials_file,
                   "File with the BMC username (line 1) and password (line 2); $KEPLER_BMC_USERNAME/$KEPLER_BMC_PASSWORD win");
    // BMCs answer in hundreds of milliseconds: each of these is at least 100ms.
    const CLI::Range bmc_range(0.1, 86400.0);
    add_duration(app, "--redfish-poll", units.redfish_poll_s, "How often the BMC is read (its own thread)", "2s")->check(bmc_range);
    add_duration(app, "--redfish-timeout", units.redfish_timeout_s, "Limit for one BMC request", "5s")->check(bmc_range);
    add_duration(app, "--redfish-max-age", units.redfish_max_age_s, "A BMC reading older than this is stale: not used", "10s")
        ->check(bmc_range);
}

template <class Duration>
Duration from_seconds(double seconds) {
    return std::chrono::round<Duration>(std::chrono::duration<double>(seconds));  // 0.3 s is 300 ms, not 299
}

/// Converts the unit options into `o`; returns the usage error ("" = none).
std::string convert_unit_options(const UnitOptions& units, CollectorOptions& o) {
    o.interval = from_seconds<std::chrono::nanoseconds>(units.interval_s);
    o.metadata_refresh = from_seconds<std::chrono::milliseconds>(units.refresh_s);
    o.max_segment_bytes = units.max_bytes;
    o.redfish_poll = from_seconds<std::chrono::milliseconds>(units.redfish_poll_s);
    o.redfish_timeout = from_seconds<std::chrono::milliseconds>(units.redfish_timeout_s);
    o.redfish_max_age = from_seconds<std::chrono::milliseconds>(units.redfish_max_age_s);
    o.gpu_rescan = from_seconds<std::chrono::nanoseconds>(units.gpu_rescan_s);
    if (o.redfish_max_age <= o.redfish_poll) return "--redfish-max-age must be longer than --redfish-poll";
    try {
        size_t used = 0;
        const unsigned long m = std::stoul(units.mode, &used, 8);
        if (used != units.mode.size() || m > 0777) throw std::invalid_argument(units.mode);
        o.segment_mode = static_cast<uint32_t>(m);
    } catch (const std::exception&) {
        return "--segment-mode: expected an octal mode like 0640, got '" + units.mode + "'";
    }
    return {};
}

}  // namespace

std::optional<CollectorOptions> parse_command_line(int argc, char** argv, int& exit_code) {
    CollectorOptions o;
    UnitOptions units;
    CLI::App app{"kepler-collect: measures per-process activity and node energy and publishes one keplershm "
                 "frame per interval in shared memory (/dev/shm/NAME)."};
    app.get_formatter()->column_width(40);
    app.set_version_flag("--version", kepler::support::version_line("kepler-collect"));
    add_general_options(app, o, units);
    add_segment_options(app, o, units);
    add_bpf_options(app, o);
    add_kube_options(app, o, units);
    add_redfish_options(app, o, units);
    add_gpu_options(app, o, units);
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        exit_code = support::usage_exit(app, e);
        return std::nullopt;
    }
    if (const std::string error = convert_unit_options(units, o); !error.empty()) {
        std::cerr << "kepler-collect: " << error << "\nRun with --help for more information.\n";
        exit_code = 2;
        return std::nullopt;
    }
    exit_code = 0;
    return o;
}

}  // namespace kepler::collect
