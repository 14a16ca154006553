// Kepler 0.7's published models served in process: parity with Kepler's own stack on every file of the
// committed model-DB subset, the restricted unpickler and zip reader on hostile input, refusals, the
// feature mapping, and the node-type choice of kepler-db on fake /proc trees.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "model/kepler/kepler_model.hpp"
#include "load/kepler_model_db.hpp"
#include "model/kepler/kepler_zip.hpp"
#include "model/model_metadata.hpp"
#include "select/model_set.hpp"
#include "model/kepler/pickle_scaler.hpp"
#include "support/digest/sha256.hpp"
#include "support/subprocess.hpp"
#include "support/test_frames.hpp"

using namespace kepler::estimate;
using namespace estimate_test;
namespace fs = std::filesystem;

namespace {

const fs::path kDb = fs::path(MODEL_DB_DIR) / "ec2-0.7.11";

/// A scratch directory removed at the end of the test.
struct ScratchDir {
    fs::path path = fs::temp_directory_path() / ("kepler_models_" + std::to_string(::getpid()) + "_" +
                                                 ::testing::UnitTest::GetInstance()->current_test_info()->name());
    ScratchDir() { fs::create_directories(path); }
    ~ScratchDir() { fs::remove_all(path); }
};

void write(const fs::path& p, const std::string& text) {
    fs::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << text;
}

/// A byte string from a literal, NULs included.
template <size_t N>
std::string bytes(const char (&text)[N]) {
    return std::string(text, N - 1);
}

std::string scaler_bytes(const std::string& zip) { return read_zip_entries(kDb / zip).at("scaler.pkl"); }

nlohmann::json reference(const fs::path& out) {
    std::string log;
    const int status = run_command({"/usr/bin/python3", ESTIMATE_TEST_DIR "/kepler_reference.py", "--db", kDb.string(), "--out", out.string()}, log);
    if (status != 0) throw std::runtime_error("kepler_reference.py failed: " + log);
    return nlohmann::json::parse(std::ifstream(out));
}

}  // namespace

// Every model file of the subset predicts what Kepler's stack predicts (sklearn MaxAbsScaler + Python
// xgboost for the zips, the Go formula for the weights) on 40 rows, within 1e-4 relative.
TEST(KeplerParity, EveryModelFileMatchesKeplersStack) {
    ScratchDir tmp;
    const nlohmann::json ref = reference(tmp.path / "ref.json");
    ASSERT_EQ(ref["models"].size(), 23u) << "the committed subset has 23 model files";
    double worst_zip = 0, worst_json = 0;
    for (const auto& [rel, zones] : ref["models"].items()) {
        auto model = load_kepler_model(kDb / rel, 1);
        if (ref["scalers"].contains(rel)) {  // the unpickler reads the scale sklearn reads
            EXPECT_EQ(parse_max_abs_scaler(scaler_bytes(rel)).scale, ref["scalers"][rel].get<std::vector<double>>()) << rel;
        }
        ASSERT_EQ(model->zones().size(), zones.size()) << rel;
        for (size_t r = 0; r < ref["rows"].size(); ++r) {
            std::vector<double> row;
            for (const std::string& f : model->features()) row.push_back(ref["rows"][r].at(f).get<double>());
            const std::vector<double> ours = model->predict(row);
            for (size_t z = 0; z < ours.size(); ++z) {
                const double theirs = zones.at(std::string(zone_name(model->zones()[z])))[r].get<double>();
                const double rel_error = std::fabs(ours[z] - theirs) / std::max(std::fabs(theirs), 1e-9);
                if (theirs != 0 || ours[z] != 0) {
                    (rel.ends_with(".zip") ? worst_zip : worst_json) = std::max(rel.ends_with(".zip") ? worst_zip : worst_json, rel_error);
                }
                EXPECT_LE(rel_error, 1e-4) << rel << " row " << r << " zone " << zone_name(model->zones()[z]) << ": " << ours[z] << " vs " << theirs;
            }
        }
    }
    RecordProperty("worst_relative_error_xgboost_zip", std::to_string(worst_zip));
    RecordProperty("worst_relative_error_weights", std::to_string(worst_json));
    std::printf("parity: worst relative error %.3g (XGBoost zips), %.3g (weights)\n", worst_zip, worst_json);
}

