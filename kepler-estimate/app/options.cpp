#include "app/options.hpp"

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <pwd.h>

#include <array>
#include <cmath>
#include <iostream>
#include <stdexcept>

#include "support/cli/units.hpp"
#include "support/version/build_info.hpp"

namespace kepler::estimate {

std::optional<Options> parse_options(int argc, char** argv, int& exit_code) {
    Options o;
    CLI::App app{"kepler-estimate: node power (measured, XGBoost or curve) attributed to processes, containers, pods "
                 "and VMs, exported for Prometheus with Kepler's metric names"};
    app.set_version_flag("--version", kepler::support::version_line("kepler-estimate"));
    auto* input = app.add_option_group("input", "where frames come from");
    input->add_option("--shm-name", o.shm_name, "live shared-memory segment (waited for; collector restarts are followed)");
    input->add_option("--replay", o.replay, "recording file, estimated as fast as possible");
    input->require_option(1);
    app.add_option("--csv", o.csv, "write estimates as CSV: one row per interval x workload x zone");
    app.add_option("--prom-out", o.prom_out, "write the Prometheus text exposition at the end");
    auto* listen = app.add_option("--listen", o.listen, "serve /metrics on ADDR:PORT ('none': do not serve); replay serves only when given")
                       ->capture_default_str();
    app.add_option("--model", o.models,
                   "NAME=SPEC, repeatable; SPEC: measured | curve[:idle_w=W,max_w=W] | xgboost:PATH | external:SEGMENT | "
                   "kepler:FILE | kepler-db:DIR[,group=G,trainer=T,output=O,source=S,root=R,min_similarity=X]");
    app.add_option("--primary", o.primary, "model behind the Kepler metric names (default: best available)");
    app.add_option("--idle-policy", o.idle_policy, "idle energy: cpu-share | even (Kepler 0.7) | none (Kepler >= 0.10)")
        ->check(CLI::IsMember({"cpu-share", "even", "none"}))
        ->capture_default_str();
    app.add_option("--gpu-idle-watts", o.gpu_idle_watts,
                   "GPUs' idle power instead of detecting it (the lowest power seen while no process used the GPU): W for "
                   "every GPU, or INDEX=W,INDEX=W by device index");
    support::duration_option(
        app.add_option("--retention", o.retention_s, "how long series of workloads that are gone are kept (300, 5m)"))
        ->check(CLI::PositiveNumber)
        ->capture_default_str();
    auto* process_metrics = app.add_flag("--process-metrics,!--no-process-metrics", o.process_metrics,
                                         "export kepler_process_* series (default: on under kepler-0.10 names, as Kepler's "
                                         "default metricsLevel has them; off under kepler-0.7 only)");
    app.add_option("--metric-names", o.metric_names,
                   "Kepler name set: kepler-0.7 (kepler_container_joules_total, ...), kepler-0.10 "
                   "(kepler_container_cpu_joules_total, ...) or both")
        ->check(CLI::IsMember({"kepler-0.7", "kepler-0.10", "both"}))
        ->capture_default_str();
    app.add_flag("--hide-estimated-idle", o.hide_estimated_idle,
                 "Kepler 0.7 names: no mode=\"idle\" series when power is modelled (Kepler's default; then containers "
                 "no longer sum to the node)");
    app.add_option("--max-process-series", o.max_process_series, "cap on processes with series")->capture_default_str();
    app.add_flag("--top", o.top, "terminal view of the top processes and containers, each interval");
    app.add_option("--model-server", o.model_server,
                   "fetch missing xgboost models from URL/<model dir name>/model.json, and kepler-db folders from URL/<folder name>/ "
                   "(https://, or http:// on a trusted network; pin files with sha256= in --model)");
    app.add_option("--model-server-ca", o.model_server_ca, "PEM file of the CA that signed an https model server's certificate "
                   "(default: the system's store)")->check(CLI::ExistingFile);
    app.add_flag("--model-server-insecure", o.model_server_insecure,
                 "do not verify an https model server's certificate (lab servers only; logged as a warning)");
    support::duration_option(app.add_option("--external-wait", o.external_wait_ms,
                                            "how long an external --primary model's answer is waited for (a bare number is "
                                            "milliseconds; capped at a quarter of the interval; other models never wait on "
                                            "an external one)"),
                             support::BareNumber::milliseconds)
        ->check(CLI::Range(0, 1000))
        ->capture_default_str();
    app.add_option("--publish-estimates", o.publish_estimates,
                   "publish every model's answer to each frame in an estimates segment PREFIX-<model> (PROTOCOL.md section 8; "
                   "kepler-feed --estimates serves them beside the frames)");
    app.add_option("--xgboost-threads", o.xgboost_threads, "XGBoost nthread")->check(CLI::Range(1, 64))->capture_default_str();
    support::duration_option(app.add_option("--duration", o.duration_s, "live: stop after this long (30, 30s, 10m; 0: until SIGTERM)"))
        ->check(CLI::NonNegativeNumber);
    app.add_flag("--quiet", o.quiet, "replay: no progress on stderr");
    app.add_option("--log-level", o.log_level, "debug, info, warning or error")
        ->check(CLI::IsMember({"debug", "info", "warning", "error"}))->capture_default_str();
    app.add_option("--segment-owner", o.segment_owner,
                   "user (name or uid) accepted besides root as the owner of the segments read, e.g. an external model's; "
                   "'any' turns the owner and world-writable checks off (default: root or this process's user)");
    app.add_option("--max-frame-mib", o.max_frame_mib, "refuse segments whose slots hold frames larger than this (MiB)")
        ->check(CLI::Range(1, 4096))
        ->capture_default_str();
    app.add_option("--alive-file", o.alive_file,
                   "live: touch this file at least once a second while the pipeline runs (a liveness probe that needs "
                   "no free HTTP worker: keplershm-probe --alive-file)");
    auto* pod_resources = app.add_option("--pod-resources", o.pod_resources,
                                         "live: the kubelet's pod-resources socket, read for which container holds which GPU "
                                         "('off': not read; the default is read when it exists)")
                              ->capture_default_str();
    support::duration_option(app.add_option("--pod-resources-refresh", o.pod_resources_refresh_s,
                                            "how often the kubelet's GPU allocations are read (10, 10s, 1m)"))
        ->check(CLI::Range(0.1, 3600.0))
        ->capture_default_str();
    support::duration_option(app.add_option("--pod-resources-expiry", o.pod_resources_expiry_s,
                                            "how long the kubelet's last GPU allocations are believed while it does not "
                                            "answer; then they are dropped (30s, 5m)"))
        ->check(CLI::Range(1.0, 86400.0))
        ->capture_default_str();
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        exit_code = support::usage_exit(app, e);
        return std::nullopt;
    }
    if (o.pod_resources_expiry_s < o.pod_resources_refresh_s) {
        std::cerr << "kepler-estimate: --pod-resources-expiry must be at least --pod-resources-refresh (one call to answer)\n";
        exit_code = 2;
        return std::nullopt;
    }
    o.listen_given = listen->count() > 0;
    o.pod_resources_given = pod_resources->count() > 0;
    if (process_metrics->count() == 0) o.process_metrics = o.metric_names != "kepler-0.7";
    return o;
}

