// XGBoost node models: parity with Python xgboost on the same features, model choice by CPU,
// refusal, extrapolation beyond the training range, waiting for / reloading / rejecting model files,
// and fetching from a model server.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cmath>
#include <functional>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "pipeline/estimator.hpp"
#include "export/prometheus_export.hpp"
#include "load/model_watch.hpp"
#include "model/xgboost_model.hpp"
#include "support/metric_series.hpp"
#include "support/subprocess.hpp"
#include "support/test_frames.hpp"
#include "fakes/http_server.hpp"
#include "support/digest/sha256.hpp"

using namespace kepler::estimate;
using namespace estimate_test;
namespace fs = std::filesystem;

namespace {

constexpr uint64_t kSecond = 1'000'000'000ull;
const std::string kNx12Cpu = "Intel(R) Xeon(R) Gold 6248R CPU @ 3.00GHz";

/// Trains a model with tests/kepler-estimate/train_model.py; returns false (test skips) without data.
bool train(const fs::path& out, const std::string& features, const std::string& zones, std::vector<std::string> extra = {}) {
    std::vector<std::string> argv = {"/usr/bin/python3", ESTIMATE_TEST_DIR "/train_model.py", "--data", MODEL_DB_DIR,
                                     "--out", out.string(), "--features", features, "--zones", zones};
    argv.insert(argv.end(), extra.begin(), extra.end());
    std::string output;
    const int rc = run_command(argv, output);
    if (rc != 0) ADD_FAILURE() << "training failed: " << output;
    return rc == 0;
}

#define REQUIRE_TRAINING_DATA()                                                                          \
    if (!fs::exists(MODEL_DB_DIR "/nx12_rapl_abs_Basic.csv")) GTEST_SKIP() << "no nx12 data at " MODEL_DB_DIR

keplershm::WriterOptions nx12_like(uint64_t metrics, std::string cpu = kNx12Cpu) {
    keplershm::WriterOptions o = node_options(96, metrics, {}, std::move(cpu));
    return o;
}

/// Frames over the range of the nx12 training data (up to ~10 busy cores, ~1e10 cycles/s).
TestFrame load_frame(int i) {
    const uint64_t busy = static_cast<uint64_t>(i) * 211'000'000ull % 11'000'000'000ull;
    TestFrame f = simple_frame(kSecond * (i + 1), kSecond, {busy / 2, busy / 3, busy - busy / 2 - busy / 3}, {}, 96);
    for (size_t p = 0; p < f.processes.size(); ++p) f.processes[p].cycles = (busy + p * 7919) * 3 + static_cast<uint64_t>(i) * 12345;
    return f;
}

const ModelReport& report_of(const Estimator& e, const std::string& name) {
    static std::vector<ModelReport> keep;
    keep = e.models().reports();
    for (const ModelReport& r : keep) {
        if (r.name == name) return r;
    }
    throw std::runtime_error("no model " + name);
}

void write_text(const fs::path& path, const std::string& text) {
    std::ofstream out(path, std::ios::trunc);
    out << text;
}

std::string read_text(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
}

/// model.json with `digest` as its package target's "sha256".
std::string with_booster_digest(const std::string& metadata, const std::string& digest) {
    const std::string file_field = R"("file":)";
    std::string out = metadata;
    const size_t at = out.find(file_field);
    if (at == std::string::npos) throw std::runtime_error("model.json has no target file");
    out.insert(at, R"("sha256": ")" + digest + R"(", )");
    return out;
}

/// An HTTPS model server over the files below `root` (404 for anything else).
kepler::testing::FakeHttpServer serve_files(const fs::path& root, const kepler::testing::TlsFiles& tls) {
    return kepler::testing::FakeHttpServer(
        [root](const kepler::testing::FakeHttpServer::Request& r) {
            const fs::path file = root / r.target.substr(1);
            if (r.target.find("..") != std::string::npos || !fs::is_regular_file(file)) return kepler::testing::FakeHttpServer::Response{404, "", {}};
            return kepler::testing::FakeHttpServer::Response{200, read_text(file), {}};
        },
        tls);
}

}  // namespace