TEST(KeplerParity, OutputTypeAndFeaturesComeFromTheFiles) {
    auto dyn = load_kepler_model(kDb / "rapl-sysfs/DynPower/BPFIRQ/XgboostFitTrainer_1.zip", 1);
    EXPECT_TRUE(dyn->dynamic());
    auto abs = load_kepler_model(kDb / "rapl-sysfs/AbsPower/BPFOnly/SGDRegressorTrainer_0.json", 1);
    EXPECT_FALSE(abs->dynamic());
    EXPECT_EQ(abs->features(), (std::vector<std::string>{"bpf_cpu_time_ms", "bpf_page_cache_hit"}));
}

// Kepler's features are per-interval totals over its 3 s sampling; ours are rates per second.
TEST(KeplerFeatures, RatesBecomePerIntervalTotals) {
    KeplerModel model("k", kDb / "rapl-sysfs/AbsPower/BPFIRQ/SGDRegressorTrainer_0.json", 1);
    NodeFeatures f;
    f.interval_s = 1;
    f.values[static_cast<size_t>(Feature::cpu_time_ms_per_s)] = 1000;
    f.values[static_cast<size_t>(Feature::page_cache_hits_per_s)] = 10;
    f.values[static_cast<size_t>(Feature::softirq_net_tx_per_s)] = 1;
    f.values[static_cast<size_t>(Feature::softirq_net_rx_per_s)] = 2;
    f.values[static_cast<size_t>(Feature::softirq_block_per_s)] = 3;
    const auto row = model.kepler_row(f);
    ASSERT_TRUE(row);
    // sorted names: block, cpu_time, rx, tx, page_cache
    EXPECT_EQ(*row, (std::vector<double>{9, 3000, 6, 3, 30}));
    f.values[static_cast<size_t>(Feature::softirq_block_per_s)].reset();
    EXPECT_FALSE(model.kepler_row(f)) << "a missing feature is missing, never zero";
}

TEST(KeplerRefusal, MissingMetricAndUnknownFeatureAreRefusedWithTheReason) {
    KeplerModel bpf("k", kDb / "rapl-sysfs/AbsPower/BPFOnly/XgboostFitTrainer_0.zip", 1);
    NodeFacts node;
    node.metric_mask = KEPLERSHM_METRIC_CPU_TIME;  // no page-cache tracepoints on this node
    const auto why = bpf.refusal(node);
    ASSERT_TRUE(why);
    EXPECT_NE(why->find("bpf_page_cache_hit"), std::string::npos) << *why;
    EXPECT_NE(why->find("PAGE_CACHE"), std::string::npos) << *why;
    node.metric_mask |= KEPLERSHM_METRIC_PAGE_CACHE;
    EXPECT_FALSE(bpf.refusal(node));

    ScratchDir tmp;
    write(tmp.path / "w.json", R"({"package": {"All_Weights": {"Bias_Weight": 1, "Categorical_Variables": {},
        "Numerical_Variables": {"accelerator_intel_qat": {"scale": 1, "weight": 2}}}}})");
    KeplerModel qat("q", tmp.path / "w.json", 1);
    const auto qat_why = qat.refusal(node);
    ASSERT_TRUE(qat_why);
    EXPECT_NE(qat_why->find("accelerator_intel_qat"), std::string::npos) << *qat_why;
}

