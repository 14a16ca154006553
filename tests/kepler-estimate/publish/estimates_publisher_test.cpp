// The estimator's own estimates, published (--publish-estimates): what a reader of the segments gets is
// exactly what kepler-estimate exports (model energy and power, workload energy), and kepler-estimate's
// own `external:` reader accepts every answer (the protocol conformance check of PROTOCOL.md §8).
#include <gtest/gtest.h>

#include <unistd.h>

#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "pipeline/estimator.hpp"
#include "external/estimates_answer.hpp"
#include "publish/estimates_publisher.hpp"
#include "support/subprocess.hpp"
#include "support/test_frames.hpp"

using namespace kepler::estimate;
using namespace estimate_test;
using std::chrono::milliseconds;

namespace {

/// Every answer a reader reads from a segment, by the collector frame it answers.
using Answers = std::map<FrameId, std::vector<keplershm_estimate>>;

/// Copies every frame from `after` + 1 to the newest into `out`; returns the newest read.
uint64_t read_new(keplershm::Reader& reader, uint64_t after, Answers& out, keplershm_header* header = nullptr) {
    keplershm::FrameView view;
    const uint64_t latest = reader.latest();
    for (uint64_t n = after + 1; n <= latest; ++n) {
        if (reader.copy(n, view) != keplershm::Status::ok) continue;
        if (header != nullptr) *header = view.segment();
        const keplershm::Records<keplershm_estimate> rows = view.estimates();
        std::vector<keplershm_estimate>& kept = out[FrameId{view.header().producer_generation, view.header().producer_sequence}];
        for (uint32_t i = 0; i < rows.size(); ++i) kept.push_back(rows[i]);
        // The conformance check: kepler-estimate's own reader of estimates segments accepts it.
        const auto parsed = parse_answer(view);
        EXPECT_TRUE(std::holds_alternative<EstimatesAnswer>(parsed)) << std::get<RejectedAnswer>(parsed).reason;
    }
    return std::max(after, latest);
}

double zone_rows_joules(const std::vector<keplershm_estimate>& rows) {
    double j = 0;
    for (const keplershm_estimate& r : rows)
        if (r.workload_index == 0xffffffffu) j += r.energy_joules;
    return j;
}

}  // namespace

TEST(EstimatesPublisher, ABadPrefixIsRefusedWithTheRule) {
    EXPECT_EQ(estimates_segment_name("node-1.est", "curve"), "node-1.est-curve");
    EXPECT_NO_THROW(EstimatesPublisher(std::string(135, 'x'))) << "135 + '-' + a 64-character model name is 200";
    for (const std::string& bad : std::vector<std::string>{"", ".hidden", "a/b", "sp ace", std::string(136, 'x')}) {
        try {
            EstimatesPublisher publisher(bad);
            ADD_FAILURE() << "accepted prefix \"" << bad << "\"";
        } catch (const std::invalid_argument& e) {
            EXPECT_NE(std::string(e.what()).find("--publish-estimates"), std::string::npos) << e.what();
        }
    }
}

