#include "model/json_object.hpp"

#include <fmt/format.h>

#include "model/model_metadata.hpp"

namespace kepler::estimate {

using nlohmann::json;

json parse_json_object(const std::string& text, const std::string& what) {
    json doc;
    try {
        doc = json::parse(text);
    } catch (const json::exception& e) {
        throw ModelError(fmt::format("{}: not JSON ({})", what, e.what()));
    }
    if (!doc.is_object()) throw ModelError(fmt::format("{}: top level is not an object", what));
    return doc;
}

}  // namespace kepler::estimate