TEST(KeplerPickle, HostileGlobalsAndOpcodesAreRefused) {
    // os.system("true") as protocol 4 would run it: PROTO, 'os', 'system', STACK_GLOBAL, arg, TUPLE1, REDUCE, STOP.
    const std::string system_call = bytes("\x80\x04\x8c\x02os\x8c\x06system\x93\x8c\x04true\x85R.");
    try {
        (void)parse_max_abs_scaler(system_call);
        FAIL() << "os.system accepted";
    } catch (const ModelError& e) {
        EXPECT_NE(std::string(e.what()).find("global os.system is not allowed"), std::string::npos) << e.what();
    }
    // Protocol 0 GLOBAL opcode ('c'), and builtins.eval through the allowed opcodes.
    EXPECT_THROW((void)parse_max_abs_scaler("cos\nsystem\n(S'true'\ntR."), ModelError);
    EXPECT_THROW((void)parse_max_abs_scaler(bytes("\x80\x04\x8c\x08" "builtins\x8c\x04" "eval\x93.")), ModelError);
    // An allowed global used as a callable other than numpy.dtype.
    EXPECT_THROW((void)parse_max_abs_scaler(bytes("\x80\x04\x8c\x05numpy\x8c\x07ndarray\x93)R.")), ModelError);
    EXPECT_THROW((void)parse_max_abs_scaler(""), ModelError);
}