// In process, on synthetic frames with a meter: every model's answer is in its segment, with the zones it
// predicts in the header, the answered frame's identity and interval, and the primary's workload rows
// adding up to what the attribution gave the workloads' processes.
TEST(EstimatesPublisher, EveryModelsAnswerIsReadBackAsTheEstimatorComputedIt) {
    Feed feed(node_options(4, kProcfsMetrics, {zone_info("package-0", KEPLERSHM_ZONE_PACKAGE, 0), zone_info("dram", KEPLERSHM_ZONE_DRAM, 0)}));
    EstimatorOptions options;
    options.models.push_back(parse_model_spec("c2=curve:idle_w=1,max_w=5"));
    Estimator estimator(options);
    const std::string prefix = unique_segment_name("pub");
    EstimatesPublisher publisher(prefix);
    TestFrame frame = simple_frame(1'000'000'000, 1'000'000'000, {400'000'000, 100'000'000, 50'000'000}, {20'000'000, 4'000'000});
    frame.workloads = {TestWorkload{KEPLERSHM_WORKLOAD_CONTAINER, "c1", "web"}, TestWorkload{KEPLERSHM_WORKLOAD_SYSTEM}};
    frame.processes[0].workload = 0;
    frame.processes[1].workload = 0;
    frame.processes[2].workload = 1;
    const keplershm::FrameView& view = feed.frame(frame);
    ASSERT_TRUE(estimator.process(view)) << estimator.last_error();
    ASSERT_EQ(estimator.primary_model(), "measured");
    publisher.publish(view, estimator.last_answers(), estimator.primary_model(), estimator.last_attribution());

    for (const ModelAnswer& answer : estimator.last_answers()) {
        keplershm::Reader reader = keplershm::Reader::open(estimates_segment_name(prefix, answer.name));
        keplershm::FrameView got;
        ASSERT_EQ(reader.copy(reader.latest(), got), keplershm::Status::ok) << answer.name;
        const keplershm_header& h = got.segment();
        EXPECT_EQ(h.segment_kind, static_cast<uint32_t>(KEPLERSHM_SEGMENT_ESTIMATES));
        EXPECT_EQ(keplershm::get_text(h.node_name), answer.name);
        EXPECT_EQ(keplershm::get_text(h.cpu_model), answer.version);
        EXPECT_EQ(got.header().producer_generation, view.generation());
        EXPECT_EQ(got.header().producer_sequence, view.sequence());
        EXPECT_EQ(got.header().interval_start_ns, view.interval_start_ns());
        EXPECT_EQ(got.header().interval_end_ns, view.interval_end_ns());
        ASSERT_EQ(h.zone_count, answer.energy.zones.size());
        std::map<std::pair<uint32_t, uint32_t>, double> joules;  // (zone, workload)
        for (const keplershm_estimate& r : got.estimates()) joules[{r.zone_index, r.workload_index}] += r.energy_joules;
        for (uint32_t z = 0; z < h.zone_count; ++z) {
            const ZoneEnergy& expected = answer.energy.zones[z];
            EXPECT_EQ(zone_kind_from_protocol(h.zones[z].kind), expected.zone.kind);
            EXPECT_EQ(h.zones[z].socket, expected.zone.socket);
            EXPECT_DOUBLE_EQ(joules[std::pair(z, 0xffffffffu)], static_cast<double>(expected.total_uj) / 1e6) << answer.name;
        }
        const bool primary = answer.name == estimator.primary_model();
        EXPECT_EQ(got.estimates().size(), h.zone_count * (primary ? 3u : 1u)) << answer.name << ": zone rows, and workload rows for the primary";
        if (!primary) continue;
        const Attribution& a = estimator.last_attribution();
        for (uint32_t z = 0; z < a.zones.size(); ++z) {
            const auto& s = a.zones[z];
            const double first = static_cast<double>(s.dynamic_uj[0] + s.idle_uj[0] + s.dynamic_uj[1] + s.idle_uj[1]) / 1e6;
            EXPECT_DOUBLE_EQ(joules[std::pair(z, 0u)], first);
            EXPECT_DOUBLE_EQ(joules[std::pair(z, 1u)], static_cast<double>(s.dynamic_uj[2] + s.idle_uj[2]) / 1e6);
        }
        EXPECT_TRUE(std::holds_alternative<EstimatesAnswer>(parse_answer(got))) << std::get<RejectedAnswer>(parse_answer(got)).reason;
    }
}

