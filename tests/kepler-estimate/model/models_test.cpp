// Node models without XGBoost: model specs, the built-in curve, measured power, choice and refusal,
// and A/B export (Kepler names carry the primary only; kepler_model_* carries every model).
#include <gtest/gtest.h>

#include "pipeline/estimator.hpp"
#include "app/options.hpp"
#include "export/prometheus_export.hpp"
#include "load/key_value_list.hpp"
#include "load/model_spec.hpp"
#include "support/metric_series.hpp"
#include "support/test_frames.hpp"

using namespace kepler::estimate;
using namespace estimate_test;

namespace {

constexpr uint64_t kSecond = 1'000'000'000ull;

const ModelReport& report(const Estimator& e, const std::string& name) {
    static std::vector<ModelReport> keep;
    keep = e.models().reports();
    for (const ModelReport& r : keep) {
        if (r.name == name) return r;
    }
    throw std::runtime_error("no model " + name);
}

}  // namespace

TEST(ModelSpec, ParsesTheThreeKinds) {
    const ModelSpec m = parse_model_spec("meter=measured");
    EXPECT_EQ(m.kind, ModelSpec::Kind::measured);
    const ModelSpec c = parse_model_spec("c2=curve:idle_w=1.5,max_w=4");
    EXPECT_EQ(c.kind, ModelSpec::Kind::curve);
    EXPECT_DOUBLE_EQ(c.curve.idle_w, 1.5);
    EXPECT_DOUBLE_EQ(c.curve.max_w, 4.0);
    const ModelSpec d = parse_model_spec("plain=curve");
    EXPECT_DOUBLE_EQ(d.curve.idle_w, 0.74);
    EXPECT_DOUBLE_EQ(d.curve.max_w, 3.5);
    const ModelSpec x = parse_model_spec("xgb=xgboost:/models/nx12");
    EXPECT_EQ(x.kind, ModelSpec::Kind::xgboost);
    EXPECT_EQ(x.path, "/models/nx12");
    const ModelSpec e = parse_model_spec("py=external:notebook-estimates");
    EXPECT_EQ(e.kind, ModelSpec::Kind::external);
    EXPECT_EQ(e.source, "notebook-estimates");
}

TEST(ModelSpec, RejectsBadSpecsWithTheBadPart) {
    for (const char* bad : {"nonsense", "=curve", "a b=curve", "x=curve:idle_w=abc", "x=curve:max_w=1,idle_w=2",
                            "x=curve:volts=3", "x=xgboost", "x=xgboost:", "x=external", "x=external:", "x=linear", "x=measured:foo", "x=curve:idle_w=-1"}) {
        EXPECT_THROW((void)parse_model_spec(bad), std::invalid_argument) << bad;
    }
    try {
        (void)parse_model_spec("x=curve:idle_w=abc");
    } catch (const std::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find("abc"), std::string::npos);
    }
}

// A file a spec names may be pinned by its SHA-256; kepler-db, which picks its file at run time, may not.
TEST(ModelSpec, AFileSpecCarriesItsPinnedDigest) {
    const std::string digest(64, 'A');
    const ModelSpec x = parse_model_spec("xgb=xgboost:/models/nx12,sha256=" + digest);
    EXPECT_EQ(x.path, "/models/nx12");
    EXPECT_EQ(x.sha256, std::string(64, 'a')) << "kept in lower case";
    const ModelSpec k = parse_model_spec("k=kepler:/db/Xgb_0.zip,sha256=" + std::string(64, '0'));
    EXPECT_EQ(k.path, "/db/Xgb_0.zip");
    EXPECT_EQ(k.sha256, std::string(64, '0'));
    EXPECT_TRUE(parse_model_spec("xgb=xgboost:/models/a,b").sha256.empty()) << "a comma alone is part of the path";
    for (const std::string& bad : std::vector<std::string>{"x=xgboost:/m,sha256=abc", "x=xgboost:/m,sha256=" + std::string(64, 'g'),
                                                           "x=kepler:,sha256=" + digest, "x=kepler:/f,sha256="}) {
        EXPECT_THROW((void)parse_model_spec(bad), std::invalid_argument) << bad;
    }
    try {
        (void)parse_model_spec("x=kepler-db:/db,sha256=" + digest);
        ADD_FAILURE() << "kepler-db accepted a digest";
    } catch (const std::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find("kepler:FILE,sha256=HEX"), std::string::npos) << e.what();
    }
}

