#include "load/model_watch.hpp"

#include <fmt/format.h>
#include <poll.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <fstream>
#include <stdexcept>

#include "load/http_fetch.hpp"
#include "model/model_metadata.hpp"
#include "support/log/log.hpp"

namespace kepler::estimate {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

void fetch_model(const ModelServer& server, const std::string& name, const fs::path& directory,
                 std::string_view metadata_sha256) {
    const std::string base = server.url.ends_with('/') ? server.url + name : server.url + "/" + name;
    const std::string metadata = fetch_bytes(server, base + "/model.json");
    // Validate everything before writing anything: a bad or altered answer must not replace a good model.
    check_sha256(metadata, metadata_sha256, base + "/model.json");
    const ModelMetadata meta = parse_model_metadata(metadata, directory, base + "/model.json");
    std::vector<std::string> boosters;
    for (const ModelTarget& target : meta.targets) {
        const std::string url = base + "/" + target.file.lexically_relative(directory).string();
        boosters.push_back(fetch_bytes(server, url));
        check_sha256(boosters.back(), target.sha256, url);
    }
    fs::create_directories(directory);
    for (size_t i = 0; i < meta.targets.size(); ++i) write_atomically(meta.targets[i].file, boosters[i]);
    write_atomically(directory / "model.json", metadata);
}

ModelWatcher::ModelWatcher(std::vector<WatchedModel> models, Options options) : models_(std::move(models)), options_(std::move(options)) {
    if (models_.empty()) return;
    inotify_fd_ = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    thread_ = std::thread([this] { run(); });
}

ModelWatcher::~ModelWatcher() {
    stop_.store(true, std::memory_order_relaxed);
    if (thread_.joinable()) thread_.join();
    if (inotify_fd_ >= 0) close(inotify_fd_);
}

void ModelWatcher::add_watches() {
    if (inotify_fd_ < 0) return;
    constexpr uint32_t kEvents = IN_CLOSE_WRITE | IN_MOVED_TO | IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_ATTRIB;
    for (const WatchedModel& model : models_) {
        const fs::path meta = metadata_path(model.path);
        // The model directory, and every existing ancestor up to the first one that exists, so that
        // creating the directory itself is seen too. Re-adding an existing watch is harmless.
        for (fs::path dir = meta.parent_path(); !dir.empty(); dir = dir.parent_path()) {
            if (inotify_add_watch(inotify_fd_, dir.c_str(), kEvents) >= 0) break;
            if (dir == dir.root_path()) break;
        }
        inotify_add_watch(inotify_fd_, meta.parent_path().c_str(), kEvents);
    }
}

void ModelWatcher::fetch_missing() {
    for (const WatchedModel& model : models_) {
        const fs::path meta = metadata_path(model.path);
        std::error_code ec;
        if (fs::exists(meta, ec)) continue;
        const fs::path directory = meta.parent_path();
        try {
            fetch_model(options_.model_server, directory.filename().string(), directory, model.metadata_sha256);
            log_info("fetched model {} from {}", directory.string(), options_.model_server.url);
        } catch (const std::exception& e) {
            fetch_errors_.fetch_add(1, std::memory_order_relaxed);
            log_warn("cannot fetch model {}: {}", directory.filename().string(), e.what());
        }
    }
}

void ModelWatcher::run() {
    Clock::time_point last_event{};
    bool pending = false;
    Clock::time_point next_poll = Clock::now() + options_.poll_every;
    Clock::time_point next_fetch = Clock::now();
    add_watches();
    alignas(inotify_event) char buffer[16 * 1024];
    while (!stop_.load(std::memory_order_relaxed)) {
        pollfd p{inotify_fd_, POLLIN, 0};
        const int ready = inotify_fd_ >= 0 ? poll(&p, 1, 100) : (usleep(100'000), 0);
        if (ready > 0) {
            while (read(inotify_fd_, buffer, sizeof buffer) > 0) {
            }
            pending = true;
            last_event = Clock::now();
            add_watches();  // a directory may have been created
        }
        const Clock::time_point now = Clock::now();
        if (pending && now - last_event >= options_.settle) {
            pending = false;
            changed_.store(true, std::memory_order_release);
        }
        if (now >= next_poll) {
            next_poll = now + options_.poll_every;
            add_watches();
            changed_.store(true, std::memory_order_release);
        }
        if (!options_.model_server.url.empty() && now >= next_fetch) {
            next_fetch = now + options_.fetch_every;
            fetch_missing();
        }
    }
}

}  // namespace kepler::estimate
