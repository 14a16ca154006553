// Small HTTP downloads of model files (libcurl): shared by the model watcher (our model directories)
// and kepler-db (Kepler's model DB layout), so both fetch with the same limits and timeouts.
#pragma once

#include <filesystem>
#include <string>

namespace kepler_estimate {

/// GET `url` (redirects followed, 5 s connect / 60 s total timeout, at most 256 MiB).
/// Throws std::runtime_error with the URL and the reason.
[[nodiscard]] std::string http_get(const std::string& url);
/// Writes `bytes` to `path` through a temporary file and a rename, so a reader never sees half a file.
void write_atomically(const std::filesystem::path& path, const std::string& bytes);

}  // namespace kepler_estimate
