// Recorder: appends frames to a recording file in the protocol's own bytes (format in keplershm_layout.h).
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "clock.hpp"
#include "error.hpp"
#include "reader_impl.hpp"
#include "recording.hpp"
#include "seqlock.hpp"

namespace keplershm {

using namespace detail;

class RecorderImpl {
public:
    RecorderImpl(const std::string& path, const RecorderOptions& options) : path_(path), options_(options) {
        fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0640);
        if (fd_ < 0) fail(error_from_errno(errno), "cannot create recording '{}': {}", path, std::strerror(errno));
        keplershm_recording_header header{};
        header.magic = KEPLERSHM_RECORDING_MAGIC;
        header.abi_major = KEPLERSHM_ABI_MAJOR;
        header.abi_minor = KEPLERSHM_ABI_MINOR;
        header.header_size = sizeof header;
        header.created_realtime_ns = realtime_ns();
        write_all(&header, sizeof header);
        whole_bytes_ = bytes_;
    }

    ~RecorderImpl() {
        try {
            close();
        } catch (const Error&) {
            // Destructors must not throw; close() explicitly to see the error.
        }
    }

    void append(ReaderImpl& reader, const keplershm_view& view) {
        if (fd_ < 0) fail(KEPLERSHM_E_STATE, "recording '{}' is closed", path_);
        if (!stopped_because_.empty()) fail(KEPLERSHM_E_STATE, "recording '{}' takes no more frames: {}", path_, stopped_because_);
        const Layout* layout = reader.layout_for(view);
        if (layout == nullptr) fail(KEPLERSHM_E_INVALID_ARGUMENT, "the view was not read by this reader");
        if (view.frame_size > layout->max_frame_size) fail(KEPLERSHM_E_INVALID_ARGUMENT, "the view's frame_size {} exceeds its slot", view.frame_size);
        frame_.resize(packed_frame_capacity(*layout, view.frame_size));
        size_t packed = 0;
        {
            RacyReads racy;  // in-place views are validated right below
            packed = pack_frame(view, *layout, frame_.data(), frame_.size());
        }
        if (view.in_place && !reader.validate(view)) fail(KEPLERSHM_E_LAPPED, "frame {} was overwritten while it was stored", view.sequence);
        if (packed == 0) fail(KEPLERSHM_E_CORRUPT, "frame {} has overlapping sections", view.sequence);
        if (layout->header.generation != generation_ || !has_segment_) {
            segment_record(*layout);
            generation_ = layout->header.generation;
            has_segment_ = true;
        }
        record(KEPLERSHM_RECORDING_FRAME, view.sequence, frame_.data(), packed);
        ++frames_;
        if (options_.fsync_every != 0 && frames_ % options_.fsync_every == 0) ::fdatasync(fd_);
    }

    uint64_t follow(ReaderImpl& reader, std::chrono::milliseconds duration) {
        const uint64_t start = monotonic_ns();
        const uint64_t limit = static_cast<uint64_t>(std::chrono::nanoseconds(duration).count());
        uint64_t appended = 0;
        keplershm_view view{};
        view.sz = sizeof view;
        for (;;) {
            const uint64_t elapsed = monotonic_ns() - start;
            if (limit != 0 && elapsed >= limit) return appended;
            const auto slice = std::chrono::milliseconds(limit == 0 ? 100 : std::min<uint64_t>(100, (limit - elapsed) / 1'000'000 + 1));
            const Status status = reader.next(slice, view);
            if (status == Status::timeout) continue;
            if (status != Status::ok) return appended;  // writer gone for good, or end of a recording
            append(reader, view);
            ++appended;
        }
    }

    void close() {
        if (fd_ < 0) return;
        const int fd = fd_;
        fd_ = -1;
        const bool synced = ::fsync(fd) == 0;
        const int err = errno;
        ::close(fd);
        if (!synced) fail(error_from_errno(err), "cannot flush recording '{}': {}", path_, std::strerror(err));
    }

