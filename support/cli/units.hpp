// The daemons' command lines: durations and sizes converted by CLI11's own unit transforms
// (CLI::AsNumberWithUnit, CLI::AsSizeValue). keplershm.units in Python reads the same grammar, and
// tests/data/units_cases.json holds both to the same answers:
//   duration  NUMBER [UNIT]  NUMBER as CLI11 reads a double (2, 2.5, 1e3); UNIT ns, us, ms, s, m or min, h,
//                            in any case, a space allowed before it. A bare number is in the option's own
//                            unit (seconds, or milliseconds where the option says so). CLI11 hands the
//                            converted number on with six significant digits ("1234567ms" is 1234.57 s).
//   size      WHOLE [UNIT]   UNIT b, k, kb, ki, kib, m, mb, mi, mib, g.., t.., p.., e.., any case: all powers
//                            of 1024 (kb as ki), as CLI11 reads them.
// Ranges are each option's own (CLI::Range after the transform, or the daemon's checks).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>

namespace kepler::support {

/// What a duration option's bare number counts.
enum class BareNumber { seconds, milliseconds };

/// Transform for a numeric option: "500ms" becomes 0.5 for a seconds option, 500 for a milliseconds one.
[[nodiscard]] CLI::Validator duration_units(BareNumber bare = BareNumber::seconds);
/// Transform for an unsigned 64-bit option: "256Mi" becomes 268435456.
[[nodiscard]] CLI::Validator size_units();

/// `option` (numeric) reads the duration grammar, shown as DURATION in --help.
CLI::Option* duration_option(CLI::Option* option, BareNumber bare = BareNumber::seconds);
/// `option` (uint64_t) reads the size grammar, shown as SIZE in --help.
CLI::Option* size_option(CLI::Option* option);

/// Prints CLI11's answer to a parse error (help, version, or the usage error) and returns the exit status:
/// 0 after --help or --version, 2 for bad usage (CLI11's own codes are 100 and up).
[[nodiscard]] int usage_exit(const CLI::App& app, const CLI::ParseError& error);

/// The same conversions outside a command line: nullopt when the text does not read.
[[nodiscard]] std::optional<double> parse_duration(std::string text, BareNumber bare = BareNumber::seconds);
[[nodiscard]] std::optional<uint64_t> parse_size(std::string text);

}  // namespace kepler::support
