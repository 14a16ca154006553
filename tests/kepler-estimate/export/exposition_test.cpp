// The text exposition writer: escapes, family blocks in name order, values that read back exactly,
// histograms. Each test reads the text back with the strict parser of support/metric_series.
#include <gtest/gtest.h>

#include <charconv>
#include <cmath>
#include <limits>
#include <random>

#include "export/exposition.hpp"
#include "support/metric_series.hpp"

using namespace kepler::estimate;
using namespace estimate_test;

namespace {

TEST(LabelSet, EscapesBackslashQuoteAndNewlineInOrder) {
    const LabelSet labels = {{"b", "x\\y"}, {"a", "say \"hi\"\nbye"}};
    EXPECT_EQ(labels.text(), R"(b="x\\y",a="say \"hi\"\nbye")");
    EXPECT_EQ(labels.with("c", "").text(), R"(b="x\\y",a="say \"hi\"\nbye",c="")");
    EXPECT_EQ(labels.text(), R"(b="x\\y",a="say \"hi\"\nbye")") << "with() leaves the original as it was";

    Exposition out;
    out.add("m", "help", MetricType::gauge, labels, 1);
    const auto families = parse_exposition(out.text());
    ASSERT_EQ(families.size(), 1u);
    ASSERT_EQ(families[0].metric.at(0).label.size(), 2u);
    EXPECT_EQ(families[0].metric[0].label[0].value, "x\\y");
    EXPECT_EQ(families[0].metric[0].label[1].value, "say \"hi\"\nbye");
}

TEST(LabelSet, EscapesAtEitherEndAndInRuns) {
    EXPECT_EQ(LabelSet({{"a", "\"x"}}).text(), R"(a="\"x")");
    EXPECT_EQ(LabelSet({{"a", "x\n"}}).text(), R"(a="x\n")");
    EXPECT_EQ(LabelSet({{"a", "\\\"\n"}}).text(), R"(a="\\\"\n")");
    EXPECT_EQ(LabelSet({{"a", ""}, {"b", "plain"}}).text(), R"(a="",b="plain")");
}

TEST(Exposition, SeriesLabelsAreTheEntitysThenWhatTheSeriesAdds) {
    Exposition out;
    Exposition::Family& f = out.family("m", "help with \"quotes\" kept", MetricType::gauge);
    const LabelSet entity = {{"pod", "p"}, {"ns", "n"}};
    const LabelSet mode = {{"source", "s"}, {"mode", "dynamic"}};
    out.add(f, entity, mode, 1);
    out.add(f, entity, LabelSet(), 2);
    out.add(f, LabelSet(), mode, 3);
    out.add(f, LabelSet(), LabelSet(), 4);
    EXPECT_EQ(out.text(),
              "# HELP m help with \"quotes\" kept\n# TYPE m gauge\n"
              "m{pod=\"p\",ns=\"n\",source=\"s\",mode=\"dynamic\"} 1\nm{pod=\"p\",ns=\"n\"} 2\n"
              "m{source=\"s\",mode=\"dynamic\"} 3\nm 4\n");
    EXPECT_EQ(parse_exposition(out.text()).at(0).metric.size(), 4u);
}

TEST(Exposition, FamiliesAreWholeBlocksInNameOrderAndEmptyOnesAreLeftOut) {
    Exposition out;
    Exposition::Family& zeta = out.family("zeta_total", "Z, with a \\ and a\nnewline", MetricType::counter);
    Exposition::Family& alpha = out.family("alpha", "A", MetricType::gauge);
    out.family("never_used", "no series", MetricType::gauge);
    out.add(zeta, {{"k", "1"}}, 1);
    out.add(alpha, {}, 2);
    out.add(zeta, {{"k", "2"}}, 3);  // interleaved with alpha, still one block
    EXPECT_EQ(&out.family("alpha", "another help", MetricType::counter), &alpha) << "one family per name";
    EXPECT_EQ(out.text(),
              "# HELP alpha A\n# TYPE alpha gauge\nalpha 2\n"
              "# HELP zeta_total Z, with a \\\\ and a\\nnewline\n# TYPE zeta_total counter\n"
              "zeta_total{k=\"1\"} 1\nzeta_total{k=\"2\"} 3\n");
    EXPECT_EQ(out.series(), 3u);
    std::string joined;
    for (const std::string_view block : out.blocks()) joined += block;
    EXPECT_EQ(joined, out.text());
}

TEST(Exposition, ValuesReadBackToTheSameDouble) {
    std::mt19937_64 random(7);
    std::uniform_real_distribution<double> mantissa(0, 1);
    std::uniform_int_distribution<int> exponent(-30, 30);
    for (int i = 0; i < 10000; ++i) {
        const double value = mantissa(random) * std::pow(10.0, exponent(random));
        std::string text;
        append_value(text, value);
        double back = -1;
        std::from_chars(text.data(), text.data() + text.size(), back);
        ASSERT_EQ(back, value) << text;
    }
    auto written = [](double value) {
        std::string text;
        append_value(text, value);
        return text;
    };
    EXPECT_EQ(written(3), "3");
    EXPECT_EQ(written(0.1), "0.1");
    EXPECT_EQ(written(std::numeric_limits<double>::quiet_NaN()), "NaN");
    EXPECT_EQ(written(std::numeric_limits<double>::infinity()), "+Inf");
    EXPECT_EQ(written(-std::numeric_limits<double>::infinity()), "-Inf");
}

TEST(Exposition, HistogramHasCumulativeBucketsSumAndCount) {
    Exposition out;
    const std::array<double, 2> bounds = {0.001, 0.1};
    const std::array<uint64_t, 3> cumulative = {2, 5, 6};
    out.add_histogram(out.family("latency_seconds", "L", MetricType::histogram), {{"model", "m"}}, bounds, cumulative, 0.75);
    EXPECT_EQ(out.text(),
              "# HELP latency_seconds L\n# TYPE latency_seconds histogram\n"
              "latency_seconds_bucket{model=\"m\",le=\"0.001\"} 2\nlatency_seconds_bucket{model=\"m\",le=\"0.1\"} 5\n"
              "latency_seconds_bucket{model=\"m\",le=\"+Inf\"} 6\nlatency_seconds_sum{model=\"m\"} 0.75\n"
              "latency_seconds_count{model=\"m\"} 6\n");
    const auto families = parse_exposition(out.text());
    ASSERT_EQ(families.at(0).metric.size(), 1u);
    EXPECT_EQ(families[0].metric[0].histogram.sample_count, 6u);
    EXPECT_EQ(families[0].metric[0].histogram.bucket.size(), 3u);
}

TEST(Exposition, ManySeriesAcrossChunksKeepEveryLineWhole) {
    Exposition out;
    Exposition::Family& f = out.family("big_total", "B", MetricType::counter);
    const std::string long_value(5000, 'x');  // longer than the first chunk: gets a chunk of its own size
    for (int i = 0; i < 20000; ++i) out.add(f, {{"i", std::to_string(i)}, {"pad", i % 1000 == 0 ? long_value : "p"}}, i);
    EXPECT_GT(out.blocks().size(), 2u) << "the family spans several chunks";
    const auto families = parse_exposition(out.text());
    ASSERT_EQ(families.at(0).metric.size(), 20000u);
    for (int i = 0; i < 20000; ++i) {
        ASSERT_EQ(families[0].metric[static_cast<size_t>(i)].counter.value, i);
        ASSERT_EQ(families[0].metric[static_cast<size_t>(i)].label.at(0).value, std::to_string(i));
    }
}

TEST(ParseExposition, RefusesMalformedText) {
    EXPECT_THROW((void)parse_exposition("m 1\n"), std::runtime_error) << "sample before its family";
    EXPECT_THROW((void)parse_exposition("# HELP m h\nm 1\n"), std::runtime_error) << "sample before its TYPE";
    EXPECT_THROW((void)parse_exposition("# HELP m h\n# TYPE m gauge\nn 1\n"), std::runtime_error) << "another family's sample";
    EXPECT_THROW((void)parse_exposition("# HELP m h\n# TYPE m gauge\nm{a=\"1} 1\n"), std::runtime_error);
    EXPECT_THROW((void)parse_exposition("# HELP m h\n# TYPE m gauge\nm one\n"), std::runtime_error);
    EXPECT_THROW((void)parse_exposition("# HELP m h\n# TYPE m gauge\nm 1\n# HELP m h\n# TYPE m gauge\nm 2\n"), std::runtime_error)
        << "a family split in two blocks";
}

}  // namespace
