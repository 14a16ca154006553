#include "model/kepler/kepler_zip.hpp"

#include <fmt/format.h>
#include <zip.h>

#include <memory>

#include "model/model_metadata.hpp"

namespace kepler::estimate {

namespace {

constexpr zip_int64_t kMaxEntries = 64;
// Kepler's zips are ~130 KB (a JSON booster, a pickle, two small JSONs); the estimator runs in a 256 MiB
// container, so the bounds leave it room whatever an archive claims.
constexpr zip_uint64_t kMaxEntryBytes = 16u << 20;
constexpr zip_uint64_t kMaxTotalBytes = 32u << 20;
constexpr uintmax_t kMaxArchiveBytes = 16u << 20;

struct ArchiveCloser {
    void operator()(zip_t* z) const { zip_discard(z); }
};
struct FileCloser {
    void operator()(zip_file_t* f) const { zip_fclose(f); }
};

/// Kepler's zips hold flat file names; anything that looks like a path is refused, not sanitised.
bool plain_name(const std::string& name) {
    return !name.empty() && name.size() <= 128 && name.find('/') == std::string::npos &&
           name.find('\\') == std::string::npos && name != "." && name != "..";
}

/// Inflates one entry, never more than `limit` bytes whatever the header declares.
std::string inflate(zip_t* archive, zip_int64_t index, zip_uint64_t limit, const std::string& origin) {
    std::unique_ptr<zip_file_t, FileCloser> file(zip_fopen_index(archive, static_cast<zip_uint64_t>(index), 0));
    if (!file) throw ModelError(fmt::format("{}: cannot open entry {} ({})", origin, index, zip_strerror(archive)));
    std::string out;
    char buffer[1 << 16];
    while (true) {
        const zip_int64_t n = zip_fread(file.get(), buffer, sizeof buffer);
        if (n < 0) throw ModelError(fmt::format("{}: entry {} is corrupt ({})", origin, index, zip_file_strerror(file.get())));
        if (n == 0) return out;
        if (out.size() + static_cast<zip_uint64_t>(n) > limit) {
            throw ModelError(fmt::format("{}: entry {} inflates beyond {} bytes", origin, index, limit));
        }
        out.append(buffer, static_cast<size_t>(n));
    }
}

}  // namespace

std::map<std::string, std::string> read_zip_entries(const std::filesystem::path& path) {
    const std::string origin = path.string();
    std::error_code ec;
    const uintmax_t size = std::filesystem::file_size(path, ec);
    if (ec) throw ModelError(fmt::format("{}: {}", origin, ec.message()));
    if (size > kMaxArchiveBytes) throw ModelError(fmt::format("{}: {} bytes is too large for a model archive", origin, size));
    int error = 0;
    std::unique_ptr<zip_t, ArchiveCloser> archive(zip_open(path.c_str(), ZIP_RDONLY | ZIP_CHECKCONS, &error));
    if (!archive) {
        zip_error_t why;
        zip_error_init_with_code(&why, error);
        const std::string text = zip_error_strerror(&why);
        zip_error_fini(&why);
        throw ModelError(fmt::format("{}: not a readable zip archive ({})", origin, text));
    }
    const zip_int64_t count = zip_get_num_entries(archive.get(), 0);
    if (count < 0 || count > kMaxEntries) throw ModelError(fmt::format("{}: {} entries (at most {})", origin, count, kMaxEntries));
    std::map<std::string, std::string> entries;
    zip_uint64_t total = 0;
    for (zip_int64_t i = 0; i < count; ++i) {
        zip_stat_t st;
        if (zip_stat_index(archive.get(), static_cast<zip_uint64_t>(i), 0, &st) != 0 || !(st.valid & ZIP_STAT_NAME)) {
            throw ModelError(fmt::format("{}: entry {} has no readable header", origin, i));
        }
        const std::string name = st.name;
        if (!plain_name(name)) throw ModelError(fmt::format("{}: entry name \"{}\" is not a plain file name", origin, name));
        if (entries.count(name) != 0) throw ModelError(fmt::format("{}: entry \"{}\" appears twice", origin, name));
        const zip_uint64_t limit = std::min(kMaxEntryBytes, kMaxTotalBytes - total);
        if ((st.valid & ZIP_STAT_SIZE) && st.size > limit) {
            throw ModelError(fmt::format("{}: entry \"{}\" declares {} bytes (limit {})", origin, name, st.size, limit));
        }
        std::string data = inflate(archive.get(), i, limit, origin);
        total += data.size();
        entries.emplace(name, std::move(data));
    }
    return entries;
}

}  // namespace kepler::estimate
