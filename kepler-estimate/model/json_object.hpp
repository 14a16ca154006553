// Every model format starts with JSON from an untrusted file (model.json, Kepler's weights, the
// metadata inside a Kepler zip, node_type_index.json): one parser, so a bad file reads the same way
// whichever format it was meant to be.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace kepler::estimate {

/// `text` parsed as a JSON object. Throws ModelError "<what>: not JSON (...)" or "<what>: top level is
/// not an object"; `what` names the file (or "<zip>:<entry>"). Size limits are the caller's: each
/// format reads its text through a reader that bounds it.
[[nodiscard]] nlohmann::json parse_json_object(const std::string& text, const std::string& what);

}  // namespace kepler::estimate