TEST(XgboostParity, PredictionsMatchPythonOnTheSameFeatures) {
    REQUIRE_TRAINING_DATA();
    TempDir dir;
    const std::string features = "cpu_time_ms_per_s,node_cpu_busy_ms_per_s,cpu_count,cycles_per_s";
    // Both booster file formats, and monotone-constrained trees (what keplershm train chooses most often).
    for (const auto& [format, monotone] : {std::pair{"json", false}, std::pair{"ubj", false}, std::pair{"json", true}}) {
        const std::vector<std::string> kind = monotone ? std::vector<std::string>{"--format", format, "--monotone"}
                                                       : std::vector<std::string>{"--format", format};
        const fs::path model_dir = dir.path() / fmt::format("model-{}{}", format, monotone ? "-monotone" : "");
        // First pass: train, then compute features in C++ and write them for Python to predict.
        ASSERT_TRUE(train(model_dir, features, "package,dram", kind));
        Feed feed(nx12_like(kProcfsMetrics | KEPLERSHM_METRIC_CYCLES));
        XgboostModel model("nx12", model_dir, 1);
        std::vector<NodeFeatures> rows;
        std::ofstream csv(dir.path() / "features.csv");
        csv << features << "\n";
        for (int i = 0; i < 60; ++i) {
            rows.push_back(compute_features(feed.frame(load_frame(i))));
            const NodeFeatures& f = rows.back();
            csv << fmt::format("{:.17g},{:.17g},{:.17g},{:.17g}\n", *f[Feature::cpu_time_ms_per_s], *f[Feature::node_cpu_busy_ms_per_s],
                               *f[Feature::cpu_count], *f[Feature::cycles_per_s]);
        }
        csv.close();
        // Same seed and data: Python retrains the identical model and predicts the C++ feature rows.
        std::vector<std::string> again = kind;
        again.insert(again.end(), {"--predict-in", (dir.path() / "features.csv").string(), "--predict-out",
                                   (dir.path() / "predictions.csv").string()});
        ASSERT_TRUE(train(dir.path() / "again", features, "package,dram", again));
        std::ifstream predictions(dir.path() / "predictions.csv");
        std::string line;
        std::getline(predictions, line);
        ASSERT_EQ(line, "package,dram");
        double lowest = 1e9, highest = 0;
        for (const NodeFeatures& f : rows) {
            ASSERT_TRUE(std::getline(predictions, line));
            const double python_package = std::stod(line.substr(0, line.find(',')));
            const double python_dram = std::stod(line.substr(line.find(',') + 1));
            const std::vector<double> ours = *model.predict_watts(f);
            EXPECT_NEAR(ours[0], python_package, 1e-4 * std::fabs(python_package)) << format;
            EXPECT_NEAR(ours[1], python_dram, 1e-4 * std::fabs(python_dram)) << format;
            lowest = std::min(lowest, python_package);
            highest = std::max(highest, python_package);
        }
        EXPECT_GT(highest - lowest, 20.0) << "the rows should span a range of node power, not one leaf";
    }
}

