// For the fuzz targets of Kepler's model files: an XgboostBooster that loads nothing and predicts 0, so
// that kepler_xgboost_zip.cpp (the zip's metadata, zone list and scaler) is fuzzed without linking
// xgboost. The booster bytes themselves are xgboost's parser, not ours to fuzz.
#include <string>
#include <string_view>
#include <vector>

#include "model/model_metadata.hpp"
#include "model/xgboost_booster.hpp"

namespace kepler::estimate {

XgboostBooster::XgboostBooster(const std::filesystem::path& file, int, size_t)
    : XgboostBooster(std::string_view(), file.string(), 1, 0) {}

XgboostBooster::XgboostBooster(std::string_view model, const std::string& origin, int, size_t) {
    if (model.empty()) throw ModelError(origin + ": empty booster (fuzz stub)");
}

double XgboostBooster::predict(const std::vector<float>&) { return 0; }

void XgboostBooster::HandleFree::operator()(void*) const noexcept {}

}  // namespace kepler::estimate
