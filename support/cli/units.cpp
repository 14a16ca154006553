#include "support/cli/units.hpp"

#include <fmt/format.h>

#include <charconv>
#include <map>
#include <regex>

namespace kepler::support {

namespace {

// The documented grammar, checked before CLI11 converts: CLI11 alone would also take a bare unit ("s" as
// 1 s), C's hexadecimal and octal numbers ("010" as 8) and, for sizes, "-1" or 2^64 as 2^64 - 1.
bool is_duration(const std::string& text) {
    static const std::regex grammar(R"(\s*(\d+(\.\d*)?|\.\d+)(e[+-]?\d+)?\s*(ns|us|ms|s|m|min|h)?\s*)",
                                    std::regex::icase | std::regex::optimize);
    return std::regex_match(text, grammar);
}

bool is_size(const std::string& text) {
    static const std::regex grammar(R"(\s*(0|[1-9]\d*)\s*(b|[kmgtpe]i?b?)?\s*)", std::regex::icase | std::regex::optimize);
    std::smatch parts;
    if (!std::regex_match(text, parts, grammar)) return false;
    uint64_t number = 0;
    const auto [end, error] = std::from_chars(&*parts[1].first, &*parts[1].first + parts[1].length(), number);
    return error == std::errc();  // a whole number of bytes that fits 64 bits (the unit's overflow CLI11 checks)
}

/// `convert` (CLI11's transform) on text that `matches` the grammar; otherwise `expected` says what was wanted.
CLI::Validator checked(bool (*matches)(const std::string&), std::string expected, CLI::Validator convert) {
    return CLI::Validator(
        [matches, expected = std::move(expected), convert = std::move(convert)](std::string& text) -> std::string {
            if (!matches(text)) return fmt::format("expected {}, got '{}'", expected, text);
            try {
                return convert(text);
            } catch (const CLI::ValidationError& e) {
                return e.what();
            }
        },
        "");  // the option's type name (DURATION, SIZE) says it in --help
}

/// Runs `transform` on `text` as CLI11 does on a command line, then reads the number it leaves.
template <class Number>
std::optional<Number> converted(const CLI::Validator& transform, std::string text) {
    if (!transform(text).empty()) return std::nullopt;
    Number value{};
    if (!CLI::detail::lexical_cast(text, value)) return std::nullopt;
    return value;
}

}  // namespace

CLI::Validator duration_units(BareNumber bare) {
    const double second = bare == BareNumber::seconds ? 1.0 : 1e3;
    std::map<std::string, double> units{{"ns", second * 1e-9}, {"us", second * 1e-6}, {"ms", second * 1e-3},
                                        {"s", second},         {"m", second * 60},    {"min", second * 60},
                                        {"h", second * 3600}};
    return checked(is_duration,
                   fmt::format("a duration like 500ms, 2s or 5m (a bare number is {})",
                               bare == BareNumber::seconds ? "seconds" : "milliseconds"),
                   CLI::AsNumberWithUnit(units, CLI::AsNumberWithUnit::CASE_INSENSITIVE, "UNIT"));
}

CLI::Validator size_units() {
    return checked(is_size, "a size like 4096, 64Ki or 256Mi (powers of 1024)", CLI::AsSizeValue(false));
}

CLI::Option* duration_option(CLI::Option* option, BareNumber bare) {
    return option->transform(duration_units(bare))->type_name("DURATION");
}

CLI::Option* size_option(CLI::Option* option) { return option->transform(size_units())->type_name("SIZE"); }

int usage_exit(const CLI::App& app, const CLI::ParseError& error) { return app.exit(error) == 0 ? 0 : 2; }

std::optional<double> parse_duration(std::string text, BareNumber bare) {
    return converted<double>(duration_units(bare), std::move(text));
}

std::optional<uint64_t> parse_size(std::string text) { return converted<uint64_t>(size_units(), std::move(text)); }

}  // namespace kepler::support