// A chain of TUPLE1 opcodes nests one level per byte: 200,000 of them crashed the estimator (freeing the
// chain recursed off the stack). Refused at 32 levels; and a value held by another cannot be changed
// afterwards (which would let a dict come to hold itself).
TEST(KeplerPickle, DeepNestingAndSelfReferenceAreRefused) {
    const std::string deep = bytes("\x80\x04N") + std::string(200'000, '\x85') + ".";
    try {
        (void)parse_max_abs_scaler(deep);
        FAIL() << "a 200,000-deep tuple accepted";
    } catch (const ModelError& e) {
        EXPECT_NE(std::string(e.what()).find("values nest deeper than 32 levels (at byte 34)"), std::string::npos) << e.what();
    }
    // EMPTY_DICT, MEMOIZE, TUPLE1 (the dict held), BINGET 0, then SETITEMS into the held dict: refused.
    const std::string cycle = bytes("\x80\x04}\x94\x85h\x00(\x8c\x01kh\x00u.");
    try {
        (void)parse_max_abs_scaler(cycle);
        FAIL() << "a dict made to hold itself";
    } catch (const ModelError& e) {
        EXPECT_NE(std::string(e.what()).find("already inside another"), std::string::npos) << e.what();
    }
}

// Found by fuzz_pickle_scaler: a dict not yet held by anything, fetched from the memo as one of its own
// values (EMPTY_DICT, MEMOIZE, MARK, "k", BINGET 0, SETITEMS), came to hold itself, and the cycle of
// shared pointers leaked on every such file. Refused.
TEST(KeplerPickle, ADictThatHoldsItselfIsRefused) {
    for (const std::string& cycle : {bytes("\x80\x04}\x94(\x8c\x01kh\x00u."), bytes("\x80\x04}}\x94h\x00(\x8c\x01kh\x00u."),
                                     bytes("\x80\x04}\x94\x8c\x01kh\x00s.")}) {
        try {
            (void)parse_max_abs_scaler(cycle);
            ADD_FAILURE() << "a dict made to hold itself";
        } catch (const ModelError& e) {
            EXPECT_NE(std::string(e.what()).find("a value is made to hold itself"), std::string::npos) << e.what();
        }
    }
}

// Every prefix of a real scaler, and every single-byte corruption, is refused or parsed; never a crash.
TEST(KeplerPickle, TruncatedAndCorruptedScalersAreRefused) {
    const std::string good = scaler_bytes("rapl-sysfs/AbsPower/BPFIRQ/XgboostFitTrainer_0.zip");
    EXPECT_EQ(parse_max_abs_scaler(good).scale.size(), 5u);
    for (size_t n = 0; n < good.size(); ++n) {
        EXPECT_THROW((void)parse_max_abs_scaler(good.substr(0, n)), ModelError) << "prefix of " << n << " bytes";
    }
    size_t refused = 0;
    for (size_t i = 0; i < good.size(); ++i) {
        std::string bad = good;
        bad[i] = static_cast<char>(bad[i] ^ 0x5a);
        try {
            (void)parse_max_abs_scaler(bad);
        } catch (const ModelError&) {
            ++refused;
        }
    }
    EXPECT_GT(refused, good.size() / 2);
}

TEST(KeplerZip, BadArchivesAreRefused) {
    ScratchDir tmp;
    write(tmp.path / "garbage.zip", "PK\x03\x04 this is not a zip");
    EXPECT_THROW((void)read_zip_entries(tmp.path / "garbage.zip"), ModelError);
    EXPECT_THROW((void)load_kepler_model(tmp.path / "garbage.zip", 1), ModelError);
    EXPECT_THROW((void)load_kepler_model(tmp.path / "missing.zip", 1), ModelError);
    // Path traversal, a zip bomb (65 MiB of zeros, ~64 KiB compressed), the same bomb whose headers
    // claim 1000 bytes (the inflated bytes are counted), and a zip without scaler.pkl.
    std::string log;
    const std::string script = "import zipfile, sys\nd = sys.argv[1]\n"
                               "with zipfile.ZipFile(d + '/evil.zip', 'w') as z: z.writestr('../evil.json', '{}')\n"
                               "with zipfile.ZipFile(d + '/bomb.zip', 'w', zipfile.ZIP_DEFLATED) as z: z.writestr('package.json', bytes(65 << 20))\n"
                               "b = bytearray(open(d + '/bomb.zip', 'rb').read())\n"
                               "cd = b.rfind(b'PK\\x01\\x02')\n"
                               "b[22:26] = b[cd + 24:cd + 28] = (1000).to_bytes(4, 'little')\n"  // sizes lie: 1000 bytes
                               "open(d + '/liar.zip', 'wb').write(b)\n"
                               "src = zipfile.ZipFile(sys.argv[2])\n"
                               "with zipfile.ZipFile(d + '/noscaler.zip', 'w') as z:\n"
                               "    [z.writestr(n, src.read(n)) for n in src.namelist() if n != 'scaler.pkl']\n";
    ASSERT_EQ(run_command({"/usr/bin/python3", "-c", script, tmp.path.string(), (kDb / "rapl-sysfs/AbsPower/BPFIRQ/XgboostFitTrainer_0.zip").string()}, log), 0) << log;
    for (const char* name : {"evil.zip", "bomb.zip", "liar.zip", "noscaler.zip"}) {
        try {
            (void)load_kepler_model(tmp.path / name, 1);
            ADD_FAILURE() << name << " accepted";
        } catch (const ModelError& e) {
            RecordProperty(name, e.what());
        }
    }
}

// Found while fuzzing Kepler's model files (fuzz_kepler_zip, fuzz_kepler_weights): a name field of the
// wrong JSON type let nlohmann's type_error escape instead of ModelError; a "psys" zone (read as platform)
// had its weights looked up under "platform" (nlohmann's out_of_range escaped); psys beside platform gave
// two outputs for one zone.
TEST(KeplerZip, NonStringNamesAndTwoPlatformZonesAreRefused) {
    ScratchDir tmp;
    std::string log;
    const std::string script = R"(import json, sys, zipfile
d, src = sys.argv[1], zipfile.ZipFile(sys.argv[2])
files = {n: src.read(n) for n in src.namelist()}
meta = json.loads(files['metadata.json'])
zones = json.loads(files[meta['model_file']])
def write(name, changes):
    with zipfile.ZipFile(d + '/' + name, 'w') as z:
        for n, b in dict(files, **changes).items(): z.writestr(n, b)
write('output_type.zip', {'metadata.json': json.dumps(dict(meta, output_type=1))})
write('model_file.zip', {'metadata.json': json.dumps(dict(meta, model_file=['x']))})
write('zone_file.zip', {meta['model_file']: json.dumps({'package': dict(zones['package'], model_file=5)})})
write('two_platforms.zip', {meta['model_file']: json.dumps({'platform': zones['package'], 'psys': zones['package']})})
)";
    ASSERT_EQ(run_command({"/usr/bin/python3", "-c", script, tmp.path.string(), (kDb / "rapl-sysfs/AbsPower/BPFIRQ/XgboostFitTrainer_0.zip").string()}, log), 0) << log;
    const std::pair<const char*, const char*> cases[] = {{"output_type.zip", "\"output_type\" is not a string"},
                                                         {"model_file.zip", "\"model_file\" is not a string"},
                                                         {"zone_file.zip", "\"model_file\" is not a string"},
                                                         {"two_platforms.zip", "zone platform has two boosters"}};
    for (const auto& [name, reason] : cases) {
        try {
            (void)load_kepler_model(tmp.path / name, 1);
            ADD_FAILURE() << name << " accepted";
        } catch (const ModelError& e) {
            EXPECT_NE(std::string(e.what()).find(reason), std::string::npos) << name << ": " << e.what();
        }
    }

    const std::string zone = R"({"All_Weights": {"Bias_Weight": 10.0, "Categorical_Variables": {},
        "Numerical_Variables": {"bpf_cpu_time_ms": {"scale": 2.0, "weight": 4.0}}}})";
    const auto psys = parse_kepler_weights(R"({"psys": )" + zone + "}", false, "psys.json");
    ASSERT_EQ(psys->zones(), std::vector<ZoneKind>{ZoneKind::platform});
    EXPECT_DOUBLE_EQ(psys->predict({6.0}).at(0), 10.0 + 4.0 * 6.0 / 2.0);
    try {
        (void)parse_kepler_weights(R"({"platform": )" + zone + R"(, "psys": )" + zone + "}", false, "both.json");
        ADD_FAILURE() << "psys and platform weights accepted";
    } catch (const ModelError& e) {
        EXPECT_NE(std::string(e.what()).find("zone platform has two sets of weights"), std::string::npos) << e.what();
    }
}