TEST(XgboostModelChoice, ExactCpuThenVendorThenAnyAndTheCurveLast) {
    REQUIRE_TRAINING_DATA();
    TempDir dir;
    ASSERT_TRUE(train(dir.path() / "amd", "cpu_time_ms_per_s", "package", {"--rounds", "5", "--cpu-model", "AMD EPYC 7763 64-Core Processor"}));
    ASSERT_TRUE(train(dir.path() / "intel", "cpu_time_ms_per_s", "package", {"--rounds", "5", "--cpu-model", "Intel(R) Xeon(R) Platinum 8380 CPU"}));
    ASSERT_TRUE(train(dir.path() / "exact", "cpu_time_ms_per_s", "package", {"--rounds", "5", "--cpu-model", kNx12Cpu}));
    Feed feed(nx12_like(kProcfsMetrics));

    EstimatorOptions options;
    options.models = {parse_model_spec("amd=xgboost:" + (dir.path() / "amd").string()),
                      parse_model_spec("intel=xgboost:" + (dir.path() / "intel").string()),
                      parse_model_spec("exact=xgboost:" + (dir.path() / "exact" / "model.json").string())};
    Estimator all(options);
    all.refresh_models();
    ASSERT_TRUE(all.process(feed.frame(load_frame(3))));
    EXPECT_EQ(all.primary_model(), "exact");
    EXPECT_EQ(report_of(all, "exact").reason, "no meter; best model for this cpu (exact cpu model)");

    options.models.pop_back();
    Estimator vendor(options);
    vendor.refresh_models();
    ASSERT_TRUE(vendor.process(feed.frame(load_frame(4))));
    EXPECT_EQ(vendor.primary_model(), "intel");
    EXPECT_EQ(report_of(vendor, "intel").reason, "no meter; best model for this cpu (same cpu vendor)");
    EXPECT_EQ(report_of(vendor, "amd").reason, "standby: intel is preferred");
    EXPECT_EQ(report_of(vendor, "curve").reason, "standby: intel is preferred");
}

TEST(XgboostModelChoice, ModelsNeedingMetricsTheNodeLacksAreRefused) {
    REQUIRE_TRAINING_DATA();
    TempDir dir;
    ASSERT_TRUE(train(dir.path() / "counters", "cpu_time_ms_per_s,cycles_per_s", "package", {"--rounds", "5"}));
    ASSERT_TRUE(train(dir.path() / "kubelet", "csv:kubelet_cpu_usage", "package", {"--rounds", "5"}));
    Feed feed(nx12_like(kProcfsMetrics));  // no PMU: no CYCLES
    EstimatorOptions options;
    options.models = {parse_model_spec("counters=xgboost:" + (dir.path() / "counters").string()),
                      parse_model_spec("kubelet=xgboost:" + (dir.path() / "kubelet").string())};
    Estimator est(options);
    est.refresh_models();
    ASSERT_TRUE(est.process(feed.frame(load_frame(2))));
    EXPECT_EQ(est.primary_model(), "curve");
    EXPECT_EQ(report_of(est, "counters").reason, "refused: needs cycles_per_s but the node lacks metric CYCLES");
    EXPECT_EQ(report_of(est, "kubelet").reason, "refused: needs feature csv:kubelet_cpu_usage, which no keplershm node produces");

    Feed pmu(nx12_like(kProcfsMetrics | KEPLERSHM_METRIC_CYCLES));
    ASSERT_TRUE(est.process(pmu.frame(load_frame(2))));
    EXPECT_EQ(est.primary_model(), "counters");
}

TEST(XgboostModelFiles, BadMetadataIsRejectedWithTheReason) {
    TempDir dir;
    auto error_of = [&](const std::string& text) {
        try {
            (void)parse_model_metadata(text, dir.path(), "model.json");
        } catch (const ModelError& e) {
            return std::string(e.what());
        }
        return std::string("accepted");
    };
    const std::string good = R"({"format":"keplershm-model/1","type":"xgboost","output":"absolute",
        "features":[{"name":"cpu_time_ms_per_s"}],"targets":[{"zone":"package","file":"p.json"}]})";
    EXPECT_EQ(error_of(good), "accepted");
    EXPECT_NE(error_of("{not json").find("not JSON"), std::string::npos);
    EXPECT_NE(error_of(R"({"format":"other"})").find("unknown format"), std::string::npos);
    std::string escape = good;
    escape.replace(escape.find("p.json"), 6, "../../etc/passwd");
    EXPECT_NE(error_of(escape).find("leaves the model directory"), std::string::npos);
    std::string zone = good;
    zone.replace(zone.find("package"), 7, "toaster");
    EXPECT_NE(error_of(zone).find("unknown target zone \"toaster\""), std::string::npos);
    std::string output = good;
    output.replace(output.find("absolute"), 8, "relative");
    EXPECT_NE(error_of(output).find("neither"), std::string::npos);
    const std::string with_error = good.substr(0, good.size() - 1) + R"(,"expected_error_w":{"package":5.9}})";
    EXPECT_EQ(error_of(with_error), "accepted");
    std::string negative_error = with_error;
    negative_error.replace(negative_error.find("5.9"), 3, "-1");
    EXPECT_NE(error_of(negative_error).find("expected_error_w[\"package\"] must be a known zone with watts >= 0"),
              std::string::npos);
}

