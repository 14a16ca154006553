#include "app/runner.hpp"

#include <fmt/format.h>
#include <fcntl.h>
#include <malloc.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>

#include "export/csv_export.hpp"
#include "export/metrics_server.hpp"
#include "export/prometheus_export.hpp"
#include "export/top_view.hpp"
#include "kube/pod_resources.hpp"
#include "load/model_watch.hpp"
#include "publish/estimates_publisher.hpp"
#include "read/frame_source.hpp"
#include "support/log/log.hpp"

namespace kepler::estimate {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

namespace {

/// /metrics over `exporter`, or nothing for --listen none.
std::unique_ptr<MetricsServer> serve_metrics(const std::string& listen, const PrometheusExport& exporter) {
    if (listen == "none") return nullptr;
    return std::make_unique<MetricsServer>(listen, [&exporter] { return exporter.render(); });
}

void log_lines(const std::vector<std::string>& lines) {
    for (const std::string& line : lines) log_info("{}", line);
}

void log_lines(const std::vector<PublishNote>& notes) {
    for (const PublishNote& note : notes) note.warning ? log_warn("{}", note.text) : log_info("{}", note.text);
}

void write_prometheus_text(const std::string& path, const Estimator& estimator, ExportOptions export_options) {
    export_options.include_timing = false;  // the file must be the same for the same input
    const std::string text = PrometheusExport(estimator, export_options).render().text();
    std::ofstream out(path, std::ios::trunc);
    out << text;
    if (!out) throw std::runtime_error(fmt::format("cannot write {}", path));
}

/// The per-frame outputs besides the exporters' snapshot. Null members are off.
struct FrameOutputs {
    CsvExport* csv = nullptr;
    EstimatesPublisher* publisher = nullptr;
    bool top = false;
};

/// One frame through the pipeline and to the per-frame outputs. Not thread-safe (pipeline thread).
void handle_frame(Estimator& estimator, const keplershm::FrameView& frame, const FrameOutputs& out) {
    if (frame.missed() > 0) estimator.count_missed(frame.missed());
    const bool estimated = estimator.process(frame);
    log_lines(estimator.take_model_messages());
    // Every model that answered is published, even when none could be primary (then there is no answer).
    if (out.publisher != nullptr) {
        log_lines(out.publisher->publish(frame, estimator.last_answers(), estimator.primary_model(), estimator.last_attribution()));
    }
    if (!estimated) {
        // The same failure every interval (e.g. frames without CPU metrics) is logged once, not at 1 Hz;
        // the health counters keep counting.
        static std::string last_logged;
        std::string error = estimator.last_error();
        const std::string kind = error.substr(error.find(':') + 1);
        if (kind != last_logged) log_warn("{}", error);
        last_logged = kind;
        return;
    }
    // No lock: this thread is the estimator's only writer, and scrapes read their own snapshot() copies.
    if (out.csv != nullptr) out.csv->write_interval(estimator);
    if (out.top) print_top(estimator, stdout);
}

/// Frames the reader refused since the last call, into the estimator's health counters.
void count_new_rejections(const FrameSource& source, Estimator& estimator, uint64_t& counted) {
    if (source.errors() == counted) return;
    estimator.count_rejected(source.errors() - counted);
    counted = source.errors();
}

/// --publish-estimates: null when off. Throws std::invalid_argument for a bad prefix.
/// --alive-file: the pipeline's sign of life for a liveness probe that needs no HTTP worker (a flood of
/// slow clients can hold every worker; this file cannot be held). Touched at most once a second.
class AliveFile {
public:
    explicit AliveFile(std::string path) : path_(std::move(path)) {}