ExportOptions export_options(const Options& o) {
    ExportOptions e;
    e.process_metrics = o.process_metrics;
    const std::optional<MetricNames> names = metric_names_from_string(o.metric_names);
    if (!names) throw std::invalid_argument(fmt::format("--metric-names {} is not kepler-0.7, kepler-0.10 or both", o.metric_names));
    e.names = *names;
    e.estimated_idle = !o.hide_estimated_idle;
    return e;
}

ModelServer model_server(const Options& o) {
    if (!o.model_server.empty() && o.model_server.rfind("http://", 0) != 0 && o.model_server.rfind("https://", 0) != 0) {
        throw std::invalid_argument(fmt::format("--model-server {} is not an http:// or https:// URL", o.model_server));
    }
    if (o.model_server.empty() && (!o.model_server_ca.empty() || o.model_server_insecure)) {
        throw std::invalid_argument("--model-server-ca and --model-server-insecure need --model-server");
    }
    return ModelServer{o.model_server, o.model_server_ca, o.model_server_insecure};
}

std::vector<std::string> model_server_warnings(const Options& o) {
    std::vector<std::string> out;
    if (o.model_server.rfind("http://", 0) == 0) {
        out.push_back(fmt::format("WARNING: --model-server {} is plain http: model files can be altered on the way unless "
                                  "pinned with sha256= in --model",
                                  o.model_server));
    }
    if (o.model_server_insecure) {
        out.push_back(fmt::format("WARNING: --model-server-insecure: the certificate of {} is NOT verified; anyone on the "
                                  "path can serve models",
                                  o.model_server));
    }
    return out;
}

keplershm::ReaderOptions reader_options(const Options& o) {
    keplershm::ReaderOptions r;
    r.max_frame_bytes = uint64_t{o.max_frame_mib} << 20;
    if (o.segment_owner.empty()) return r;
    if (o.segment_owner == "any") {
        r.any_owner = true;
        return r;
    }
    if (o.segment_owner.find_first_not_of("0123456789") == std::string::npos && o.segment_owner.size() <= 9) {
        r.segment_owner = static_cast<uint32_t>(std::stoul(o.segment_owner));
        return r;
    }
    passwd entry{};
    passwd* found = nullptr;
    std::array<char, 4096> text{};
    if (getpwnam_r(o.segment_owner.c_str(), &entry, text.data(), text.size(), &found) != 0 || found == nullptr) {
        throw std::invalid_argument(fmt::format("--segment-owner {} is not a user name, a uid or 'any'", o.segment_owner));
    }
    r.segment_owner = found->pw_uid;
    return r;
}

EstimatorOptions estimator_options(const Options& o) {
    EstimatorOptions e;
    for (const std::string& text : o.models) e.models.push_back(parse_model_spec(text));
    for (size_t i = 0; i < e.models.size(); ++i) {
        for (size_t j = 0; j < i; ++j) {
            if (e.models[i].name == e.models[j].name) throw std::invalid_argument(fmt::format("model name {} given twice", e.models[i].name));
        }
    }
    if (!o.primary.empty()) e.primary = o.primary;
    const std::optional<IdlePolicy> policy = idle_policy_from_string(o.idle_policy);
    if (!policy) throw std::invalid_argument(fmt::format("--idle-policy {} is not cpu-share, even or none", o.idle_policy));
    e.idle_policy = *policy;
    if (!std::isfinite(o.retention_s) || o.retention_s <= 0 || o.retention_s > 1e7) {
        throw std::invalid_argument("--retention must be between 0 and 10^7 seconds");
    }
    e.ledger.retention_ns = static_cast<uint64_t>(o.retention_s * 1e9);
    e.ledger.process_series_cap = o.max_process_series;
    e.model_set.xgboost_threads = o.xgboost_threads;
    e.model_set.model_server = model_server(o);
    e.model_set.external_wait = std::chrono::milliseconds(o.external_wait_ms);
    e.model_set.external_reader = reader_options(o);
    if (!o.gpu_idle_watts.empty()) e.model_set.gpu_idle = parse_gpu_idle_watts(o.gpu_idle_watts);
    return e;
}

}  // namespace kepler::estimate