TEST(XgboostModelFiles, BadTrainingRangesAndSlopesAreRejectedWithTheReason) {
    TempDir dir;
    auto error_of = [&](const std::string& extra) {
        const std::string text = R"({"format":"keplershm-model/1","type":"xgboost","output":"absolute",
            "features":[{"name":"cpu_time_ms_per_s"},{"name":"cpu_count"}],"targets":[{"zone":"package","file":"p.json"}])" +
                                 extra + "}";
        try {
            const ModelMetadata m = parse_model_metadata(text, dir.path(), "model.json");
            EXPECT_EQ(m.training_range.size(), 2u) << "parallel to the features";
        } catch (const ModelError& e) {
            return std::string(e.what());
        }
        return std::string("accepted");
    };
    EXPECT_EQ(error_of(""), "accepted");
    EXPECT_EQ(error_of(R"(,"training_range":{"cpu_time_ms_per_s":[0,5000]},"extrapolation":{"package":{"cpu_time_ms_per_s":0.05}})"),
              "accepted");
    EXPECT_NE(error_of(R"(,"training_range":{"cycles_per_s":[0,1]})").find("training_range names \"cycles_per_s\", which is not among"),
              std::string::npos);
    for (const char* bad : {"[5,1]", "[0]", "[0,\"x\"]", "{}", "[0,1,2]"}) {
        EXPECT_NE(error_of(fmt::format(R"(,"training_range":{{"cpu_time_ms_per_s":{}}})", bad)).find("must be [lowest, highest]"),
                  std::string::npos) << bad;
    }
    EXPECT_NE(error_of(R"(,"training_range":{"cpu_time_ms_per_s":[0,1]},"extrapolation":{"dram":{"cpu_time_ms_per_s":1}})")
                  .find("extrapolation[\"dram\"] must be a target zone's"),
              std::string::npos) << "dram has no booster";
    EXPECT_NE(error_of(R"(,"training_range":{"cpu_time_ms_per_s":[0,1]},"extrapolation":{"package":{"cpu_time_ms_per_s":-1}})")
                  .find("must be watts per unit >= 0"),
              std::string::npos);
    EXPECT_NE(error_of(R"(,"training_range":{"cpu_time_ms_per_s":[0,1]},"extrapolation":{"package":{"cpu_count":1}})")
                  .find("has a slope for cpu_count, which has no training_range"),
              std::string::npos);
    EXPECT_EQ(error_of(R"(,"cpu":{"model":"x","count":96})"), "accepted");
    EXPECT_EQ(error_of(R"(,"cpu":{"count":0})"), "accepted") << "unknown";
    for (const char* bad : {"-4", "4294967297", "1.5", "\"96\""}) {  // 2^32 + 1 would wrap to 1
        EXPECT_NE(error_of(fmt::format(R"(,"cpu":{{"count":{}}})", bad)).find("cpu.count must be a whole number of CPUs"),
                  std::string::npos) << bad;
    }
}