    void touch() {
        if (path_.empty() || Clock::now() - last_ < std::chrono::seconds(1)) return;
        last_ = Clock::now();
        const int fd = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
        const bool touched = fd >= 0 && ::futimens(fd, nullptr) == 0;
        const int err = errno;
        if (fd >= 0) ::close(fd);
        if (!touched && !said_) log_warn("cannot touch --alive-file {}: {}", path_, std::strerror(err));
        said_ = !touched;  // said once per failure spell
    }

private:
    std::string path_;
    Clock::time_point last_{};
    bool said_ = false;
};

std::unique_ptr<EstimatesPublisher> make_publisher(const Options& o) {
    return o.publish_estimates.empty() ? nullptr : std::make_unique<EstimatesPublisher>(o.publish_estimates);
}

int run_replay(const Options& o, Estimator& estimator, const ExportOptions& export_options) {
    std::unique_ptr<EstimatesPublisher> publisher = make_publisher(o);
    FrameSource source = FrameSource::replay(o.replay);
    log_lines(estimator.refresh_models());
    std::unique_ptr<CsvExport> csv = o.csv.empty() ? nullptr : std::make_unique<CsvExport>(o.csv);
    const PrometheusExport exporter(estimator, export_options);
    const std::unique_ptr<MetricsServer> server = serve_metrics(o.listen_given ? o.listen : "none", exporter);
    const uint64_t total = source.recording_frames();
    const auto started = Clock::now();
    auto last_progress = started;
    keplershm::FrameView frame;
    uint64_t done = 0;
    uint64_t rejected = 0;
    while (source.next(frame, milliseconds(0)) == FrameSource::Result::frame) {
        count_new_rejections(source, estimator, rejected);
        handle_frame(estimator, frame, {csv.get(), publisher.get(), o.top});
        ++done;
        if (!o.quiet && Clock::now() - last_progress > std::chrono::seconds(1)) {
            last_progress = Clock::now();
            log_info("replay {}/{} frames", done, total);
        }
    }
    const double seconds = std::chrono::duration<double>(Clock::now() - started).count();
    if (!o.quiet) {
        log_info("replayed {} frames in {:.3f} s ({:.0f} frames/s)", done, seconds,
                 seconds > 0 ? static_cast<double>(done) / seconds : 0.0);
    }
    count_new_rejections(source, estimator, rejected);
    if (csv) csv->flush();
    if (!o.prom_out.empty()) write_prometheus_text(o.prom_out, estimator, export_options);
    // A damaged file is not a whole one: scripts must be able to tell (the estimates written are kept).
    return source.errors() == 0 && !source.truncated() ? 0 : 1;
}

/// --pod-resources: the kubelet's GPU allocations, read on a thread of their own; null when off, and when
/// the default socket is not there (a node without a kubelet: said once).
std::unique_ptr<PodResourcesWatch> watch_pod_resources(const Options& o) {
    if (o.pod_resources == "off") return nullptr;
    std::error_code ec;
    if (!o.pod_resources_given && !std::filesystem::exists(o.pod_resources, ec)) {
        log_info("no kubelet pod-resources socket at {} (not a Kubernetes node, or not mounted): GPUs are matched to pods "
                 "by their processes only", o.pod_resources);
        return nullptr;
    }
    PodResourcesOptions options;
    options.socket = o.pod_resources;
    options.refresh = std::chrono::milliseconds(static_cast<int64_t>(o.pod_resources_refresh_s * 1000));
    options.expiry = std::chrono::milliseconds(static_cast<int64_t>(o.pod_resources_expiry_s * 1000));
    return std::make_unique<PodResourcesWatch>(options);
}

int run_live(const Options& o, Estimator& estimator, const ExportOptions& export_options, const std::atomic<bool>& stop) {
    std::unique_ptr<EstimatesPublisher> publisher = make_publisher(o);
    FrameSource source = FrameSource::live(o.shm_name, reader_options(o));
    AliveFile alive(o.alive_file);
    // port 0 in --listen asks the kernel for a free one (tests use it: no race for a port that was free
    // a moment before), and the log must say which it got.
    const PrometheusExport exporter(estimator, export_options);
    const std::unique_ptr<MetricsServer> server = serve_metrics(o.listen, exporter);
    if (server) log_info("serving /metrics on {}", server->bound_address());
    ModelWatcher::Options watch;
    watch.model_server = model_server(o);
    ModelWatcher watcher(estimator.models().watched_models(), watch);
    std::unique_ptr<CsvExport> csv = o.csv.empty() ? nullptr : std::make_unique<CsvExport>(o.csv);
    const std::unique_ptr<PodResourcesWatch> pod_resources = watch_pod_resources(o);

    const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o.duration_s));
    keplershm::FrameView frame;
    uint64_t rejected = 0;
    while (!stop.load(std::memory_order_relaxed) && (o.duration_s <= 0 || Clock::now() < deadline)) {
        alive.touch();
        if (watcher.take_changes()) log_lines(estimator.refresh_models());
        const FrameSource::Result result = source.next(frame, milliseconds(250));
        count_new_rejections(source, estimator, rejected);
        if (result != FrameSource::Result::frame) {
            // Readers of the estimates segments judge them alive by their heartbeat (PROTOCOL.md §1.3).
            if (publisher) log_lines(publisher->heartbeat());
            continue;
        }
        if (pod_resources) estimator.set_gpu_allocations(pod_resources->current(), pod_resources->failures());
        handle_frame(estimator, frame, {csv.get(), publisher.get(), o.top});
        if (csv) csv->flush();
    }
    if (!o.prom_out.empty()) write_prometheus_text(o.prom_out, estimator, export_options);
    return 0;
}

}  // namespace

int run(const Options& o, const std::atomic<bool>& stop) {
    Estimator estimator(estimator_options(o));
    for (const std::string& warning : model_server_warnings(o)) log_warn("{}", warning);
    ExportOptions export_options = kepler::estimate::export_options(o);
    if (!o.replay.empty()) {
        export_options.include_timing = false;
        return run_replay(o, estimator, export_options);
    }
    return run_live(o, estimator, export_options, stop);
}

void configure_heap() {
    // One arena for all threads: each /metrics worker otherwise keeps an arena the size of the last
    // response (4 MB of text at 1,000 processes): with prometheus-cpp's families that was 56 MiB RSS with
    // 1 s scrapes against 35 MiB with one arena, at the same CPU (bench/kepler-estimate/README.md).
    mallopt(M_ARENA_MAX, 1);
    // Keep freed heap for the next scrape instead of returning it to the kernel after each one: a scrape
    // allocates and frees ~10 MB (snapshot, text chunks, gzip), and refaulting those pages every second
    // cost 0.80% → 0.57% of a core with 1 s scrapes of 1,000 processes, for 3 MiB more RSS.
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TRIM_THRESHOLD, 64 << 20);
}

}  // namespace kepler::estimate
