// `--model NAME=kepler-db:DIR`: a folder of Kepler's model DB (node_type_index.json + <source>/<output>/
// <group>/<trainer>_<N>.{json,zip}); the node type is chosen by this node's spec the way Kepler's model
// server does (kepler-model-server util/similarity.py, machine_spec.py): an exact match of processor,
// cores, chips, memory and frequency first, else the most similar type by a weighted similarity.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace kepler::estimate {

/// Options of a kepler-db spec: `kepler-db:DIR[,source=S,output=O,group=G,trainer=T,root=R,min_similarity=X]`.
/// Plain value.
struct KeplerDbParams {
    std::filesystem::path dir;
    std::string source = "rapl-sysfs";
    std::string output = "AbsPower";
    std::string group = "BPFOnly";
    std::string trainer = "XgboostFitTrainer";
    std::filesystem::path root = "/";  // where /proc and /sys are read (a fake tree in tests)
    double min_similarity = 0.7;       // below this the closest node type is not accepted
};
/// Throws std::invalid_argument quoting the bad part.
[[nodiscard]] KeplerDbParams parse_kepler_db_params(std::string_view args);

/// This node as the model server describes a machine; unknown attributes stay empty. Plain value.
struct NodeSpec {
    std::string processor;            // formatted as the server does: "intel_xeon_platinum_8259cl"
    std::optional<double> cores;      // logical CPUs
    std::optional<double> chips;      // distinct physical ids
    std::optional<double> memory_gb;  // MemTotal in whole GiB
    std::optional<double> frequency_mhz;
};
/// The model server's processor name format of a /proc/cpuinfo "model name".
[[nodiscard]] std::string format_processor(std::string_view brand);
/// Reads <root>/proc/cpuinfo, <root>/proc/meminfo and <root>/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq.
[[nodiscard]] NodeSpec read_node_spec(const std::filesystem::path& root);

/// The chosen node type, or why none was accepted. Plain value.
struct NodeTypeChoice {
    std::optional<int> node_type;
    bool exact = false;
    double similarity = 0;
    std::string reason;  // for kepler_model_info{reason}
};
/// Chooses among the node types of a node_type_index.json text. Throws ModelError on a malformed index.
[[nodiscard]] NodeTypeChoice choose_node_type(const std::string& index_json, const NodeSpec& node, double min_similarity);
/// <dir>/<source>/<output>/<group>/<trainer>_<type>.zip (or .json for weight trainers).
[[nodiscard]] std::filesystem::path kepler_db_model_path(const KeplerDbParams& params, int node_type);

}  // namespace kepler::estimate
