// One XGBoost booster over the C API, shared by both model kinds that run boosters: MODELS.md's model
// directories (a booster file on disk) and Kepler's XgboostFitTrainer zips (a booster read from the
// archive into memory, never unpacked to disk).
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace kepler::estimate {

/// The largest booster file loaded: ours are a few MB, and the estimator runs in a 256 MiB container.
inline constexpr uintmax_t kMaxBoosterBytes = 16u << 20;

/// RAII over a BoosterHandle whose feature count was checked at load. Not thread-safe.
class XgboostBooster {
public:
    /// Loads the booster file at `file` (at most kMaxBoosterBytes); errors (ModelError) name the file. `threads`
    /// is XGBoost's nthread; `expected_features` the row width the metadata promises.
    XgboostBooster(const std::filesystem::path& file, int threads, size_t expected_features);
    /// Loads a booster from the bytes of `model`; `origin` (e.g. "<zip>:<entry>") names it in errors.
    XgboostBooster(std::string_view model, const std::string& origin, int threads, size_t expected_features);

    /// The raw output for one row of `expected_features` values. Throws ModelError.
    [[nodiscard]] double predict(const std::vector<float>& row);

private:
    /// Frees the handle; defined where xgboost/c_api.h is included, so this header need not be.
    struct HandleFree {
        void operator()(void* handle) const noexcept;
    };

    /// Applies nthread and checks the booster's feature count against the metadata's.
    void configure(int threads, size_t expected_features, const std::string& origin);

    // A member rather than a raw handle so that a constructor throwing after XGBoosterCreate still frees it.
    std::unique_ptr<void, HandleFree> handle_;
};

}  // namespace kepler::estimate
