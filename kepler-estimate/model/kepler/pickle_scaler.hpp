// The `scaler.pkl` of Kepler's XGBoost zips: a joblib pickle of a scikit-learn MaxAbsScaler, read
// WITHOUT running pickle code. A pickle is a program; this reader is a tiny interpreter that knows only
// the opcodes and the four globals such a file uses, and refuses anything else.
#pragma once

#include <string_view>
#include <vector>

namespace kepler::estimate {

/// A fitted MaxAbsScaler: transform(x)[i] = x[i] / scale[i]. Plain value.
struct MaxAbsScaler {
    std::vector<double> scale;  // sklearn's scale_ (max_abs_ with zeros replaced by 1)
};

/// Parses a joblib pickle of sklearn.preprocessing.MaxAbsScaler. Accepted globals:
/// sklearn.preprocessing._data.MaxAbsScaler, joblib.numpy_pickle.NumpyArrayWrapper, numpy.ndarray,
/// numpy.dtype; arrays must be 1-D little-endian float64 stored inline (joblib's layout). Any other
/// opcode, global or shape, and any truncation, throws ModelError naming the offset.
[[nodiscard]] MaxAbsScaler parse_max_abs_scaler(std::string_view bytes);

}  // namespace kepler::estimate
