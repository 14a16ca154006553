// libFuzzer: Kepler's node_type_index.json as a model server hands it to kepler-db (kepler-estimate/load/
// kepler_model_db.cpp). Any bytes: a choice whose similarity is finite and within [0, 1] (an exact match
// only for a type that covers the node), or ModelError. Another exception type escaping (nlohmann's own),
// a crash or a hang is a finding.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>

#include "load/kepler_model_db.hpp"
#include "model/model_metadata.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace kepler::estimate;
    NodeSpec node;
    node.processor = "intel_xeon_platinum_8259cl";
    node.cores = 96;
    node.chips = 2;
    node.memory_gb = 377;
    node.frequency_mhz = 3500;
    try {
        const NodeTypeChoice choice = choose_node_type(std::string(reinterpret_cast<const char*>(data), size), node, 0.7);
        if (!std::isfinite(choice.similarity) || choice.similarity < 0 || choice.similarity > 1) __builtin_trap();
        if (choice.exact && !choice.node_type) __builtin_trap();
        if (choice.reason.empty()) __builtin_trap();
    } catch (const ModelError&) {
    }
    return 0;
}