// Beyond its training range a model says so per feature, and its slopes add watts for the excess: the
// same boosters with and without slopes differ by exactly slope x excess, and only there.
TEST(XgboostExtrapolation, BeyondItsTrainingRangeTheModelSaysSoAndItsSlopesCarryThePredictionOn) {
    REQUIRE_TRAINING_DATA();
    TempDir dir;
    ASSERT_TRUE(train(dir.path() / "ranged", "cpu_time_ms_per_s", "package,dram"));
    constexpr double kHighest = 5000, kSlope = 0.05;  // ms/s of CPU time; watts per ms/s
    nlohmann::json meta = nlohmann::json::parse(read_text(dir.path() / "ranged" / "model.json"));
    meta["training_range"] = {{"cpu_time_ms_per_s", {0.0, kHighest}}};
    write_text(dir.path() / "ranged" / "model.json", meta.dump());
    fs::copy(dir.path() / "ranged", dir.path() / "sloped");
    meta["extrapolation"] = {{"package", {{"cpu_time_ms_per_s", kSlope}}}};
    write_text(dir.path() / "sloped" / "model.json", meta.dump());

    Feed feed(nx12_like(kProcfsMetrics));
    const NodeFeatures inside = compute_features(feed.frame(load_frame(3)));
    const NodeFeatures beyond = compute_features(feed.frame(simple_frame(5 * kSecond, kSecond, {4'000'000'000, 4'000'000'000}, {}, 96)));
    const double excess = *beyond[Feature::cpu_time_ms_per_s] - kHighest;
    ASSERT_GT(excess, 2000) << "8 busy cores: 8,000 ms/s";
    XgboostModel ranged("ranged", dir.path() / "ranged", 1), sloped("sloped", dir.path() / "sloped", 1);
    EXPECT_TRUE(sloped.outside_training_range().empty()) << "nothing estimated yet";
    EXPECT_EQ(*sloped.predict_watts(inside), *ranged.predict_watts(inside)) << "inside the range the slopes add nothing";
    EXPECT_EQ(sloped.outside_training_range(), (std::map<std::string, bool>{{"cpu_time_ms_per_s", false}}));
    const std::vector<double> with = *sloped.predict_watts(beyond), without = *ranged.predict_watts(beyond);
    EXPECT_NEAR(with[0] - without[0], kSlope * excess, 1e-9 * with[0]);
    EXPECT_EQ(with[1], without[1]) << "dram has no slope";
    EXPECT_EQ(sloped.outside_training_range(), (std::map<std::string, bool>{{"cpu_time_ms_per_s", true}}));

    // On /metrics: per model and feature, the last frame's answer, and a count of extrapolated frames.
    EstimatorOptions options;
    options.models = {parse_model_spec("sloped=xgboost:" + (dir.path() / "sloped").string()), parse_model_spec("plain=curve")};
    Estimator est(options);
    est.refresh_models();
    Feed frames(nx12_like(kProcfsMetrics));
    const Labels labels = {{"model", "sloped"}, {"feature", "cpu_time_ms_per_s"}};
    ASSERT_TRUE(est.process(frames.frame(load_frame(3))));
    auto families = collect(PrometheusExport(est, ExportOptions{}));
    EXPECT_EQ(series_value(families, "kepler_model_extrapolating", labels), 0.0);
    EXPECT_EQ(series_value(families, "kepler_model_extrapolated_frames_total", {{"model", "sloped"}}), 0.0);
    ASSERT_TRUE(est.process(frames.frame(simple_frame(5 * kSecond, kSecond, {4'000'000'000, 4'000'000'000}, {}, 96))));
    families = collect(PrometheusExport(est, ExportOptions{}));
    EXPECT_EQ(series_value(families, "kepler_model_extrapolating", labels), 1.0);
    EXPECT_EQ(series_value(families, "kepler_model_extrapolated_frames_total", {{"model", "sloped"}}), 1.0);
    EXPECT_FALSE(series_value(families, "kepler_model_extrapolating", {{"model", "plain"}})) << "the curve has no training range";
}

