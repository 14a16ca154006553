#include "load/kepler_model_db.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <stdexcept>

#include "model/json_object.hpp"
#include "load/key_value_list.hpp"
#include "model/model_metadata.hpp"

namespace kepler::estimate {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr uintmax_t kMaxProcBytes = 16u << 20;

/// One path part of a DB location: a plain name, so a spec cannot point outside DIR.
std::string db_name(std::string_view key, std::string_view value) {
    static const std::regex kName("[A-Za-z0-9_.-]{1,64}");
    const std::string v(value);
    if (!std::regex_match(v, kName) || v == "." || v == "..") throw std::invalid_argument(fmt::format("kepler-db {}=\"{}\" is not a plain name", key, v));
    return v;
}

/// /proc files report size 0, so they are streamed; an absurdly large one reads as empty.
std::string read_proc(const fs::path& path) {
    std::ifstream in(path);
    std::ostringstream text;
    if (in) text << in.rdbuf();
    const std::string out = text.str();
    return out.size() > kMaxProcBytes ? std::string() : out;
}

std::string trim(std::string s) {
    const size_t b = s.find_first_not_of(" \t");
    const size_t e = s.find_last_not_of(" \t\r");
    return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}

/// The model server's compute_similarity: 1 − |a − b| / mean(a, b), floored at 0.
double number_similarity(double base, double cmp) {
    if (base <= 0 && cmp <= 0) return 1;
    const double ratio = std::fabs(cmp - base) / ((base + cmp) / 2);
    return ratio >= 1 ? 0 : 1 - ratio;
}

/// The model server's compute_jaccard_similarity over character sets, halved when not equal.
double processor_similarity(const std::string& a, const std::string& b) {
    if (a == b) return 1;
    if (a.empty() || b.empty()) return 0;
    const std::set<char> sa(a.begin(), a.end()), sb(b.begin(), b.end());
    size_t common = 0;
    for (char c : sa) common += sb.count(c);
    return 0.5 * static_cast<double>(common) / static_cast<double>(sa.size() + sb.size() - common);
}

struct NodeType {
    int index = 0;
    std::string processor;
    double cores = 0, chips = 0, memory = 0, frequency = 0;
    size_t members = 0;
};

std::vector<NodeType> parse_index(const std::string& text) {
    const json doc = parse_json_object(text, "node_type_index.json");
    if (doc.size() > 4096) throw ModelError("node_type_index.json: more than 4096 node types");
    std::vector<NodeType> out;
    for (const auto& [key, body] : doc.items()) {
        NodeType t;
        const auto [end, ec] = std::from_chars(key.data(), key.data() + key.size(), t.index);
        const json* attrs = body.is_object() && body.contains("attrs") ? &body.at("attrs") : nullptr;
        if (ec != std::errc() || end != key.data() + key.size() || t.index < 0 || !attrs || !attrs->is_object()) {
            throw ModelError(fmt::format("node_type_index.json: node type \"{}\" is malformed", key));
        }
        // An attribute the index leaves out is 0 (unknown), as the model server reads it; one of the wrong type
        // or below 0 is refused: a negative attribute would raise the similarity above an exact match's.
        auto number = [&](const char* field) {
            const auto it = attrs->find(field);
            if (it == attrs->end() || it->is_null()) return 0.0;
            if (!it->is_number() || !std::isfinite(it->get<double>()) || it->get<double>() < 0) {
                throw ModelError(fmt::format("node_type_index.json: node type {}: attrs.{} must be a number >= 0", t.index, field));
            }
            return it->get<double>();
        };
        if (auto it = attrs->find("processor"); it != attrs->end() && !it->is_null()) {
            if (!it->is_string()) throw ModelError(fmt::format("node_type_index.json: node type {}: attrs.processor must be text", t.index));
            t.processor = it->get<std::string>();
        }
        t.cores = number("cores");
        t.chips = number("chips");
        t.memory = number("memory");
        t.frequency = number("frequency");
        if (auto m = body.find("members"); m != body.end() && m->is_array()) t.members = m->size();
        out.push_back(t);
    }
    std::sort(out.begin(), out.end(), [](const NodeType& a, const NodeType& b) { return a.index < b.index; });
    return out;
}

/// Weighted similarity of the model server (weights 5, 1, 1, 0.5, 0.5 over the total); an attribute
/// this node does not know contributes 0, as there.
double similarity(const NodeType& t, const NodeSpec& n) {
    double s = 5 * (n.processor.empty() ? 0 : processor_similarity(t.processor, n.processor));
    if (n.cores) s += 1 * number_similarity(t.cores, *n.cores);
    if (n.chips) s += 1 * number_similarity(t.chips, *n.chips);
    if (n.memory_gb) s += 0.5 * number_similarity(t.memory, *n.memory_gb);
    if (n.frequency_mhz) s += 0.5 * number_similarity(t.frequency, *n.frequency_mhz);
    return std::min(1.0, s / 8.0);
}

/// The server's "cover": every attribute this node knows equals the type's.
bool covers(const NodeType& t, const NodeSpec& n) {
    return (n.processor.empty() || n.processor == t.processor) && (!n.cores || *n.cores == t.cores) &&
           (!n.chips || *n.chips == t.chips) && (!n.memory_gb || *n.memory_gb == t.memory) &&
           (!n.frequency_mhz || *n.frequency_mhz == t.frequency);
}

std::string describe(const NodeType& t) {
    return fmt::format("node type {} ({}, {} cores, {} chips, {} GB, {} MHz)", t.index, t.processor, t.cores, t.chips, t.memory, t.frequency);
}

}  // namespace

