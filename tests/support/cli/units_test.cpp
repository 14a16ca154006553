// Durations and sizes as the daemons read them (CLI11's unit transforms behind the documented grammar),
// held to the cases keplershm.units in Python is held to (tests/data/units_cases.json).
#include <gtest/gtest.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "support/cli/units.hpp"

namespace kepler::support {
namespace {

nlohmann::json cases(const char* table) {
    std::ifstream in(KEPLER_UNITS_CASES);
    return nlohmann::json::parse(in).at(table);
}

void expect_durations(const char* table, BareNumber bare) {
    for (const auto& c : cases(table)) {
        const std::string text = c[0];
        const auto got = parse_duration(text, bare);
        if (c[1].is_null()) {
            EXPECT_FALSE(got) << "'" << text << "' read as " << *got;
        } else {
            ASSERT_TRUE(got) << "'" << text << "' refused";
            EXPECT_DOUBLE_EQ(*got, c[1].get<double>()) << "'" << text << "'";
        }
    }
}

TEST(Units, DurationsInSecondsReadAsThePythonClientReadsThem) { expect_durations("durations_in_seconds", BareNumber::seconds); }

TEST(Units, DurationsInMillisecondsReadAsThePythonClientReadsThem) {
    expect_durations("durations_in_milliseconds", BareNumber::milliseconds);
}

TEST(Units, SizesReadAsThePythonClientReadsThem) {
    for (const auto& c : cases("sizes_in_bytes")) {
        const std::string text = c[0];
        const auto got = parse_size(text);
        if (c[1].is_null()) {
            EXPECT_FALSE(got) << "'" << text << "' read as " << *got;
        } else {
            EXPECT_EQ(got, std::optional<uint64_t>(c[1].get<uint64_t>())) << "'" << text << "'";
        }
    }
}

TEST(Units, AnOptionConvertsThenChecksItsRangeAndSaysWhatItExpected) {
    CLI::App app;
    double interval_s = 1;
    uint64_t cap = 0;
    app.add_option("--interval", interval_s)->transform(duration_units())->check(CLI::Range(0.01, 86400.0));
    app.add_option("--cap", cap)->transform(size_units());
    app.parse("--interval 250ms --cap 64Ki", false);
    EXPECT_DOUBLE_EQ(interval_s, 0.25);
    EXPECT_EQ(cap, 65536u);
    try {
        app.parse("--interval fast", false);
        FAIL() << "'fast' accepted";
    } catch (const CLI::ValidationError& e) {
        EXPECT_NE(std::string(e.what()).find("expected a duration like 500ms, 2s or 5m (a bare number is seconds), got 'fast'"),
                  std::string::npos)
            << e.what();
    }
    EXPECT_THROW(app.parse("--interval 2ms", false), CLI::ValidationError) << "below the range";
    EXPECT_THROW(app.parse("--cap 1.5G", false), CLI::ValidationError);
}

}  // namespace
}  // namespace kepler::support
