// libFuzzer: Kepler's XgboostFitTrainer_N.zip (kepler-estimate/model/kepler/kepler_zip.cpp through libzip,
// then kepler_xgboost_zip.cpp: metadata.json, the zone list, scaler.pkl; the boosters are stubbed, see
// fuzz_xgboost_stub.cpp). Two kinds of input, both written to one scratch file per process, reused:
//  - archive bytes as they are (libzip on hostile archives);
//  - "@@ <name>\n<bytes>" records separated by "\n@@ ", packed here into a valid archive (stored, CRCs
//    right), so that mutations reach the entries behind libzip's CRC check.
// Any input: the archive's entries (at most 64, plain names, within the size caps) or ModelError; a model
// loaded from them has features and distinct zones, or ModelError. Every small .json entry is
// also read as linear weights. A crash, another exception type escaping or a hang is a finding.
#include <fcntl.h>
#include <unistd.h>
#include <zip.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "model/kepler/kepler_predictor.hpp"
#include "model/kepler/kepler_zip.hpp"
#include "model/model_metadata.hpp"

namespace {

using namespace kepler::estimate;

/// One scratch file for the process, removed at exit. Opened by name for each input: libzip replaces
/// the file (a new inode) when it writes an archive.
class Scratch {
public:
    Scratch() {
        const char* dir = std::getenv("TMPDIR");
        path_ = std::string(dir != nullptr && *dir != '\0' ? dir : "/tmp") + "/fuzz_kepler_zip.XXXXXX";
        const int fd = ::mkstemp(path_.data());
        if (fd < 0) __builtin_trap();
        ::close(fd);
    }
    ~Scratch() { ::unlink(path_.c_str()); }
    Scratch(const Scratch&) = delete;
    Scratch& operator=(const Scratch&) = delete;

    const std::string& path() const { return path_; }

    void write(const uint8_t* data, size_t size) const {
        const int fd = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (fd < 0) __builtin_trap();
        size_t done = 0;
        while (done < size) {
            const ssize_t n = ::write(fd, data + done, size - done);
            if (n <= 0) __builtin_trap();
            done += static_cast<size_t>(n);
        }
        ::close(fd);
    }

    /// The "@@ name\n bytes" records as a stored archive; false when libzip will not write them (a name
    /// it refuses, two entries of one name): the input is then uninteresting.
    bool pack(std::string_view records) const {
        std::vector<std::pair<std::string_view, std::string_view>> entries;
        constexpr std::string_view kSeparator = "\n@@ ";
        records.remove_prefix(3);  // "@@ "
        while (entries.size() < 80) {
            const size_t end = records.find(kSeparator);
            const std::string_view record = records.substr(0, end);
            const size_t eol = record.find('\n');
            entries.emplace_back(record.substr(0, eol), eol == std::string_view::npos ? std::string_view() : record.substr(eol + 1));
            if (end == std::string_view::npos) break;
            records.remove_prefix(end + kSeparator.size());
        }
        int error = 0;
        zip_t* archive = zip_open(path_.c_str(), ZIP_CREATE | ZIP_TRUNCATE, &error);
        if (archive == nullptr) __builtin_trap();
        for (const auto& [name, bytes] : entries) {
            zip_source_t* source = zip_source_buffer(archive, bytes.data(), bytes.size(), 0);
            if (source == nullptr) __builtin_trap();
            const std::string entry(name);
            const zip_int64_t index = zip_file_add(archive, entry.c_str(), source, ZIP_FL_ENC_UTF_8);
            if (index < 0) {
                zip_source_free(source);
                zip_discard(archive);
                return false;
            }
            zip_set_file_compression(archive, static_cast<zip_uint64_t>(index), ZIP_CM_STORE, 0);
        }
        if (entries.empty() || zip_close(archive) != 0) {
            zip_discard(archive);
            return false;
        }
        return true;
    }

private:
    std::string path_;
};

bool plain(const std::string& name) {
    return !name.empty() && name.size() <= 128 && name.find('/') == std::string::npos &&
           name.find('\\') == std::string::npos && name != "." && name != "..";
}

bool ends_with(const std::string& s, const std::string& tail) {
    return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static const Scratch scratch;
    const std::string& path = scratch.path();
    const std::string_view input(reinterpret_cast<const char*>(data), size);
    if (input.substr(0, 3) == "@@ ") {
        if (!scratch.pack(input)) return 0;
    } else {
        scratch.write(data, size);
    }
    std::map<std::string, std::string> entries;
    try {
        entries = read_zip_entries(path);
    } catch (const ModelError&) {
        return 0;  // refused: the documented outcome for a bad archive
    }
    if (entries.size() > 64) __builtin_trap();
    uint64_t total = 0;
    for (const auto& [name, bytes] : entries) {
        if (!plain(name) || bytes.size() > (64u << 20)) __builtin_trap();
        total += bytes.size();
        if (ends_with(name, ".json") && bytes.size() <= (16u << 10)) {
            try {
                (void)parse_kepler_weights(bytes, false, path + ":" + name);
            } catch (const ModelError&) {
            }
        }
    }
    if (total > (256u << 20)) __builtin_trap();
    if (entries.count("metadata.json") == 0) return 0;
    try {
        const std::unique_ptr<KeplerPredictor> model = load_kepler_xgboost_zip(path, 1);
        if (model->features().empty() || model->zones().empty()) __builtin_trap();
        std::vector<ZoneKind> zones = model->zones();
        std::sort(zones.begin(), zones.end());
        if (std::adjacent_find(zones.begin(), zones.end()) != zones.end()) __builtin_trap();  // one output per zone
        if (model->predict(std::vector<double>(model->features().size(), 1.0)).size() != model->zones().size()) __builtin_trap();
    } catch (const ModelError&) {
    }
    return 0;
}