KeplerDbParams parse_kepler_db_params(std::string_view args) {
    KeplerDbParams p;
    const size_t comma = args.find(',');
    p.dir = std::string(args.substr(0, comma));
    if (p.dir.empty()) throw std::invalid_argument("kepler-db needs a directory");
    const std::string_view options = comma == std::string_view::npos ? std::string_view() : args.substr(comma + 1);
    for (const auto& [key, value] : split_key_value_list(options, "kepler-db option")) {
        if (key == "source") p.source = db_name(key, value);
        else if (key == "output") p.output = db_name(key, value);
        else if (key == "group") p.group = db_name(key, value);
        else if (key == "trainer") p.trainer = db_name(key, value);
        else if (key == "root") p.root = std::string(value);
        else if (key == "min_similarity") {
            const std::string v(value);
            char* end = nullptr;
            p.min_similarity = std::strtod(v.c_str(), &end);
            if (v.empty() || *end != '\0' || !(p.min_similarity >= 0 && p.min_similarity <= 1)) {
                throw std::invalid_argument(fmt::format("kepler-db min_similarity=\"{}\" is not in [0, 1]", v));
            }
        } else {
            throw std::invalid_argument(fmt::format("unknown kepler-db option \"{}\" (source, output, group, trainer, root, min_similarity)", key));
        }
    }
    if (p.output != "AbsPower" && p.output != "DynPower") throw std::invalid_argument("kepler-db output must be AbsPower or DynPower");
    return p;
}

std::string format_processor(std::string_view brand) {
    std::string name(brand);
    if (name.size() < 2) return {};  // brand "-" on some machines
    for (const char* junk : {"(R)", "(r)", "CPU", "Processor", "processor"}) {
        for (size_t at; (at = name.find(junk)) != std::string::npos;) name.erase(at, std::strlen(junk));
    }
    name = std::regex_replace(name, std::regex(R"(\d+-Bit Multi-Core)"), "");
    name = trim(name.substr(0, name.find('(')));
    name = trim(name.substr(0, name.find('[')));
    std::erase(name, '@');
    std::erase(name, ',');
    for (size_t at; (at = name.find("®")) != std::string::npos;) name.erase(at, std::strlen("®"));
    name = trim(std::regex_replace(name, std::regex(R"(\d+(\.\d+)?\s?[GMgm][Hh]z)"), ""));
    std::string out;
    std::istringstream words(name);
    for (std::string w; words >> w;) out += (out.empty() ? "" : "_") + w;
    for (char& c : out) c = c == '-' ? '_' : static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    for (size_t at; (at = out.find("_v")) != std::string::npos;) out.erase(at, 1);
    return out;
}