// A model that knows its held-out error (keplershm train's blocked CV) says so on /metrics.
TEST(XgboostModelFiles, TheModelsExpectedErrorIsExported) {
    REQUIRE_TRAINING_DATA();
    TempDir dir;
    ASSERT_TRUE(train(dir.path() / "m", "cpu_time_ms_per_s", "package,dram", {"--expected-error-w", "5.96"}));
    EstimatorOptions options;
    options.models = {parse_model_spec("xgb=xgboost:" + (dir.path() / "m").string()), parse_model_spec("plain=curve")};
    Estimator est(options);
    est.refresh_models();
    Feed feed(nx12_like(kProcfsMetrics));
    ASSERT_TRUE(est.process(feed.frame(load_frame(3))));
    const auto families = collect(PrometheusExport(est, ExportOptions{}));
    EXPECT_EQ(series_value(families, "kepler_model_expected_error_watts", {{"model", "xgb"}, {"zone", "package"}}), 5.96);
    EXPECT_EQ(series_value(families, "kepler_model_expected_error_watts", {{"model", "xgb"}, {"zone", "dram"}}), 5.96);
    EXPECT_FALSE(series_value(families, "kepler_model_expected_error_watts", {{"model", "plain"}}))
        << "the curve has no measured error: no series rather than a made-up one";
}

TEST(XgboostModelFiles, WaitedForLoadedReloadedAndBadFilesRejected) {
    REQUIRE_TRAINING_DATA();
    TempDir dir;
    const fs::path model_dir = dir.path() / "models" / "nx12";  // neither directory exists yet
    EstimatorOptions options;
    options.models = {parse_model_spec("xgb=xgboost:" + model_dir.string())};
    Estimator est(options);
    ModelWatcher::Options watch_options;
    watch_options.settle = std::chrono::milliseconds(50);
    ModelWatcher watcher(est.models().watched_models(), watch_options);
    Feed feed(nx12_like(kProcfsMetrics));
    int frame_no = 1;
    auto step = [&] {
        if (watcher.take_changes()) est.refresh_models();
        EXPECT_TRUE(est.process(feed.frame(load_frame(frame_no++))));
    };
    auto wait_until = [&](const std::function<bool()>& done) {
        for (int i = 0; i < 100 && !done(); ++i) {
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
            step();
        }
        return done();
    };

    step();
    EXPECT_EQ(est.primary_model(), "curve");  // a VM always gets an answer
    EXPECT_NE(report_of(est, "xgb").reason.find("waiting for"), std::string::npos) << report_of(est, "xgb").reason;

    // The model arrives (trained elsewhere, moved into place as a whole directory).
    ASSERT_TRUE(train(dir.path() / "staging", "cpu_time_ms_per_s", "package", {"--rounds", "10"}));
    fs::create_directories(model_dir.parent_path());
    fs::rename(dir.path() / "staging", model_dir);
    ASSERT_TRUE(wait_until([&] { return est.primary_model() == "xgb"; })) << report_of(est, "xgb").reason;
    EXPECT_EQ(report_of(est, "xgb").loads, 1u);
    const double first_watts = report_of(est, "xgb").watts.at(ZoneKind::package);

    // A changed booster is reloaded.
    ASSERT_TRUE(train(dir.path() / "v2", "cpu_time_ms_per_s", "package", {"--rounds", "2"}));
    fs::rename(dir.path() / "v2" / "package.json", model_dir / "package.json");
    ASSERT_TRUE(wait_until([&] { return report_of(est, "xgb").loads == 2; }));
    frame_no = 5;
    step();
    const double second_watts = report_of(est, "xgb").watts.at(ZoneKind::package);

    // A bad file is rejected; the previous model keeps running.
    write_text(model_dir / "package.json", "this is not a booster");
    ASSERT_TRUE(wait_until([&] { return report_of(est, "xgb").load_errors == 1; }));
    EXPECT_EQ(est.primary_model(), "xgb");
    frame_no = 5;
    step();
    EXPECT_DOUBLE_EQ(report_of(est, "xgb").watts.at(ZoneKind::package), second_watts);
    EXPECT_TRUE(report_of(est, "xgb").selected);
    (void)first_watts;

    // Broken metadata too.
    write_text(model_dir / "model.json", "{\"format\": 3}");
    ASSERT_TRUE(wait_until([&] { return report_of(est, "xgb").load_errors == 2; }));
    EXPECT_EQ(est.primary_model(), "xgb");
}

