#include "select/model_set.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "load/http_fetch.hpp"
#include "model/kepler/kepler_model.hpp"
#include "load/kepler_model_db.hpp"
#include "model/xgboost_model.hpp"

namespace kepler::estimate {

namespace fs = std::filesystem;

/// State of one configured model. Not thread-safe (owned by ModelSet).
struct ModelSet::Entry {
    ModelSpec spec;
    std::unique_ptr<NodeModel> model;          // null while waiting for a file
    std::string fingerprint;                   // of the files the running model (or last failure) came from
    std::string state;                         // why there is no model, or "" when there is one
    ModelReport report;
    std::string version;                       // named in its published estimates: the kind and the model file
    std::map<ZoneKind, std::deque<double>> ape;  // recent absolute percentage errors
    bool answered = false;                     // gave energy for the latest frame
    std::optional<std::string> refused;        // for the latest frame's node
};

namespace {
/// Whether an answer holds the CPU side of the node (a meter of GPUs alone does not: a GPU VM without RAPL).
bool has_cpu_side(const NodeEnergy& answer) {
    return std::any_of(answer.zones.begin(), answer.zones.end(), [](const ZoneEnergy& z) { return z.zone.kind != ZoneKind::gpu; });
}

/// GPUs are measured whenever the node measures them: a model that estimates the CPU side gets the meter's
/// GPU zones (no model of this estimator predicts a GPU).
void add_measured_gpus(NodeEnergy& primary, const NodeEnergy& measured) {
    if (std::any_of(primary.zones.begin(), primary.zones.end(), [](const ZoneEnergy& z) { return z.zone.kind == ZoneKind::gpu; })) return;
    for (const ZoneEnergy& z : measured.zones) {
        if (z.zone.kind == ZoneKind::gpu) primary.zones.push_back(z);
    }
}

/// A model file loaded (first time or again) takes over the entry, with what its files say of it.
void install(ModelSet::Entry& e, std::unique_ptr<NodeModel> fresh) {
    e.model = std::move(fresh);
    e.report.expected_error_w = e.model->expected_error_w();
    e.state.clear();
    e.report.reason = "loaded; no frame since";
    ++e.report.loads;
}
}  // namespace

ModelSet::ModelSet(std::vector<ModelSpec> specs, std::optional<std::string> primary, ModelSetOptions options)
    : specs_(with_builtin_models(std::move(specs))), primary_(std::move(primary)), options_(options) {
    for (const ModelSpec& spec : specs_) {
        auto entry = std::make_unique<Entry>();
        entry->spec = spec;
        entry->report.name = spec.name;
        entry->report.kind = std::string(to_string(spec.kind));
        entry->version = spec.path.empty() ? entry->report.kind : entry->report.kind + " " + spec.path.filename().string();
        if (spec.kind == ModelSpec::Kind::measured) entry->model = make_measured_model(options.gpu_idle);
        if (spec.kind == ModelSpec::Kind::curve) entry->model = make_curve_model(spec.name, spec.curve);
        if (spec.kind == ModelSpec::Kind::external) {
            if (!options.make_external) throw std::invalid_argument(fmt::format("model {}: external models are not available here", spec.name));
            entry->model = options.make_external(spec, primary_ && *primary_ == spec.name);
        }
        if (spec.kind == ModelSpec::Kind::xgboost) entry->state = fmt::format("waiting for {}", metadata_path(spec.path).string());
        if (spec.kind == ModelSpec::Kind::kepler || spec.kind == ModelSpec::Kind::kepler_db) entry->state = "not loaded yet";
        entry->report.reason = entry->state.empty() ? "no frame yet" : entry->state;
        entries_.push_back(std::move(entry));
    }
    if (primary_ && std::none_of(specs_.begin(), specs_.end(), [&](const ModelSpec& s) { return s.name == *primary_; })) {
        throw std::invalid_argument(fmt::format("--primary {} names no configured model", *primary_));
    }
}

ModelSet::~ModelSet() = default;

namespace {

/// Size and mtime of one file; empty when it is missing.
std::string file_stamp(const fs::path& p) {
    std::error_code ec;
    const uintmax_t size = fs::file_size(p, ec);
    if (ec) return {};
    const auto mtime = fs::last_write_time(p, ec).time_since_epoch().count();
    return fmt::format("{}:{}:{}", p.string(), size, static_cast<long long>(mtime));
}

/// The Kepler model file a kepler or kepler-db entry should run, with the note for its reason; nullopt
/// (and `state` set) when kepler-db finds no acceptable node type for this node.
/// URL/<folder name>/<relative path> of a kepler-db file (the parts are plain names, checked at parse).
void fetch_db_file(const ModelServer& server, const KeplerDbParams& db, const fs::path& file) {
    const std::string base = server.url.ends_with('/') ? server.url : server.url + "/";
    const std::string url = base + db.dir.filename().string() + "/" + file.lexically_relative(db.dir).string();
    const std::string bytes = fetch_bytes(server, url);
    fs::create_directories(file.parent_path());
    write_atomically(file, bytes);
}

std::optional<std::pair<fs::path, std::string>> kepler_file(const ModelSpec& spec, const ModelServer& server, std::string& state,
                                                          CpuMatch& match) {
    if (spec.kind == ModelSpec::Kind::kepler) {
        match = CpuMatch::any;  // a file named by the operator: no spec to compare
        // A pinned file is checked as it is when loaded (the model is read from it right after).
        if (!spec.sha256.empty()) check_sha256(read_small_file(spec.path, kMaxModelFileBytes), spec.sha256, spec.path.string());
        return std::make_pair(spec.path, fmt::format("Kepler model {}", spec.path.string()));
    }
    const KeplerDbParams& db = spec.kepler_db;
    const NodeTypeChoice choice =
        choose_node_type(read_small_file(db.dir / "node_type_index.json", 1u << 20), read_node_spec(db.root), db.min_similarity);
    if (!choice.node_type) {
        state = fmt::format("kepler-db {}: {}; falling back", db.dir.string(), choice.reason);
        return std::nullopt;
    }
    match = choice.exact ? CpuMatch::exact : CpuMatch::vendor;
    const fs::path file = kepler_db_model_path(db, *choice.node_type);
    std::error_code ec;
    if (!server.url.empty() && !fs::exists(file, ec)) fetch_db_file(server, db, file);
    return std::make_pair(file, fmt::format("kepler-db {}: {}", file.string(), choice.reason));
}

}  // namespace

void ModelSet::refresh_kepler(Entry& e, std::vector<std::string>& log) {
    const fs::path watched = e.spec.kind == ModelSpec::Kind::kepler ? e.spec.path : e.spec.kepler_db.dir / "node_type_index.json";
    std::error_code ec;
    if (e.spec.kind == ModelSpec::Kind::kepler_db && !options_.model_server.url.empty() && !fs::exists(watched, ec)) {
        try {
            fetch_db_file(options_.model_server, e.spec.kepler_db, watched);
            log.push_back(fmt::format("model {}: fetched {}", e.spec.name, watched.string()));
        } catch (const std::exception& error) {
            if (!e.model) e.state = e.report.reason = fmt::format("fetching the model DB failed: {}", error.what());
            log.push_back(fmt::format("model {}: {}", e.spec.name, e.state));
            return;
        }
    }
    const std::string print = file_stamp(watched);
    if (print.empty()) {
        if (!e.model) e.state = e.report.reason = fmt::format("waiting for {}", watched.string());
        return;
    }
    if (print == e.fingerprint) return;
    e.fingerprint = print;
    try {
        CpuMatch match = CpuMatch::any;
        const auto file = kepler_file(e.spec, options_.model_server, e.state, match);
        if (!file) {
            e.report.reason = e.state;
            log.push_back(fmt::format("model {}: {}", e.spec.name, e.state));
            return;
        }
        auto fresh = std::make_unique<KeplerModel>(e.spec.name, file->first, options_.xgboost_threads, file->second);
        fresh->set_cpu_match(match);
        install(e, std::move(fresh));
        log.push_back(fmt::format("model {}: loaded ({})", e.spec.name, file->second));
    } catch (const std::runtime_error& error) {  // ModelError, or a failed download
        ++e.report.load_errors;
        if (!e.model) e.state = e.report.reason = fmt::format("bad model file: {}", error.what());
        log.push_back(fmt::format("model {}: rejected ({})", e.spec.name, error.what()));
    }
}

std::vector<std::string> ModelSet::refresh() {
    std::vector<std::string> log;
    for (auto& e : entries_) {
        if (e->spec.kind == ModelSpec::Kind::kepler || e->spec.kind == ModelSpec::Kind::kepler_db) refresh_kepler(*e, log);
        if (e->spec.kind != ModelSpec::Kind::xgboost) continue;
        const std::string print = model_fingerprint(e->spec.path);
        if (print.empty() || print == e->fingerprint) continue;  // still missing, or nothing changed
        if (print.find(":missing;") != std::string::npos) {
            // Metadata is there but a booster is not (yet): a model being copied in, not a bad one.
            if (!e->model) e->state = e->report.reason = fmt::format("waiting for the boosters named in {}", metadata_path(e->spec.path).string());
            continue;
        }
        e->fingerprint = print;
        try {
            auto fresh = std::make_unique<XgboostModel>(e->spec.name, e->spec.path, options_.xgboost_threads, e->spec.sha256);
            const bool reload = e->model != nullptr;
            install(*e, std::move(fresh));
            log.push_back(fmt::format("model {}: {} {}", e->spec.name, reload ? "reloaded" : "loaded", e->spec.path.string()));
        } catch (const ModelError& error) {
            ++e->report.load_errors;
            if (!e->model) e->state = e->report.reason = fmt::format("bad model file: {}", error.what());
            log.push_back(fmt::format("model {}: rejected ({}){}", e->spec.name, error.what(),
                                      e->model ? "; the previous version keeps running" : ""));
        }
    }
    return log;
}

std::vector<WatchedModel> ModelSet::watched_models() const {
    std::vector<WatchedModel> out;
    for (const ModelSpec& s : specs_) {
        if (s.kind == ModelSpec::Kind::xgboost) out.push_back(WatchedModel{s.path, s.sha256});
    }
    return out;
}

int ModelSet::rank(const Entry& e, const NodeFacts& node) const {
    switch (e.spec.kind) {
        case ModelSpec::Kind::measured: return 0;
        case ModelSpec::Kind::xgboost:
        case ModelSpec::Kind::kepler:
        case ModelSpec::Kind::kepler_db: return 1 + static_cast<int>(e.model->cpu_match(node));
        case ModelSpec::Kind::external: return 5;
        case ModelSpec::Kind::curve: return 10;
    }
    return 20;
}

namespace {
std::map<ZoneKind, uint64_t> totals_by_kind(const NodeEnergy& energy) {
    std::map<ZoneKind, uint64_t> out;
    for (const ZoneEnergy& z : energy.zones) out[z.zone.kind] += z.total_uj;
    return out;
}
}  // namespace

void ModelSet::track_error(Entry& e, const MeterTotals& meter, const NodeEnergy& predicted, double seconds) {
    std::map<ZoneKind, uint64_t> model;
    for (const ZoneEnergy& z : predicted.zones) model[z.zone.kind] += z.total_uj;
    for (const auto& [kind, uj] : model) {
        auto it = meter.find(kind);
        if (it == meter.end()) continue;
        const double error_uj = std::fabs(static_cast<double>(uj) - static_cast<double>(it->second));
        e.report.abs_error_w[kind] = error_uj / 1e6 / seconds;
        if (it->second == 0) continue;  // no percentage error against 0 W
        std::deque<double>& window = e.ape[kind];
        window.push_back(error_uj / static_cast<double>(it->second));
        while (window.size() > options_.mape_window) window.pop_front();
        e.report.mape[kind] = std::accumulate(window.begin(), window.end(), 0.0) / static_cast<double>(window.size());
    }
}

std::optional<NodeEnergy> ModelSet::ask(Entry& e, const FrameInput& in) {
    e.answered = false;
    e.refused.reset();
    if (!e.model) return std::nullopt;
    e.refused = e.model->refusal(in.node);
    if (e.refused) return std::nullopt;
    std::optional<NodeEnergy> answer;
    try {
        answer = e.model->estimate(in);
    } catch (const std::exception& error) {
        ++e.report.estimate_errors;
        e.state = fmt::format("prediction failed: {}", error.what());
        return std::nullopt;
    }
    take_late_answers(e);  // earlier frames first (models answering from another process)
    if (!answer) return std::nullopt;
    e.answered = true;
    e.state.clear();
    e.report.watts.clear();
    for (const ZoneEnergy& z : answer->zones) {
        e.report.energy_uj[z.zone.kind] += z.total_uj;
        e.report.watts[z.zone.kind] += static_cast<double>(z.total_uj) / 1e6 / in.features.interval_s;
    }
    e.report.outside_training_range = e.model->outside_training_range();
    if (std::any_of(e.report.outside_training_range.begin(), e.report.outside_training_range.end(),
                    [](const auto& feature) { return feature.second; })) {
        ++e.report.extrapolated_frames;
    }
    return answer;
}

void ModelSet::score_against_meter(const std::vector<std::optional<NodeEnergy>>& answers, size_t meter,
                                   const FrameInput& in) {
    const MeterTotals measured = totals_by_kind(*answers[meter]);
    for (size_t i = 0; i < entries_.size(); ++i) {
        if (i != meter && answers[i]) track_error(*entries_[i], measured, *answers[i], in.features.interval_s);
    }
    recent_meter_.emplace_back(FrameId{in.frame.generation(), in.frame.sequence()}, measured);
    while (recent_meter_.size() > options_.external_window + 1) recent_meter_.pop_front();
}

ModelSet::Choice ModelSet::choose(const std::vector<std::optional<NodeEnergy>>& answers, const NodeFacts& node) const {
    Choice choice;
    std::string primary_note;
    for (size_t i = 0; i < entries_.size(); ++i) {
        if (!primary_ || entries_[i]->spec.name != *primary_) continue;
        if (answers[i]) return Choice{i, "primary (--primary)"};
        primary_note = fmt::format("; primary {} gave no answer", *primary_);
    }
    // A meter of GPUs alone is no meter of the node: a model answers for the CPU side where one can.
    const bool cpu_answer = std::any_of(answers.begin(), answers.end(), [](const auto& a) { return a && has_cpu_side(*a); });
    for (size_t i = 0; i < entries_.size(); ++i) {
        if (!answers[i] || (cpu_answer && !has_cpu_side(*answers[i]))) continue;
        if (!choice.index || rank(*entries_[i], node) < rank(*entries_[*choice.index], node)) choice.index = i;
    }
    if (!choice.index) return choice;
    const Entry& c = *entries_[*choice.index];
    if (c.spec.kind == ModelSpec::Kind::measured) choice.why = "measured power";
    else if (c.spec.kind == ModelSpec::Kind::external) choice.why = "no meter and no eligible XGBoost model; external model answered";
    else if (c.spec.kind == ModelSpec::Kind::kepler || c.spec.kind == ModelSpec::Kind::kepler_db)
        choice.why = fmt::format("no meter; {}", static_cast<const KeplerModel&>(*c.model).note());
    else if (c.spec.kind == ModelSpec::Kind::xgboost) choice.why = fmt::format("no meter; best model for this cpu ({})", to_string(c.model->cpu_match(node)));
    else choice.why = "fallback: no meter and no eligible trained model";
    const bool gpu_meter = std::any_of(answers.begin(), answers.end(), [](const auto& a) { return a && !has_cpu_side(*a); });
    if (gpu_meter && c.spec.kind != ModelSpec::Kind::measured) choice.why += "; GPUs measured (the meter has no CPU side)";
    choice.why += primary_note;
    return choice;
}

void ModelSet::note_reasons(const std::vector<std::optional<NodeEnergy>>& answers, const Choice& choice) {
    for (size_t i = 0; i < entries_.size(); ++i) {
        Entry& e = *entries_[i];
        e.report.selected = choice.index == i;
        if (choice.index == i) e.report.reason = choice.why;
        else if (!e.state.empty()) e.report.reason = e.state;
        else if (e.refused) e.report.reason = "refused: " + *e.refused;
        else if (!answers[i]) e.report.reason = e.model->no_answer_reason();
        else e.report.reason = fmt::format("standby: {} is preferred", choice.index ? entries_[*choice.index]->spec.name : "none");
    }
}

ModelSetResult ModelSet::estimate(const FrameInput& in) {
    std::vector<std::optional<NodeEnergy>> answers(entries_.size());
    std::optional<size_t> meter;
    for (size_t i = 0; i < entries_.size(); ++i) {
        answers[i] = ask(*entries_[i], in);
        if (answers[i] && entries_[i]->spec.kind == ModelSpec::Kind::measured && !meter) meter = i;
    }
    if (meter) score_against_meter(answers, *meter, in);
    const Choice choice = choose(answers, in.node);
    note_reasons(answers, choice);

    ModelSetResult result;
    if (choice.index) {
        result.primary = answers[*choice.index];  // the one answer needed twice
        result.primary_name = entries_[*choice.index]->spec.name;
        if (meter && *choice.index != *meter) add_measured_gpus(*result.primary, *answers[*meter]);
    }
    for (size_t i = 0; i < entries_.size(); ++i) {
        if (!answers[i]) continue;
        result.answers.push_back(ModelAnswer{entries_[i]->spec.name, entries_[i]->version, std::move(*answers[i])});
    }
    return result;
}

void ModelSet::take_late_answers(Entry& e) {
    // Answers for frames estimated earlier: they count for the model's energy, power and error against
    // that frame's meter reading, never for attribution (that frame is done).
    for (LateEnergy& late : e.model->take_late_answers()) {
        e.report.watts.clear();
        for (const ZoneEnergy& z : late.energy.zones) {
            e.report.energy_uj[z.zone.kind] += z.total_uj;
            e.report.watts[z.zone.kind] += static_cast<double>(z.total_uj) / 1e6 / late.interval_s;
        }
        for (const auto& [frame, meter] : recent_meter_) {
            if (frame == late.frame) track_error(e, meter, late.energy, late.interval_s);
        }
    }
}

std::vector<ModelReport> ModelSet::reports() const {
    std::vector<ModelReport> out;
    for (const auto& e : entries_) {
        out.push_back(e->report);
        if (e->model) out.back().external = e->model->external_report();
    }
    return out;
}

std::vector<std::string> ModelSet::take_messages() {
    std::vector<std::string> out;
    for (auto& e : entries_) {
        if (!e->model) continue;
        for (std::string& line : e->model->take_messages()) out.push_back(std::move(line));
    }
    return out;
}

}  // namespace kepler::estimate