// A model whose zones or version change gets a new generation of its segment; a reader follows it.
// Another local user creates the segment's name first (any file under /dev/shm): the model is not
// published, a warning names the file's owner, and once the file is gone the next try publishes.
TEST(EstimatesPublisher, ASquattedNameIsAWarningNamingTheOwnerAndIsTriedAgain) {
    Feed feed(node_options(4, kProcfsMetrics));
    const std::string prefix = unique_segment_name("pub-squat");
    const std::string path = "/dev/shm/" + estimates_segment_name(prefix, "m");
    std::ofstream(path) << "not a segment";
    if (geteuid() == 0) {
        ASSERT_EQ(chown(path.c_str(), 65534, 65534), 0) << "a squatter: nobody";
    }
    const std::string owner = fmt::format("owned by uid {}", geteuid() == 0 ? 65534 : geteuid());
    EstimatesPublisher publisher(prefix, milliseconds(200));
    const std::vector<ModelAnswer> answers = {ModelAnswer{"m", "v1", NodeEnergy{{ZoneEnergy{ZoneKey{ZoneKind::package, 0}, 10'000'000, 0, {}}}, "m"}}};
    uint64_t start = 1'000'000'000;
    auto publish = [&] { return publisher.publish(feed.frame(simple_frame(start += 1'000'000'000, 1'000'000'000, {100'000'000})), answers, "", Attribution{}); };
    std::vector<PublishNote> notes = publish();
    ASSERT_EQ(notes.size(), 1u);
    EXPECT_TRUE(notes[0].warning);
    EXPECT_NE(notes[0].text.find(owner), std::string::npos) << notes[0].text;
    EXPECT_NE(notes[0].text.find("tried again"), std::string::npos) << notes[0].text;
    EXPECT_TRUE(publish().empty()) << "said once, and not tried again before the retry time";
    std::filesystem::remove(path);
    std::this_thread::sleep_for(milliseconds(250));
    notes = publish();
    ASSERT_EQ(notes.size(), 1u);
    EXPECT_FALSE(notes[0].warning) << notes[0].text;
    keplershm::Reader reader = keplershm::Reader::open(estimates_segment_name(prefix, "m"));
    keplershm::FrameView got;
    EXPECT_EQ(reader.next(milliseconds(5000), got), keplershm::Status::ok);
}

TEST(EstimatesPublisher, NewZonesOrVersionMakeANewGenerationThatReadersFollow) {
    Feed feed(node_options(4, kProcfsMetrics));
    const std::string prefix = unique_segment_name("pub-gen");
    EstimatesPublisher publisher(prefix);
    const Attribution none;
    const ZoneEnergy package{ZoneKey{ZoneKind::package, 0}, 10'000'000, 0, {}}, dram{ZoneKey{ZoneKind::dram, 0}, 2'000'000, 0, {}};
    const std::vector<std::vector<ModelAnswer>> answers = {
        {ModelAnswer{"m", "v1", NodeEnergy{{package}, "m"}}},
        {ModelAnswer{"m", "v1", NodeEnergy{{package, dram}, "m"}}},
        {ModelAnswer{"m", "v2", NodeEnergy{{package, dram}, "m"}}},
    };
    std::optional<keplershm::Reader> reader;
    std::vector<uint64_t> generations;
    for (size_t i = 0; i < answers.size(); ++i) {
        const keplershm::FrameView& frame = feed.frame(simple_frame(1'000'000'000 * (i + 1), 1'000'000'000, {100'000'000}));
        publisher.publish(frame, answers[i], "", none);
        if (!reader) reader.emplace(keplershm::Reader::open(estimates_segment_name(prefix, "m")));
        keplershm::FrameView got;
        ASSERT_EQ(reader->next(milliseconds(5000), got), keplershm::Status::ok) << "answer " << i;
        EXPECT_EQ(got.header().producer_sequence, frame.sequence());
        EXPECT_EQ(got.segment().zone_count, answers[i][0].energy.zones.size());
        EXPECT_EQ(keplershm::get_text(got.segment().cpu_model), answers[i][0].version);
        EXPECT_EQ(got.estimates().size(), answers[i][0].energy.zones.size());
        generations.push_back(got.generation());
    }
    EXPECT_NE(generations[0], generations[1]);
    EXPECT_NE(generations[1], generations[2]);
}

#ifdef COLLECT_BINARY
namespace {

/// The value of the first series of `family` in a Prometheus text file carrying every `k="v"` of `labels`.
std::optional<double> prom_value(const std::string& text, const std::string& family, const std::vector<std::string>& labels) {
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) {
        if (!line.starts_with(family + "{")) continue;
        const size_t close = line.find('}');
        const std::string set = line.substr(0, close);
        if (std::all_of(labels.begin(), labels.end(), [&](const std::string& l) { return set.find(l) != std::string::npos; })) {
            return std::stod(line.substr(close + 1));
        }
    }
    return std::nullopt;
}

