// Reading the small zip archives of Kepler's model DB (XgboostFitTrainer_N.zip) through libzip, as
// untrusted input: entry count, sizes and names are limited before anything is decompressed.
#pragma once

#include <filesystem>
#include <map>
#include <string>

namespace kepler::estimate {

/// Every entry of the archive at `path`, by name. Refuses (ModelError) archives with more than 64
/// entries, an archive over 16 MiB, an entry over 16 MiB or more than 32 MiB in all once inflated (zip bombs: the actual
/// inflated bytes are counted, not only the declared sizes), names that are not plain file names
/// (directories, "..", absolute paths), duplicates, and archives libzip finds inconsistent.
[[nodiscard]] std::map<std::string, std::string> read_zip_entries(const std::filesystem::path& path);

}  // namespace kepler::estimate
