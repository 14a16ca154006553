#include "support/feed_fixture.hpp"

#include <cstring>
#include <filesystem>

#include <fmt/format.h>

#include "keplershm/keplershm.hpp"
#include "select/selection.hpp"

namespace feed_test {

std::unique_ptr<Daemon> start_collector(const e2e::TempDir& tmp, const std::string& name, const std::string& interval,
                                            const std::string& log, const std::vector<std::string>& extra) {
    // --sysfs-root at an empty directory: no power meter, whatever the host has (no dependence on host state).
    std::filesystem::create_directories(tmp / "sysfs");
    std::vector<std::string> args{COLLECT_BINARY, "--shm-name", name, "--source", "procfs", "--kube", "off", "--interval",
                                  interval, "--slots", "64", "--process-capacity", "2048", "--workload-capacity", "256",
                                  "--sysfs-root", (tmp / "sysfs").string()};
    args.insert(args.end(), extra.begin(), extra.end());
    return std::make_unique<Daemon>(std::move(args), tmp / log);
}

Feed::Feed(const e2e::TempDir& tmp, const std::string& name, std::vector<std::string> extra, const std::string& log) {
    const std::filesystem::path port_file = tmp / (log + ".port");
    std::filesystem::remove(port_file);
    std::vector<std::string> argv{FEED_BINARY, "--shm-name", name, "--listen", "127.0.0.1:0", "--port-file", port_file.string()};
    argv.insert(argv.end(), extra.begin(), extra.end());
    child_ = std::make_unique<Daemon>(argv, tmp / log);
    e2e::wait_until([&] { return std::filesystem::exists(port_file) || !child_->running(); }, kDeadline);
    if (std::filesystem::exists(port_file)) port_ = std::stoi(e2e::read_file(port_file));
}

std::unique_ptr<v1::Feed::Stub> connect(const std::string& target, std::shared_ptr<grpc::ChannelCredentials> credentials) {
    return v1::Feed::NewStub(grpc::CreateChannel(target, credentials));
}

namespace {
void add_token(grpc::ClientContext& context, const std::string& token) {
    if (!token.empty()) context.AddMetadata("authorization", "Bearer " + token);
}
}  // namespace

grpc::Status describe(v1::Feed::Stub& stub, v1::Description& out, const std::string& token) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + kDeadline);
    add_token(context, token);
    return stub.Describe(&context, v1::DescribeRequest{}, &out);
}

bool wait_for_frames(v1::Feed::Stub& stub, std::chrono::seconds timeout) {
    return e2e::wait_until([&] {
        v1::Description d;
        return describe(stub, d).ok() && d.stats().frames_read() > 0;
    }, timeout, 50ms);
}

Stream subscribe(v1::Feed::Stub& stub, const v1::SubscribeRequest& request, std::chrono::seconds deadline,
                 const std::string& token) {
    Stream stream;
    stream.context = std::make_unique<grpc::ClientContext>();
    stream.context->set_deadline(std::chrono::system_clock::now() + deadline);
    add_token(*stream.context, token);
    stream.reader = stub.Subscribe(stream.context.get(), request);
    return stream;
}

grpc::Status refused(v1::Feed::Stub& stub, const v1::SubscribeRequest& request, const std::string& token) {
    Stream stream = subscribe(stub, request, kDeadline, token);
    v1::Frame frame;
    while (stream.read(frame)) {
        stream.context->TryCancel();  // accepted after all: the caller's expectation fails on the status
    }
    return stream.finish();
}

v1::SubscribeRequest request_for(const std::vector<std::string>& sections) {
    v1::SubscribeRequest request;
    for (const std::string& text : sections) {
        v1::SectionSelection* section = request.add_sections();
        const size_t colon = text.find(':');
        section->set_name(text.substr(0, colon));
        if (colon == std::string::npos) continue;
        for (size_t at = colon + 1; at <= text.size();) {
            const size_t comma = std::min(text.find(',', at), text.size());
            section->add_fields(text.substr(at, comma - at));
            at = comma + 1;
        }
    }
    return request;
}

