// Waiting for model files: inotify on the model directories (and their parents, for directories
// that do not exist yet), plus an optional fetch of missing models from a model server over HTTP.
#pragma once

#include <atomic>
#include <chrono>
#include <filesystem>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "load/http_fetch.hpp"

namespace kepler::estimate {

/// A model directory (or metadata file) to watch, and the digest its model.json is pinned to (or empty).
struct WatchedModel {
    std::filesystem::path path;
    std::string metadata_sha256;
};

/// Fetches `<url>/<name>/model.json` and the boosters it names into `directory` (boosters first,
/// metadata last, each written to a temporary file and renamed, so a reader never sees half a
/// model). Nothing is written unless the metadata hashes to `metadata_sha256` (when set) and each
/// booster to its target's "sha256" (when set). Throws std::runtime_error with the URL and the reason.
void fetch_model(const ModelServer& server, const std::string& name, const std::filesystem::path& directory,
                 std::string_view metadata_sha256 = {});

/// Owns a background thread. Thread-safe: the pipeline thread only calls take_changes().
class ModelWatcher {
public:
    struct Options {
        std::chrono::milliseconds settle{200};        // quiet time after the last event before reloading
        std::chrono::milliseconds poll_every{10'000};  // also look now and then (filesystems without inotify)
        ModelServer model_server;                      // its url empty: no fetching
        std::chrono::milliseconds fetch_every{30'000};
    };
    ModelWatcher(std::vector<WatchedModel> models, Options options);
    ~ModelWatcher();
    ModelWatcher(const ModelWatcher&) = delete;
    ModelWatcher& operator=(const ModelWatcher&) = delete;

    /// True once after model files may have changed.
    bool take_changes() noexcept { return changed_.exchange(false, std::memory_order_acq_rel); }
    /// Fetch failures so far (each is logged).
    [[nodiscard]] uint64_t fetch_errors() const noexcept { return fetch_errors_.load(std::memory_order_relaxed); }

private:
    void run();
    void add_watches();
    void fetch_missing();

    std::vector<WatchedModel> models_;
    Options options_;
    int inotify_fd_ = -1;
    std::atomic<bool> changed_{true};
    std::atomic<bool> stop_{false};
    std::atomic<uint64_t> fetch_errors_{0};
    std::thread thread_;
};

}  // namespace kepler::estimate