namespace {

/// A fake host tree: /proc/cpuinfo with `cpus` logical CPUs over `chips` packages, MemTotal, max freq.
fs::path fake_root(const fs::path& dir, const std::string& brand, int cpus, int chips, double mem_gib, int max_mhz) {
    std::string cpuinfo;
    for (int i = 0; i < cpus; ++i) {
        cpuinfo += "processor\t: " + std::to_string(i) + "\nmodel name\t: " + brand + "\nphysical id\t: " +
                   std::to_string(i % chips) + "\ncpu MHz\t\t: 2500.000\n\n";
    }
    write(dir / "proc/cpuinfo", cpuinfo);
    write(dir / "proc/meminfo", "MemTotal:       " + std::to_string(static_cast<long>(mem_gib * 1024 * 1024)) + " kB\n");
    write(dir / "sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq", std::to_string(max_mhz * 1000) + "\n");
    return dir;
}

NodeTypeChoice choose(const fs::path& root) {
    return choose_node_type(read_small_file(kDb / "node_type_index.json", 1 << 20), read_node_spec(root), 0.7);
}

}  // namespace

TEST(KeplerDb, ProcessorNamesAreFormattedLikeTheModelServer) {
    EXPECT_EQ(format_processor("Intel(R) Xeon(R) Platinum 8259CL CPU @ 2.50GHz"), "intel_xeon_platinum_8259cl");
    EXPECT_EQ(format_processor("Intel(R) Xeon(R) CPU E5-2686 v4 @ 2.30GHz"), "intel_xeon_e5_2686v4");
    EXPECT_EQ(format_processor("Intel(R) Xeon(R) Platinum 8488C"), "intel_xeon_platinum_8488c");
    EXPECT_EQ(format_processor("AMD EPYC 7R13 Processor"), "amd_epyc_7r13");
    EXPECT_EQ(format_processor("-"), "");
}