/// The fields of one CSV line (the estimator quotes text fields and doubles their quotes).
std::vector<std::string> csv_fields(const std::string& line) {
    std::vector<std::string> out(1);
    bool quoted = false;
    for (size_t i = 0; i < line.size(); ++i) {
        const char c = line[i];
        if (c == '"' && quoted && i + 1 < line.size() && line[i + 1] == '"') out.back() += line[++i];
        else if (c == '"') quoted = !quoted;
        else if (c == ',' && !quoted) out.emplace_back();
        else out.back() += c;
    }
    return out;
}

/// The ledger's container key for a workload record (aggregate/ledger.cpp's rule).
std::string container_key(const keplershm_workload& w) {
    if (w.kind == KEPLERSHM_WORKLOAD_CONTAINER || w.kind == KEPLERSHM_WORKLOAD_POD) {
        const std::string id(keplershm::get_text(w.container_id));
        return id.empty() ? fmt::format("cgroup-{}", w.cgroup_id) : id;
    }
    return w.kind == KEPLERSHM_WORKLOAD_KERNEL ? "kernel_processes" : "system_processes";
}

}  // namespace

// Live, fed by the real collector: estimator A publishes; the test reads A's segments while it runs and
// compares them with A's own exports (CSV per workload and frame, Prometheus model series at the end);
// estimator B reads A's curve answers as an `external:` model and rejects none.
TEST(EstimatesPublisher, LiveAnswersEqualTheEstimatorsExportsAndAnotherEstimatorAcceptsThemAll) {
    TempDir dir;
    const std::filesystem::path sysfs = dir.path() / "sysfs";  // empty: no meter, whatever the host has
    std::filesystem::create_directories(sysfs);
    const std::string segment = unique_segment_name("pub-collect");
    const std::string prefix = unique_segment_name("pub-est");
    const SegmentCleanup cleanup{segment};
    const std::string a_csv = (dir.path() / "a.csv").string(), a_prom = (dir.path() / "a.prom").string();
    const std::string b_prom = (dir.path() / "b.prom").string();
    Child a({ESTIMATE_BINARY, "--shm-name", segment, "--listen", "none", "--model", "curve=curve", "--model", "c2=curve:idle_w=1,max_w=5",
             "--primary", "curve", "--publish-estimates", prefix, "--csv", a_csv, "--prom-out", a_prom, "--duration", "5"},
            (dir.path() / "a.log").string());
    Child b({ESTIMATE_BINARY, "--shm-name", segment, "--listen", "none", "--model", "ext=external:" + prefix + "-curve",
             "--prom-out", b_prom, "--duration", "5"},
            (dir.path() / "b.log").string());
    // Both estimators wait for the segment (polling every 50 ms) and so read from its first frame: B must
    // have read every frame A answers, or it would rightly refuse answers for frames it never read.
    std::this_thread::sleep_for(milliseconds(300));
    Child collector({COLLECT_BINARY, "--shm-name", segment, "--interval", "200ms", "--source", "procfs", "--kube", "off",
                     "--slots", "64", "--sysfs-root", sysfs.string()},
                    (dir.path() / "collector.log").string());

    // Reading A's segments as a consumer would, while A runs: every answer and the collector frame it answers.
    std::map<std::string, Answers> answers;
    std::map<FrameId, std::vector<keplershm_workload>> workloads;
    std::map<FrameId, bool> unassigned;  // the frame has processes without a workload (no workload row has them)
    std::map<std::string, std::optional<keplershm::Reader>> readers;
    readers["curve"];
    readers["c2"];
    std::map<std::string, uint64_t> read_upto;
    std::optional<keplershm::Reader> collector_reader;
    keplershm_header curve_header{};
    const auto read_all = [&] {
        for (auto& [model, reader] : readers) {
            if (!reader) {
                try {
                    reader.emplace(keplershm::Reader::open(prefix + "-" + model));
                } catch (const keplershm::Error&) {
                    continue;  // not created yet: A creates it with the model's first answer
                }
            }
            read_upto[model] = read_new(*reader, read_upto[model], answers[model], model == "curve" ? &curve_header : nullptr);
        }
        if (answers["curve"].empty()) return;
        if (!collector_reader) collector_reader.emplace(keplershm::Reader::open(segment));  // answered: it exists
        for (const auto& [id, rows] : answers["curve"]) {
            if (workloads.contains(id)) continue;
            keplershm::FrameView frame;  // 64 slots of 200 ms: the answered frame is still in the ring
            ASSERT_EQ(collector_reader->copy(id.sequence, frame), keplershm::Status::ok);
            ASSERT_EQ(frame.generation(), id.generation);
            for (const keplershm_workload& w : frame.workloads()) workloads[id].push_back(w);
            for (const keplershm_process& p : frame.processes()) unassigned[id] |= p.workload_index >= frame.workloads().size();
        }
    };
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (a.wait(milliseconds(50)) == -1 && std::chrono::steady_clock::now() < deadline) read_all();
    read_all();  // the last answers: A retired its segments at exit, the readers still map them
    for (auto& [model, reader] : readers) {
        ASSERT_TRUE(reader) << model;
        EXPECT_EQ(reader->info().state, static_cast<uint32_t>(KEPLERSHM_STATE_RETIRED)) << model << ": a clean stop retires";
    }
    ASSERT_EQ(b.wait(milliseconds(30000)), 0) << read_file((dir.path() / "b.log").string());
    ASSERT_GE(answers["curve"].size(), 5u) << read_file((dir.path() / "a.log").string());
    EXPECT_EQ(keplershm::get_text(curve_header.node_name), "curve");
    EXPECT_EQ(keplershm::get_text(curve_header.cpu_model), "curve");

    // Model series: energy over every answer, power of the last one.
    const std::string prom = read_file(a_prom);
    for (const std::string model : {"curve", "c2"}) {
        double joules = 0;
        for (const auto& [id, rows] : answers[model]) joules += zone_rows_joules(rows);
        const auto exported = prom_value(prom, "kepler_model_node_joules_total", {"model=\"" + model + "\"", "zone=\"package\""});
        ASSERT_TRUE(exported) << prom;
        EXPECT_NEAR(joules, *exported, 1e-6 * std::max(1.0, *exported)) << model;
        double watts = 0;
        for (const keplershm_estimate& r : answers[model].rbegin()->second)
            if (r.workload_index == 0xffffffffu) watts += r.power_watts;
        EXPECT_NEAR(watts, *prom_value(prom, "kepler_model_node_watts", {"model=\"" + model + "\"", "zone=\"package\""}), 1e-9 * watts) << model;
    }

    // Workload energy of the primary: the CSV's container rows of the same frames (joules with 6 decimals: exact uj).
    std::map<std::pair<uint64_t, std::string>, int64_t> csv_uj;  // (sequence, container) → uj, zone package
    std::ifstream csv(a_csv);
    for (std::string line; std::getline(csv, line);) {
        const std::vector<std::string> f = csv_fields(line);
        if (f.size() < 12 || f[3] != "container" || f[7] != "package") continue;
        csv_uj[{std::stoull(f[0]), f[4]}] += std::llround((std::stod(f[9]) + std::stod(f[10])) * 1e6);
    }
    size_t compared = 0;
    for (const auto& [id, rows] : answers["curve"]) {
        if (!workloads.contains(id)) continue;
        std::map<std::string, int64_t> published;
        for (const keplershm_estimate& r : rows) {
            if (r.workload_index == 0xffffffffu) continue;
            ASSERT_LT(r.workload_index, workloads[id].size());
            published[container_key(workloads[id][r.workload_index])] += std::llround(r.energy_joules * 1e6);
        }
        for (const auto& [container, uj] : published) {
            const int64_t exported = csv_uj[{id.sequence, container}];
            if (container == "system_processes" && unassigned[id]) EXPECT_LE(uj, exported) << id.sequence;
            else EXPECT_EQ(uj, exported) << "frame " << id.sequence << " container " << container;
            ++compared;
        }
    }
    EXPECT_GT(compared, 0u);

    // B read A's answers as an external model: all accepted.
    const std::string b_text = read_file(b_prom);
    EXPECT_EQ(prom_value(b_text, "kepler_model_rejected_answers_total", {"model=\"ext\""}).value_or(-1), 0) << b_text;
    double accepted = 0;
    for (const char* timing : {"ready", "on_time", "late"})
        accepted += prom_value(b_text, "kepler_model_answers_total", {"model=\"ext\"", fmt::format("timing=\"{}\"", timing)}).value_or(0);
    EXPECT_GE(accepted, 5) << b_text;
}
#endif