// --model-server and its TLS options: a URL scheme other than http(s) is refused; plain http and an
// unverified certificate are said out loud before anything is fetched.
TEST(ModelServerOptions, SchemesAreCheckedAndWeakeningsWarned) {
    Options o;
    o.model_server = "ftp://models.example/v1";
    EXPECT_THROW((void)model_server(o), std::invalid_argument);
    o.model_server.clear();
    o.model_server_insecure = true;
    EXPECT_THROW((void)model_server(o), std::invalid_argument) << "a TLS option without a server";
    o.model_server = "https://models.example/v1";
    o.model_server_ca = "/etc/ssl/model-ca.pem";
    const ModelServer server = model_server(o);
    EXPECT_EQ(server.url, o.model_server);
    EXPECT_EQ(server.ca_file, "/etc/ssl/model-ca.pem");
    EXPECT_TRUE(server.insecure_skip_verify);
    ASSERT_EQ(model_server_warnings(o).size(), 1u);
    EXPECT_NE(model_server_warnings(o)[0].find("NOT verified"), std::string::npos);
    o.model_server_insecure = false;
    EXPECT_TRUE(model_server_warnings(o).empty()) << "https with verification is the quiet case";
    o.model_server = "http://kepler-model-server:8100/models";
    ASSERT_EQ(model_server_warnings(o).size(), 1u);
    EXPECT_NE(model_server_warnings(o)[0].find("plain http"), std::string::npos);
}

// The option lists of curve and kepler-db specs share one splitter; its edges, pinned once here.
TEST(KeyValueList, SplitsInOrderAndRefusesItemsWithoutAKey) {
    const std::vector<KeyValue> items = split_key_value_list("a=1,b=x=y,a=,", "option");
    ASSERT_EQ(items.size(), 3u);
    EXPECT_EQ(items[0].key, "a");
    EXPECT_EQ(items[0].value, "1");
    EXPECT_EQ(items[1].value, "x=y");  // split at the first '='
    EXPECT_EQ(items[2].value, "");
    EXPECT_TRUE(split_key_value_list("", "option").empty());
    for (const char* bad : {"a", "a=1,,b=2", "=1"}) EXPECT_THROW((void)split_key_value_list(bad, "option"), std::invalid_argument) << bad;
    try {
        (void)split_key_value_list("x=1,=2", "curve parameter");
        ADD_FAILURE() << "an empty key was accepted";
    } catch (const std::invalid_argument& e) {
        EXPECT_STREQ(e.what(), "curve parameter \"=2\" has an empty key");
    }
}

TEST(ModelSpec, BuiltinsAreAddedOnlyWhenMissing) {
    auto specs = with_builtin_models({});
    ASSERT_EQ(specs.size(), 2u);
    EXPECT_EQ(specs[0].name, "measured");
    EXPECT_EQ(specs[1].name, "curve");
    specs = with_builtin_models({parse_model_spec("mine=curve:idle_w=1"), parse_model_spec("m=measured")});
    EXPECT_EQ(specs.size(), 2u);
}