TEST(KeplerDb, NodeTypeIsChosenBySpec) {
    ScratchDir tmp;
    // m5.metal and r5.metal share the CPU; memory decides (exact matches).
    auto m5 = choose(fake_root(tmp.path / "m5", "Intel(R) Xeon(R) Platinum 8259CL CPU @ 2.50GHz", 96, 2, 377.3, 3500));
    EXPECT_EQ(m5.node_type, 0);
    EXPECT_TRUE(m5.exact);
    auto r5 = choose(fake_root(tmp.path / "r5", "Intel(R) Xeon(R) Platinum 8259CL CPU @ 2.50GHz", 96, 2, 755.2, 3500));
    EXPECT_EQ(r5.node_type, 3);
    // m7i.metal-24xl: one chip.
    auto m7i = choose(fake_root(tmp.path / "m7i", "Intel(R) Xeon(R) Platinum 8488C", 96, 1, 377.9, 3800));
    EXPECT_EQ(m7i.node_type, 5);
    // An i3-like node with less memory and another frequency: no exact type, the closest is type 1.
    auto i3 = choose(fake_root(tmp.path / "i3", "Intel(R) Xeon(R) CPU E5-2686 v4 @ 2.30GHz", 72, 2, 240, 2700));
    EXPECT_EQ(i3.node_type, 1);
    EXPECT_FALSE(i3.exact);
    EXPECT_NE(i3.reason.find("closest node type 1"), std::string::npos) << i3.reason;
    // A small AMD VM: nothing is close enough.
    auto amd = choose(fake_root(tmp.path / "amd", "AMD EPYC 7R13 Processor", 8, 1, 15.5, 3600));
    EXPECT_FALSE(amd.node_type);
    EXPECT_NE(amd.reason.find("no node type close enough"), std::string::npos) << amd.reason;
}

// node_type_index.json comes from a model server: a malformed entry is refused with its reason, and no
// attribute can lift a type's similarity above an exact match's.
TEST(KeplerDb, HostileNodeTypesAreRefusedWithTheReason) {
    NodeSpec node;
    node.processor = "intel_xeon";
    node.cores = 8;
    auto error_of = [&](const std::string& index) -> std::string {
        try {
            const NodeTypeChoice c = choose_node_type(index, node, 0.1);
            EXPECT_GE(c.similarity, 0);
            EXPECT_LE(c.similarity, 1);
            return "accepted";
        } catch (const ModelError& e) {
            return e.what();
        }
    };
    EXPECT_EQ(error_of(R"({"0":{"attrs":{"processor":"intel_xeon","cores":8}}})"), "accepted");
    EXPECT_EQ(error_of(R"({"0":{"attrs":{"processor":null,"cores":8,"memory":null}}})"), "accepted") << "null: unknown";
    EXPECT_NE(error_of(R"({"0":{"attrs":{"processor":"intel_xeon","cores":-24}}})").find("node type 0: attrs.cores must be a number >= 0"),
              std::string::npos);
    EXPECT_NE(error_of(R"({"0":{"attrs":{"processor":7}}})").find("attrs.processor must be text"), std::string::npos);
    EXPECT_NE(error_of(R"({"0":{"attrs":{"chips":"2"}}})").find("attrs.chips must be a number"), std::string::npos);
    EXPECT_NE(error_of(R"({"-1":{"attrs":{}}})").find("node type \"-1\" is malformed"), std::string::npos);
    EXPECT_NE(error_of("[1,2]").find("node_type_index.json"), std::string::npos);
}

TEST(KeplerDb, SpecOptionsAndPaths) {
    const KeplerDbParams p = parse_kepler_db_params("/db,group=BPFIRQ,trainer=SGDRegressorTrainer,min_similarity=0.9");
    EXPECT_EQ(kepler_db_model_path(p, 3), fs::path("/db/rapl-sysfs/AbsPower/BPFIRQ/SGDRegressorTrainer_3.json"));
    EXPECT_EQ(kepler_db_model_path(parse_kepler_db_params("/db"), 0), fs::path("/db/rapl-sysfs/AbsPower/BPFOnly/XgboostFitTrainer_0.zip"));
    EXPECT_THROW((void)parse_kepler_db_params("/db,group=../../etc"), std::invalid_argument);
    EXPECT_THROW((void)parse_kepler_db_params("/db,colour=red"), std::invalid_argument);
    EXPECT_THROW((void)parse_kepler_db_params("/db,output=Watts"), std::invalid_argument);
}