const v1::Section* find_section(const v1::Frame& frame, const std::string& name) {
    for (const v1::Section& s : frame.sections())
        if (s.name() == name) return &s;
    return nullptr;
}

const v1::Column* find_column(const v1::Section& section, const std::string& name) {
    for (const v1::Column& c : section.columns())
        if (c.name() == name) return &c;
    return nullptr;
}

LocalReader::LocalReader(const std::string& name) { keplershm_reader_open(name.c_str(), nullptr, &reader); }
LocalReader::~LocalReader() {
    if (reader != nullptr) keplershm_reader_close(reader);
}

namespace {

/// Value `i` of `row` in `column` against the local record's bytes; "" when equal.
std::string compare_value(const v1::Column& column, const keplershm_field& field, uint32_t row, uint32_t i,
                          const uint8_t* record) {
    const size_t k = static_cast<size_t>(row) * column.width() + i;
    const uint8_t* at = record + field.offset;
    const auto differ = [&](auto remote, auto local) {
        return remote == local ? std::string() : fmt::format("field {} row {}[{}]: remote {} local {}", field.name, row, i, remote, local);
    };
    switch (field.type) {
        case KEPLERSHM_TYPE_U32: {
            uint32_t v;
            std::memcpy(&v, at + 4 * i, 4);
            return k < static_cast<size_t>(column.u32_size()) ? differ(column.u32(static_cast<int>(k)), v) : "short column";
        }
        case KEPLERSHM_TYPE_U64: {
            uint64_t v;
            std::memcpy(&v, at + 8 * i, 8);
            return k < static_cast<size_t>(column.u64_size()) ? differ(column.u64(static_cast<int>(k)), v) : "short column";
        }
        case KEPLERSHM_TYPE_F64: {
            double v;
            std::memcpy(&v, at + 8 * i, 8);
            return k < static_cast<size_t>(column.f64_size()) ? differ(column.f64(static_cast<int>(k)), v) : "short column";
        }
        default: {
            const std::string v(reinterpret_cast<const char*>(at), strnlen(reinterpret_cast<const char*>(at), field.count));
            return k < static_cast<size_t>(column.text_size()) ? differ(column.text(static_cast<int>(k)), v) : "short column";
        }
    }
}

}  // namespace

std::string compare_section(const v1::Section& section, keplershm_reader* reader, const keplershm_view& view) {
    const void* records = nullptr;
    uint32_t count = 0, stride = 0;
    keplershm_view_section(&view, section.id(), &records, &count, &stride);
    if (section.rows() != count) return fmt::format("section {}: {} rows remote, {} local", section.name(), section.rows(), count);
    const auto* base = static_cast<const uint8_t*>(records);
    uint32_t record_type = 0;
    for (const auto& kind : kepler::feed::section_kinds())
        if (kind.id == section.id()) record_type = kind.record_type;
    if (record_type == 0) {
        return section.data() == std::string(reinterpret_cast<const char*>(base), count) ? "" : "strings differ";
    }
    uint32_t fields = 0;
    keplershm_view_schema(reader, &view, nullptr, 0, &fields);
    std::vector<keplershm_field> schema(fields);
    keplershm_view_schema(reader, &view, schema.data(), fields, &fields);
    for (const keplershm_field& field : schema) {
        if (field.record_type != record_type) continue;
        const v1::Column* column = find_column(section, std::string(keplershm::get_text(field.name)));
        if (column == nullptr) return fmt::format("section {}: no column {}", section.name(), field.name);
        const uint32_t width = field.type == KEPLERSHM_TYPE_CHAR ? 1 : field.count;
        for (uint32_t row = 0; row < count; ++row)
            for (uint32_t i = 0; i < width; ++i)
                if (std::string d = compare_value(*column, field, row, i, base + static_cast<size_t>(row) * stride); !d.empty())
                    return fmt::format("section {}: {}", section.name(), d);
    }
    return "";
}

}  // namespace feed_test