    uint64_t frames() const { return frames_; }
    uint64_t bytes() const { return bytes_; }

private:
    void segment_record(const Layout& layout) {
        // The header as the reader validated it, with the schema placed right after it.
        keplershm_header header = layout.header;
        header.schema_offset = header.header_size = sizeof header;
        header.schema_entry_size = sizeof(keplershm_field);
        header.schema_count = static_cast<uint32_t>(layout.schema.size());
        std::vector<uint8_t> payload(sizeof header + layout.schema.size() * sizeof(keplershm_field));
        std::memcpy(payload.data(), &header, sizeof header);
        std::memcpy(payload.data() + sizeof header, layout.schema.data(), layout.schema.size() * sizeof(keplershm_field));
        record(KEPLERSHM_RECORDING_SEGMENT, header.generation, payload.data(), payload.size());
    }

    void record(uint32_t type, uint64_t sequence, const void* payload, size_t length) {
        const uint64_t padded = align_up(length, 8);
        const uint64_t total = sizeof(keplershm_record_header) + padded;
        if (options_.max_bytes != 0 && bytes_ + total > options_.max_bytes) {
            fail(KEPLERSHM_E_NO_SPACE, "recording '{}' reached its cap of {} bytes", path_, options_.max_bytes);
        }
        keplershm_record_header header{type, crc32(payload, length), length, sequence};
        try {
            write_all(&header, sizeof header);
            write_all(payload, length);
            static const uint8_t zeros[8] = {};
            write_all(zeros, padded - length);
        } catch (const Error& e) {
            cut_back_after(e);
        }
        whole_bytes_ = bytes_;
    }

    /// A record that could not be written whole (a full disk, a file size limit) is cut off again, so that
    /// the file ends with its last whole record and reads back in full; the recorder then takes no more.
    [[noreturn]] void cut_back_after(const Error& e) {
        const bool cut = ::ftruncate(fd_, static_cast<off_t>(whole_bytes_)) == 0 &&
                         ::lseek(fd_, static_cast<off_t>(whole_bytes_), SEEK_SET) >= 0;
        bytes_ = whole_bytes_;
        stopped_because_ = e.code() == KEPLERSHM_E_NO_SPACE ? "the disk is full" : "a write failed";
        fail(e.code(), "{}; {} (frames up to the last whole one, {} bytes, stay readable)", e.what(),
             cut ? "the partial record was cut off" : "the partial record could not be cut off", whole_bytes_);
    }

    void write_all(const void* data, size_t size) {
        const auto* p = static_cast<const uint8_t*>(data);
        while (size > 0) {
            const ssize_t n = ::write(fd_, p, size);
            if (n < 0 && errno == EINTR) continue;
            if (n < 0) fail(error_from_errno(errno), "cannot write recording '{}': {}", path_, std::strerror(errno));
            p += n;
            size -= static_cast<size_t>(n);
            bytes_ += static_cast<uint64_t>(n);
        }
    }

    std::string path_;
    RecorderOptions options_;
    int fd_ = -1;
    uint64_t generation_ = 0;
    bool has_segment_ = false;
    uint64_t frames_ = 0;
    uint64_t bytes_ = 0;
    uint64_t whole_bytes_ = 0;    // the file's length after its last whole record (or the file header)
    std::string stopped_because_;  // set after a failed write: appends are refused from then on
    std::vector<uint8_t> frame_;
};

Recorder::Recorder(const std::string& path, const RecorderOptions& options)
    : impl_(std::make_unique<RecorderImpl>(path, options)) {}
Recorder::Recorder(Recorder&&) noexcept = default;
Recorder& Recorder::operator=(Recorder&&) noexcept = default;
Recorder::~Recorder() = default;
void Recorder::append(Reader& reader, const FrameView& view) { impl_->append(reader.impl(), view.raw()); }
uint64_t Recorder::follow(Reader& reader, std::chrono::milliseconds duration) { return impl_->follow(reader.impl(), duration); }
uint64_t Recorder::frames_written() const { return impl_->frames(); }
uint64_t Recorder::bytes_written() const { return impl_->bytes(); }
void Recorder::close() { impl_->close(); }

}  // namespace keplershm