// The model set loads the chosen file, and says why it falls back when no node type fits.
TEST(KeplerDb, ModelSetLoadsTheMatchOrSaysItFallsBack) {
    ScratchDir tmp;
    const fs::path m5 = fake_root(tmp.path / "m5", "Intel(R) Xeon(R) Platinum 8259CL CPU @ 2.50GHz", 96, 2, 377.3, 3500);
    const fs::path amd = fake_root(tmp.path / "amd", "AMD EPYC 7R13 Processor", 8, 1, 15.5, 3600);
    ModelSet set({parse_model_spec("db=kepler-db:" + kDb.string() + ",root=" + m5.string()),
                  parse_model_spec("far=kepler-db:" + kDb.string() + ",root=" + amd.string()),
                  parse_model_spec("file=kepler:" + (kDb / "rapl-sysfs/AbsPower/BPFIRQ/SGDRegressorTrainer_1.json").string())},
                 std::nullopt, ModelSetOptions{});
    const auto log = set.refresh();
    std::string all;
    for (const auto& line : log) all += line + "\n";
    EXPECT_NE(all.find("model db: loaded (kepler-db " + (kDb / "rapl-sysfs/AbsPower/BPFOnly/XgboostFitTrainer_0.zip").string()), std::string::npos) << all;
    EXPECT_NE(all.find("node type 0 (intel_xeon_platinum_8259cl"), std::string::npos) << all;
    EXPECT_NE(all.find("model file: loaded"), std::string::npos) << all;
    for (const ModelReport& r : set.reports()) {
        if (r.name == "far") {
            EXPECT_NE(r.reason.find("no node type close enough"), std::string::npos) << r.reason;
            EXPECT_NE(r.reason.find("falling back"), std::string::npos) << r.reason;
        }
        if (r.name == "db") {
            EXPECT_EQ(r.loads, 1u);
        }
    }
}

