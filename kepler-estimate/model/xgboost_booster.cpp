#include "model/xgboost_booster.hpp"

#include <fmt/format.h>
#include <xgboost/c_api.h>

#include <algorithm>
#include <cstdint>

#include "model/model_metadata.hpp"

namespace kepler::estimate {

namespace fs = std::filesystem;

namespace {

/// XGBoost's last error, first line only: the rest is a C++ stack trace, noise in a log line.
std::string last_error_line() {
    const char* text = XGBGetLastError();
    const std::string s = text ? text : "";
    return s.substr(0, s.find('\n'));
}

BoosterHandle create_handle() {
    BoosterHandle handle = nullptr;
    if (XGBoosterCreate(nullptr, 0, &handle) != 0) throw ModelError(fmt::format("XGBoosterCreate: {}", last_error_line()));
    return handle;
}

}  // namespace

void XgboostBooster::HandleFree::operator()(void* handle) const noexcept { XGBoosterFree(handle); }

XgboostBooster::XgboostBooster(const fs::path& file, int threads, size_t expected_features) {
    const std::string origin = file.string();
    std::error_code ec;
    const uintmax_t size = fs::file_size(file, ec);
    if (ec) throw ModelError(fmt::format("{}: {}", origin, ec.message()));
    if (size > kMaxBoosterBytes) throw ModelError(fmt::format("{}: {} bytes is too large for a booster", origin, size));
    handle_.reset(create_handle());
    if (XGBoosterLoadModel(handle_.get(), file.c_str()) != 0) {
        throw ModelError(fmt::format("{}: not an XGBoost model ({})", origin, last_error_line()));
    }
    configure(threads, expected_features, origin);
}

XgboostBooster::XgboostBooster(std::string_view model, const std::string& origin, int threads, size_t expected_features) {
    handle_.reset(create_handle());
    if (XGBoosterLoadModelFromBuffer(handle_.get(), model.data(), model.size()) != 0) {
        throw ModelError(fmt::format("{}: not an XGBoost model ({})", origin, last_error_line()));
    }
    configure(threads, expected_features, origin);
}

void XgboostBooster::configure(int threads, size_t expected_features, const std::string& origin) {
    const std::string nthread = std::to_string(std::max(1, threads));  // a per-node daemon must not take every core
    bst_ulong features = 0;
    if (XGBoosterSetParam(handle_.get(), "nthread", nthread.c_str()) != 0 || XGBoosterGetNumFeature(handle_.get(), &features) != 0) {
        throw ModelError(fmt::format("{}: {}", origin, last_error_line()));
    }
    if (features != expected_features) {
        throw ModelError(fmt::format("{}: booster takes {} features, metadata lists {}", origin, features, expected_features));
    }
}

double XgboostBooster::predict(const std::vector<float>& row) {
    // "cache_id": 0 is required by 1.7's PredictFromDense (else "Invalid cast, from Null to Integer").
    static constexpr const char* kConfig =
        R"({"type": 0, "training": false, "iteration_begin": 0, "iteration_end": 0, "strict_shape": false, "cache_id": 0, "missing": NaN})";
    const std::string array = fmt::format(R"({{"data": [{}, true], "shape": [1, {}], "typestr": "<f4", "version": 3}})",
                                          reinterpret_cast<uintptr_t>(row.data()), row.size());
    const bst_ulong* shape = nullptr;
    bst_ulong dims = 0;
    const float* result = nullptr;
    if (XGBoosterPredictFromDense(handle_.get(), array.c_str(), kConfig, nullptr, &shape, &dims, &result) != 0) {
        throw ModelError(fmt::format("XGBoost prediction failed: {}", last_error_line()));
    }
    if (result == nullptr || dims == 0 || shape == nullptr || shape[0] < 1) throw ModelError("XGBoost returned no prediction");
    return static_cast<double>(result[0]);
}

}  // namespace kepler::estimate
