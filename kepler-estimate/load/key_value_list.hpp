// The `KEY=VALUE,KEY=VALUE` option lists of `--model` specs (`curve:idle_w=W,max_w=W`,
// `kepler-db:DIR,source=S,...`): one splitter, so every spec refuses a malformed item the same way.
#pragma once

#include <string_view>
#include <vector>

namespace kepler::estimate {

/// One `key=value` item; views into the text given to split_key_value_list. Plain value.
struct KeyValue {
    std::string_view key;
    std::string_view value;
};

/// The comma-separated items of `list`, in order (a key given twice appears twice); an empty list and
/// a trailing comma give no item. The value is everything after the first '='. Throws
/// std::invalid_argument "<what> \"<item>\" is not KEY=VALUE" for an item without '=' (an empty item
/// included) and "<what> \"<item>\" has an empty key"; `what` is e.g. "curve parameter".
[[nodiscard]] std::vector<KeyValue> split_key_value_list(std::string_view list, std::string_view what);

}  // namespace kepler::estimate