namespace {

/// Replays 10 frames of a 96-CPU node without a meter through the estimator binary with `model`;
/// returns the Prometheus text it writes.
std::string replay_with(const fs::path& dir, const std::string& model) {
    std::vector<TestFrame> frames;
    for (uint64_t i = 0; i < 10; ++i) {
        TestFrame f = simple_frame(1'000'000'000ull + i * 3'000'000'000ull, 3'000'000'000ull, {40'000'000'000ull, 20'000'000'000ull}, {}, 96);
        for (TestProcess& p : f.processes) p.extra_flags |= KEPLERSHM_PROC_PAGE_CACHE_VALID;
        frames.push_back(f);
    }
    record_frames(dir / "node.kshm", node_options(96, kProcfsMetrics | KEPLERSHM_METRIC_PAGE_CACHE), frames);
    std::string log;
    const int status = run_command({ESTIMATE_BINARY, "--replay", (dir / "node.kshm").string(), "--quiet", "--model", model, "--prom-out",
                                    (dir / "out.prom").string()},
                                   log);
    if (status != 0) throw std::runtime_error("kepler-estimate failed: " + log);
    return read_small_file(dir / "out.prom", 16 << 20);
}

std::string info_line(const std::string& prom, const std::string& model) {
    const std::string key = "kepler_model_info{model=\"" + model + "\"";
    const size_t at = prom.find(key);
    return at == std::string::npos ? std::string() : prom.substr(at, prom.find('\n', at) - at);
}

}  // namespace

// The binary end to end: the chosen node type is in kepler_model_info{reason}, and so is the fallback.
TEST(KeplerDb, EstimatorReportsTheMatchAndTheFallbackInModelInfo) {
    ScratchDir tmp;
    const fs::path m5 = fake_root(tmp.path / "m5", "Intel(R) Xeon(R) Platinum 8259CL CPU @ 2.50GHz", 96, 2, 377.3, 3500);
    const std::string matched = info_line(replay_with(tmp.path, "kdb=kepler-db:" + kDb.string() + ",root=" + m5.string()), "kdb");
    EXPECT_NE(matched.find("selected=\"true\""), std::string::npos) << matched;
    EXPECT_NE(matched.find("node type 0 (intel_xeon_platinum_8259cl"), std::string::npos) << matched;

    const fs::path amd = fake_root(tmp.path / "amd", "AMD EPYC 7R13 Processor", 8, 1, 15.5, 3600);
    const std::string prom = replay_with(tmp.path, "kdb=kepler-db:" + kDb.string() + ",root=" + amd.string());
    const std::string fallback = info_line(prom, "kdb");
    EXPECT_NE(fallback.find("selected=\"false\""), std::string::npos) << fallback;
    EXPECT_NE(fallback.find("falling back"), std::string::npos) << fallback;
    EXPECT_NE(info_line(prom, "curve").find("selected=\"true\""), std::string::npos) << prom;
}

// kepler:FILE,sha256=HEX: the file is loaded only while its bytes are the pinned ones.
TEST(KeplerModelFile, APinnedFileIsLoadedOnlyWithItsDigest) {
    const fs::path zip = kDb / "rapl-sysfs/AbsPower/BPFOnly/XgboostFitTrainer_0.zip";
    std::ifstream in(zip, std::ios::binary);
    const std::string digest = kepler::support::sha256_hex(std::string(std::istreambuf_iterator<char>(in), {}));
    ModelSet set({parse_model_spec("good=kepler:" + zip.string() + ",sha256=" + digest),
                  parse_model_spec("altered=kepler:" + zip.string() + ",sha256=" + std::string(64, 'e'))},
                 std::nullopt, ModelSetOptions{});
    std::string all;
    for (const auto& line : set.refresh()) all += line + "\n";
    for (const ModelReport& r : set.reports()) {
        if (r.name == "good") {
            EXPECT_EQ(r.loads, 1u) << all;
        }
        if (r.name == "altered") {
            EXPECT_EQ(r.loads, 0u) << all;
            EXPECT_NE(r.reason.find("sha256 is " + digest + ", but " + std::string(64, 'e') + " was pinned"), std::string::npos) << r.reason;
        }
    }
}

// --model-server: a kepler-db folder missing locally is fetched (index first, then only the chosen file).
TEST(KeplerDb, FolderIsFetchedFromAModelServer) {
    ScratchDir tmp;
    const int port = free_port();
    Child server({"/usr/bin/python3", "-m", "http.server", std::to_string(port), "--bind", "127.0.0.1", "--directory", kDb.parent_path().string()},
                 (tmp.path / "http.log").string());
    const std::string url = "http://127.0.0.1:" + std::to_string(port);
    std::string body;
    for (int i = 0; i < 100 && estimate_test::http_get(url + "/ec2-0.7.11/node_type_index.json", body) != 200; ++i) ::usleep(50'000);

    const fs::path m5 = fake_root(tmp.path / "m5", "Intel(R) Xeon(R) Platinum 8259CL CPU @ 2.50GHz", 96, 2, 377.3, 3500);
    const fs::path local = tmp.path / "cache" / "ec2-0.7.11";
    ModelSetOptions options;
    options.model_server.url = url;
    ModelSet set({parse_model_spec("db=kepler-db:" + local.string() + ",root=" + m5.string()),
                  parse_model_spec("gone=kepler-db:" + (tmp.path / "cache" / "no-such-pipeline").string() + ",root=" + m5.string())},
                 std::nullopt, options);
    std::string all;
    for (const auto& line : set.refresh()) all += line + "\n";
    EXPECT_TRUE(fs::exists(local / "rapl-sysfs/AbsPower/BPFOnly/XgboostFitTrainer_0.zip")) << all;
    EXPECT_FALSE(fs::exists(local / "rapl-sysfs/AbsPower/BPFOnly/XgboostFitTrainer_1.zip")) << "only the chosen file is fetched";
    EXPECT_NE(all.find("model db: loaded"), std::string::npos) << all;
    for (const ModelReport& r : set.reports()) {
        if (r.name == "gone") {
            EXPECT_NE(r.reason.find("fetching the model DB failed"), std::string::npos) << r.reason;
        }
    }
}
