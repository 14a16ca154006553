// temp_dir.hpp — a fresh directory under the system's temporary directory, removed with everything in
// it at destruction: where the fakes' tests put certificates and files.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <stdexcept>
#include <string>
#include <system_error>

namespace kepler::testing {

class TempDir {
public:
    /// `stem` names the directory (`<stem>-XXXXXX`), so that a leftover says which test made it.
    explicit TempDir(const std::string& stem = "kepler-test") {
        std::string pattern = (std::filesystem::temp_directory_path() / (stem + "-XXXXXX")).string();
        if (mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed for " + pattern);
        path_ = pattern;
    }
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;
    ~TempDir() {
        std::error_code ignored;
        std::filesystem::remove_all(path_, ignored);
    }
    [[nodiscard]] const std::filesystem::path& path() const { return path_; }

private:
    std::filesystem::path path_;
};

}  // namespace kepler::testing