TEST(XgboostModelFiles, FetchedFromAModelServer) {
    REQUIRE_TRAINING_DATA();
    TempDir served, local;
    ASSERT_TRUE(train(served.path() / "nx12", "cpu_time_ms_per_s", "package", {"--rounds", "5", "--format", "ubj"}));
    const int port = free_port();
    Child server({"/usr/bin/python3", "-m", "http.server", std::to_string(port), "--bind", "127.0.0.1", "--directory",
                  served.path().string()},
                 (local.path() / "http.log").string());
    const std::string url = fmt::format("http://127.0.0.1:{}", port);
    std::string body;
    for (int i = 0; i < 100 && http_get(url + "/nx12/model.json", body) != 200; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));

    const fs::path model_dir = local.path() / "models" / "nx12";
    EXPECT_THROW(fetch_model(ModelServer{url, {}, false}, "missing", local.path() / "models" / "missing"), std::runtime_error);
    EXPECT_FALSE(fs::exists(local.path() / "models" / "missing" / "model.json"));

    EstimatorOptions options;
    options.models = {parse_model_spec("xgb=xgboost:" + model_dir.string())};
    Estimator est(options);
    ModelWatcher::Options watch_options;
    watch_options.settle = std::chrono::milliseconds(50);
    watch_options.model_server.url = url;
    ModelWatcher watcher(est.models().watched_models(), watch_options);
    Feed feed(nx12_like(kProcfsMetrics));
    for (int i = 0; i < 100 && est.primary_model() != "xgb"; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        if (watcher.take_changes()) est.refresh_models();
        ASSERT_TRUE(est.process(feed.frame(load_frame(i + 1))));
    }
    EXPECT_EQ(est.primary_model(), "xgb");
    EXPECT_TRUE(fs::exists(model_dir / "package.ubj"));
}

