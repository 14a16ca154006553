// Downloads of model files from a model server: shared by the model watcher (our model directories) and
// kepler-db (Kepler's model DB layout), so both fetch with the same client, limits, TLS and digests.
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>

namespace kepler::estimate {

/// Where model files come from (--model-server and its TLS options). Plain value.
struct ModelServer {
    std::string url;                    // empty: nothing is fetched
    std::string ca_file;                // PEM bundle for an https server; empty: the system store
    bool insecure_skip_verify = false;  // --model-server-insecure: the certificate is not checked
};

/// The largest model file fetched or loaded: a real Kepler zip is ~130 KB, our boosters a few MB, and the
/// estimator runs in a 256 MiB container.
inline constexpr size_t kMaxModelFileBytes = 16u << 20;

/// GET `url` from `server` (up to 3 redirects, never from https to http; 5 s to connect, 60 s in all; at
/// most kMaxModelFileBytes). Anything but HTTP 200 is an error. Throws std::runtime_error with the URL
/// and the reason.
[[nodiscard]] std::string fetch_bytes(const ModelServer& server, const std::string& url);
/// Writes `bytes` to `path` through a temporary file and a rename, so a reader never sees half a file.
void write_atomically(const std::filesystem::path& path, const std::string& bytes);

}  // namespace kepler::estimate