TEST(Curve, FollowsTheDocumentedFormula) {
    Feed feed(node_options(4, kProcfsMetrics));
    EstimatorOptions options;
    Estimator est(options);
    // 4 vCPUs, 2 CPU-seconds busy in 1 s: u = 0.5 -> 4 x (0.74 + 2.76 x 0.5) = 8.48 W, idle 2.96 W.
    ASSERT_TRUE(est.process(feed.frame(simple_frame(kSecond, kSecond, {1'500'000'000, 500'000'000}))));
    const ZoneShares& z = est.last_attribution().zones.at(0);
    EXPECT_EQ(z.node.zone.kind, ZoneKind::package);
    EXPECT_EQ(z.node.total_uj, 8'480'000u);
    EXPECT_EQ(z.node.idle_uj, 2'960'000u);
    // Busier than the machine (clamped at u = 1) over 2 s: 4 x 3.5 x 2 = 28 J.
    ASSERT_TRUE(est.process(feed.frame(simple_frame(2 * kSecond, 2 * kSecond, {9 * kSecond}))));
    EXPECT_EQ(est.last_attribution().zones.at(0).node.total_uj, 28'000'000u);
    // Idle machine: idle power only.
    ASSERT_TRUE(est.process(feed.frame(simple_frame(4 * kSecond, kSecond, {}))));
    EXPECT_EQ(est.last_attribution().zones.at(0).node.total_uj, 2'960'000u);
}

TEST(Curve, UsesProcessCpuTimeWhenNodeCpuIsMissing) {
    Feed feed(node_options(2, KEPLERSHM_METRIC_CPU_TIME));
    EstimatorOptions options;
    options.models = {parse_model_spec("c=curve:idle_w=1,max_w=3")};
    Estimator est(options);
    TestFrame f = simple_frame(kSecond, kSecond, {500'000'000}, {}, 2);
    f.unaccounted_cpu_ns = 500'000'000;  // u = 1 s / 1 s / 2 CPUs = 0.5 -> 2 x (1 + 2 x 0.5) = 4 W
    ASSERT_TRUE(est.process(feed.frame(f)));
    EXPECT_EQ(est.last_attribution().zones.at(0).node.total_uj, 4'000'000u);
}

TEST(ModelChoice, MeteredNodeUsesTheMeterAndVmUsesTheCurve) {
    Feed metered(node_options(4, kProcfsMetrics, {zone_info("package-0", KEPLERSHM_ZONE_PACKAGE, 0)}));
    Estimator a(EstimatorOptions{});
    ASSERT_TRUE(a.process(metered.frame(simple_frame(kSecond, kSecond, {kSecond}, {20'000'000}))));
    EXPECT_EQ(a.primary_model(), "measured");
    EXPECT_TRUE(report(a, "measured").selected);
    EXPECT_EQ(report(a, "measured").reason, "measured power");
    EXPECT_FALSE(report(a, "curve").selected);
    EXPECT_EQ(report(a, "curve").reason, "standby: measured is preferred");

    Feed vm(node_options(4, kProcfsMetrics));
    Estimator b(EstimatorOptions{});
    ASSERT_TRUE(b.process(vm.frame(simple_frame(kSecond, kSecond, {kSecond}))));
    EXPECT_EQ(b.primary_model(), "curve");
    EXPECT_EQ(report(b, "curve").reason, "fallback: no meter and no eligible trained model");
    EXPECT_EQ(report(b, "measured").reason, "refused: node has no power meter");
}

TEST(ModelChoice, MeteredFrameWithoutValidReadingFallsBack) {
    Feed metered(node_options(4, kProcfsMetrics, {zone_info("package-0", KEPLERSHM_ZONE_PACKAGE, 0)}));
    Estimator est(EstimatorOptions{});
    TestFrame f = simple_frame(kSecond, kSecond, {kSecond}, {20'000'000});
    f.zones[0].valid = false;
    ASSERT_TRUE(est.process(metered.frame(f)));
    EXPECT_EQ(est.primary_model(), "curve");
    EXPECT_EQ(report(est, "measured").reason, "no valid meter reading in the frame");
}

TEST(ModelChoice, UnknownPrimaryIsAnError) {
    EstimatorOptions options;
    options.primary = "nope";
    EXPECT_THROW(Estimator{options}, std::invalid_argument);
}

TEST(AbTest, KeplerNamesCarryOnlyThePrimaryAndEveryModelHasItsErrors) {
    Feed metered(node_options(4, kProcfsMetrics, {zone_info("package-0", KEPLERSHM_ZONE_PACKAGE, 0)}));
    EstimatorOptions options;
    options.models = {parse_model_spec("small=curve:idle_w=1,max_w=2"), parse_model_spec("meter=measured")};
    options.primary = "small";
    Estimator est(options);
    // 4 CPUs fully idle: small says 4 W; meter says 5 W -> error 1 W, 20 %.
    ASSERT_TRUE(est.process(metered.frame(simple_frame(kSecond, kSecond, {}, {5'000'000}))));
    // 4 CPUs, 2 s busy: small says 4 x 1.5 = 6 W; meter says 12 W -> error 6 W, 50 %.
    ASSERT_TRUE(est.process(metered.frame(simple_frame(2 * kSecond, kSecond, {2 * kSecond}, {12'000'000}))));
    EXPECT_EQ(est.primary_model(), "small");

    const auto families = collect(PrometheusExport(est, ExportOptions{}));
    // Kepler names: the primary's energy only (4 + 6 J), labelled with it as source.
    const std::optional<double> dyn = series_value(families, "kepler_node_package_joules_total", {{"mode", "dynamic"}, {"source", "small"}});
    ASSERT_TRUE(dyn);
    const double idle = series_value(families, "kepler_node_package_joules_total", {{"mode", "idle"}, {"source", "small"}}).value_or(-1);
    EXPECT_NEAR(*dyn + idle, 10.0, 1e-9);
    EXPECT_FALSE(series_value(families, "kepler_node_package_joules_total", {{"source", "rapl"}}))
        << "the meter must not appear under Kepler names when it is not primary";
    // Every model at node level, with its error against the meter.
    EXPECT_NEAR(series_value(families, "kepler_model_node_joules_total", {{"model", "small"}, {"zone", "package"}}).value_or(-1), 10.0, 1e-9);
    EXPECT_NEAR(series_value(families, "kepler_model_node_joules_total", {{"model", "meter"}, {"zone", "package"}}).value_or(-1), 17.0, 1e-9);
    EXPECT_FALSE(series_value(families, "kepler_model_node_joules_total", {{"model", "curve"}})) << "a configured curve replaces the built-in one";
    EXPECT_NEAR(series_value(families, "kepler_model_absolute_error_watts", {{"model", "small"}, {"zone", "package"}}).value_or(-1), 6.0, 1e-9);
    EXPECT_NEAR(series_value(families, "kepler_model_mape_ratio", {{"model", "small"}, {"zone", "package"}}).value_or(-1), (0.2 + 0.5) / 2,
                1e-9);
    EXPECT_FALSE(series_value(families, "kepler_model_mape_ratio", {{"model", "meter"}})) << "the meter has no error against itself";
    EXPECT_EQ(series_value(families, "kepler_model_info", {{"model", "small"}, {"selected", "true"}, {"reason", "primary (--primary)"}}), 1.0);
    EXPECT_EQ(series_value(families, "kepler_model_info", {{"model", "meter"}, {"selected", "false"}}), 1.0);
}