NodeSpec read_node_spec(const fs::path& root) {
    NodeSpec spec;
    std::istringstream cpuinfo(read_proc(root / "proc/cpuinfo"));
    size_t cpus = 0;
    std::set<std::string> packages;
    double mhz = 0;
    for (std::string line; std::getline(cpuinfo, line);) {
        const size_t colon = line.find(':');
        if (colon == std::string::npos) continue;
        const std::string key = trim(line.substr(0, colon)), value = trim(line.substr(colon + 1));
        if (key == "processor") ++cpus;
        else if (key == "physical id") packages.insert(value);
        else if (key == "model name" && spec.processor.empty()) spec.processor = format_processor(value);
        else if (key == "cpu MHz") mhz = std::max(mhz, std::atof(value.c_str()));
    }
    if (cpus > 0) spec.cores = static_cast<double>(cpus);
    if (cpus > 0) spec.chips = static_cast<double>(std::max<size_t>(1, packages.size()));
    std::istringstream meminfo(read_proc(root / "proc/meminfo"));
    for (std::string line; std::getline(meminfo, line);) {
        if (line.rfind("MemTotal:", 0) == 0) spec.memory_gb = std::floor(std::atof(line.c_str() + 9) / (1024.0 * 1024.0));
    }
    const std::string max_khz = read_proc(root / "sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq");
    mhz = std::max(mhz, std::atof(max_khz.c_str()) / 1000.0);
    if (mhz > 0) spec.frequency_mhz = std::nearbyint(mhz / 100) * 100;  // the server rounds to 0.1 GHz
    return spec;
}

NodeTypeChoice choose_node_type(const std::string& index_json, const NodeSpec& node, double min_similarity) {
    const std::vector<NodeType> types = parse_index(index_json);
    NodeTypeChoice choice;
    const NodeType* best = nullptr;
    for (const NodeType& t : types) {
        if (covers(t, node) && (!best || !choice.exact || t.members > best->members)) {
            best = &t;  // among types covering a partial spec, the most populated (the server's score)
            choice.exact = true;
        }
    }
    if (choice.exact) {
        choice.node_type = best->index;
        choice.similarity = similarity(*best, node);
        choice.reason = fmt::format("{} matches this node's spec", describe(*best));
        return choice;
    }
    for (const NodeType& t : types) {
        const double s = similarity(t, node);
        if (!best || s > choice.similarity || (s == choice.similarity && t.members > best->members)) {
            best = &t;
            choice.similarity = s;
        }
    }
    const std::string here = fmt::format("this node: {}, {} cores, {} chips, {} GB, {} MHz", node.processor.empty() ? "?" : node.processor,
                                         node.cores.value_or(0), node.chips.value_or(0), node.memory_gb.value_or(0), node.frequency_mhz.value_or(0));
    if (!best) {
        choice.reason = "the model DB lists no node type";
    } else if (choice.similarity < min_similarity) {
        choice.reason = fmt::format("no node type close enough: best {} has similarity {:.2f} < {:.2f} ({})", describe(*best),
                                    choice.similarity, min_similarity, here);
    } else {
        choice.node_type = best->index;
        choice.reason = fmt::format("closest {} (similarity {:.2f}; {})", describe(*best), choice.similarity, here);
    }
    return choice;
}

fs::path kepler_db_model_path(const KeplerDbParams& p, int node_type) {
    // The model server's weight_support_trainers publish JSON weights; the others publish zips.
    static const std::set<std::string> kWeightTrainers = {"SGDRegressorTrainer", "LogarithmicRegressionTrainer",
                                                          "LogisticRegressionTrainer", "ExponentialRegressionTrainer"};
    const bool weights = kWeightTrainers.count(p.trainer) != 0;
    const std::string file = fmt::format("{}_{}.{}", p.trainer, node_type, weights ? "json" : "zip");
    return p.dir / p.source / p.output / p.group / file;
}

}  // namespace kepler::estimate