// The same through the binary: /metrics says "waiting", then the model is selected when it arrives,
// and a bad file shows in kepler_model_load_errors_total while the model keeps serving.
TEST(XgboostModelFiles, TheBinaryWaitsLoadsAndRejectsWithMetrics) {
    REQUIRE_TRAINING_DATA();
    TempDir dir;
    const fs::path model_dir = dir.path() / "nx12";
    const std::string segment = unique_segment_name("xgb-binary");
    std::atomic<bool> stop{false};
    std::thread writer([&] {
        TestWriter w(segment, nx12_like(kProcfsMetrics));
        for (int i = 1; !stop; ++i) {
            w.write(load_frame(i));
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
        }
    });
    const int port = free_port();
    Child estimator({ESTIMATE_BINARY, "--shm-name", segment, "--listen", fmt::format("127.0.0.1:{}", port), "--model",
                     "xgb=xgboost:" + model_dir.string()},
                    (dir.path() / "estimator.log").string());
    std::string metrics;
    auto scrape_until = [&](const std::string& needle) {
        for (int i = 0; i < 100; ++i) {
            if (http_get(fmt::format("http://127.0.0.1:{}/metrics", port), metrics) == 200 && metrics.find(needle) != std::string::npos) {
                return true;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
        }
        return false;
    };
    EXPECT_TRUE(scrape_until("kepler_model_info{model=\"xgb\",kind=\"xgboost\",selected=\"false\",reason=\"waiting for")) << metrics;
    EXPECT_TRUE(scrape_until("source=\"curve\""));
    ASSERT_TRUE(train(dir.path() / "staging", "cpu_time_ms_per_s", "package", {"--rounds", "10"}));
    fs::rename(dir.path() / "staging", model_dir);
    EXPECT_TRUE(scrape_until("kepler_model_info{model=\"xgb\",kind=\"xgboost\",selected=\"true\"")) << metrics;
    EXPECT_TRUE(scrape_until("source=\"xgb\""));
    write_text(model_dir / "package.json", "{\"not\": \"a booster\"}");
    EXPECT_TRUE(scrape_until("kepler_model_load_errors_total{model=\"xgb\"} 1")) << metrics;
    EXPECT_TRUE(scrape_until("kepler_model_info{model=\"xgb\",kind=\"xgboost\",selected=\"true\"")) << metrics;
    EXPECT_NE(read_file((dir.path() / "estimator.log").string()).find("the previous version keeps running"), std::string::npos);
    stop = true;
    writer.join();
}

// xgboost:PATH,sha256=HEX pins model.json, whose targets may pin each booster: an altered file is refused.
TEST(XgboostModelFiles, PinnedDigestsRefuseAlteredFiles) {
    REQUIRE_TRAINING_DATA();
    TempDir dir;
    const fs::path model_dir = dir.path() / "m";
    ASSERT_TRUE(train(model_dir, "cpu_time_ms_per_s", "package", {"--rounds", "5", "--format", "ubj"}));
    const std::string metadata = read_text(model_dir / "model.json");
    const std::string booster_digest = kepler::support::sha256_hex(read_text(model_dir / "package.ubj"));

    EXPECT_NO_THROW(XgboostModel("xgb", model_dir, 1, kepler::support::sha256_hex(metadata)));
    try {
        XgboostModel("xgb", model_dir, 1, std::string(64, '0'));
        ADD_FAILURE() << "a metadata file with another digest was loaded";
    } catch (const ModelError& e) {
        EXPECT_NE(std::string(e.what()).find("sha256 is " + kepler::support::sha256_hex(metadata)), std::string::npos) << e.what();
    }
    write_text(model_dir / "model.json", with_booster_digest(metadata, booster_digest));
    EXPECT_NO_THROW(XgboostModel("xgb", model_dir, 1)) << "the booster's bytes are the pinned ones";
    write_text(model_dir / "model.json", with_booster_digest(metadata, std::string(64, 'f')));
    EXPECT_THROW(XgboostModel("xgb", model_dir, 1), ModelError) << "a booster pinned to other bytes";
    write_text(model_dir / "model.json", with_booster_digest(metadata, "not-hex"));
    EXPECT_THROW(XgboostModel("xgb", model_dir, 1), ModelError) << "a malformed digest";
}

// --model-server https://... with --model-server-ca: fetched only from the server the CA vouches for, and
// nothing is written when a pinned digest does not match.
TEST(XgboostModelFiles, FetchedOverHttpsWithTheServersCaAndPinnedDigests) {
    REQUIRE_TRAINING_DATA();
    TempDir served, local;
    const auto tls = kepler::testing::make_test_certificate(local.path(), "server");
    if (!tls) GTEST_SKIP() << "openssl CLI not available: cannot make a test certificate";
    ASSERT_TRUE(train(served.path() / "nx12", "cpu_time_ms_per_s", "package", {"--rounds", "5", "--format", "ubj"}));
    const std::string metadata = read_text(served.path() / "nx12" / "model.json");
    const auto server = serve_files(served.path(), *tls);
    const fs::path model_dir = local.path() / "models" / "nx12";

    EXPECT_THROW(fetch_model(ModelServer{server.url(), {}, false}, "nx12", model_dir), std::runtime_error) << "not in the system's store";
    const ModelServer trusted{server.url(), tls->certificate.string(), false};
    EXPECT_THROW(fetch_model(trusted, "nx12", model_dir, std::string(64, '0')), ModelError);
    EXPECT_FALSE(fs::exists(model_dir / "package.ubj")) << "nothing written before every file checked";
    write_text(served.path() / "nx12" / "model.json", with_booster_digest(metadata, std::string(64, 'f')));
    EXPECT_THROW(fetch_model(trusted, "nx12", model_dir), ModelError);
    EXPECT_FALSE(fs::exists(model_dir / "package.ubj"));

    write_text(served.path() / "nx12" / "model.json", metadata);
    fetch_model(trusted, "nx12", model_dir, kepler::support::sha256_hex(metadata));
    EXPECT_EQ(read_text(model_dir / "package.ubj"), read_text(served.path() / "nx12" / "package.ubj"));
    EXPECT_NO_THROW(XgboostModel("xgb", model_dir, 1, kepler::support::sha256_hex(metadata)));
}
