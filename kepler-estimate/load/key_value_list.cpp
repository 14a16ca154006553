#include "load/key_value_list.hpp"

#include <fmt/format.h>

#include <stdexcept>

namespace kepler::estimate {

std::vector<KeyValue> split_key_value_list(std::string_view list, std::string_view what) {
    std::vector<KeyValue> items;
    while (!list.empty()) {
        const size_t comma = list.find(',');
        const std::string_view item = list.substr(0, comma);
        list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
        const size_t eq = item.find('=');
        if (eq == std::string_view::npos) throw std::invalid_argument(fmt::format("{} \"{}\" is not KEY=VALUE", what, item));
        if (eq == 0) throw std::invalid_argument(fmt::format("{} \"{}\" has an empty key", what, item));
        items.push_back(KeyValue{item.substr(0, eq), item.substr(eq + 1)});
    }
    return items;
}

}  // namespace kepler::estimate
