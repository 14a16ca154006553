// Reading frames: in place with validation, by copy, and as a stream that follows the writer across
// restarts. The mapping is untrusted: everything is checked against the reader's own layout snapshot.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstring>
#include <thread>

#include "clock.hpp"
#include "error.hpp"
#include "futex.hpp"
#include "reader_impl.hpp"
#include "seqlock.hpp"

namespace keplershm {

using namespace detail;
using std::chrono::milliseconds;
using std::chrono::nanoseconds;

namespace {
constexpr size_t kKeptAttachments = 4;  // in-place views survive this many re-attaches
}  // namespace

std::unique_ptr<ReaderImpl> ReaderImpl::open_live(const std::string& name, const ReaderOptions& options) {
    validate_segment_name(name);
    std::unique_ptr<ReaderImpl> r(new ReaderImpl());
    r->name_ = name;
    r->options_ = options;
    r->attach(MappedSegment::open_read_only(name));
    return r;
}

std::unique_ptr<ReaderImpl> ReaderImpl::open_recording(const std::string& path, const ReaderOptions& options) {
    std::unique_ptr<ReaderImpl> r(new ReaderImpl());
    r->name_ = path;
    r->options_ = options;
    r->recording_ = std::make_unique<RecordingFile>(path);
    if (r->recording_->first_layout() == nullptr && !r->recording_->truncated()) {
        fail(KEPLERSHM_E_CORRUPT, "recording '{}' holds no segment record", path);
    }
    return r;
}

void ReaderImpl::attach(MappedSegment segment) {
    check_owner(segment);
    Layout layout = read_segment_layout(segment);
    if (layout.header.segment_kind != KEPLERSHM_SEGMENT_FRAMES && layout.header.segment_kind != KEPLERSHM_SEGMENT_ESTIMATES) {
        fail(KEPLERSHM_E_CORRUPT, "segment '{}' has unknown kind {}", name_, layout.header.segment_kind);
    }
    if (layout.max_frame_size > options_.max_frame_bytes) {
        fail(KEPLERSHM_E_NO_MEMORY, "segment '{}' has slots for frames of up to {} bytes, more than this reader's cap of "
             "{} bytes (raise it where a node needs larger frames)", name_, layout.max_frame_size, options_.max_frame_bytes);
    }
    // Another user who owns the segment can shrink it (root and we ourselves are trusted not to).
    const bool foreign = segment.owner() != 0 && segment.owner() != ::geteuid();
    const bool by_copy = layout.header.segment_kind == KEPLERSHM_SEGMENT_ESTIMATES || foreign;
    attachments_.push_back(Attachment{std::move(segment), std::move(layout), by_copy});
    if (attachments_.size() > kKeptAttachments) attachments_.pop_front();
    // A new generation is watched afresh: a dead one (a crashed writer's, a copied image) is stale one
    // timeout from now, whatever its heartbeat says about clocks we do not share.
    watch_.start(read_heartbeat(live_header()), monotonic_ns());
}

bool ReaderImpl::trusted_owner(uid_t owner) const {
    if (options_.any_owner || owner == 0) return true;
    return options_.segment_owner ? owner == *options_.segment_owner : owner == ::geteuid();
}

void ReaderImpl::check_owner(const MappedSegment& segment) const {
    // Before a byte is read: whoever can write the segment decides what this reader believes.
    if (options_.any_owner) return;
    if ((segment.mode() & S_IWOTH) != 0) {
        fail(KEPLERSHM_E_PERMISSION, "segment '{}' is world-writable (mode {:04o}): anyone could plant frames in it; "
             "refused", name_, segment.mode());
    }
    if (!trusted_owner(segment.owner())) {
        fail(KEPLERSHM_E_PERMISSION, "segment '{}' is owned by uid {}, not by root or {} {}; refused (name the owner "
             "to accept it)", name_, segment.owner(), options_.segment_owner ? "the expected uid" : "this process's uid",
             options_.segment_owner ? *options_.segment_owner : ::geteuid());
    }
}

const keplershm_header& ReaderImpl::live_header() const {
    const Attachment& a = current();
    if (!a.by_copy) return *reinterpret_cast<const keplershm_header*>(a.segment.data());
    if (a.segment.read_at(0, &runtime_copy_, sizeof runtime_copy_) != sizeof runtime_copy_) {
        fail(KEPLERSHM_E_CORRUPT, "segment '{}' shrank below its header under the reader", name_);
    }
    // SYNC POINT (partner: the writer's release stores of latest_sequence in announce() and of the state
    // in close()/mark_replaced()). The kernel's copy above stands for those acquire loads: this fence
    // keeps every later read (slot words, frames) after it.
    std::atomic_thread_fence(std::memory_order_acquire);
    return runtime_copy_;
}

const uint8_t* ReaderImpl::slot_address(const Attachment& a, uint64_t sequence) const {
    return a.segment.data() + slot_offset(a, sequence);
}

uint64_t ReaderImpl::slot_offset(const Attachment& a, uint64_t sequence) const {
    const Layout& l = a.layout;
    return l.slots_offset + (sequence % l.slot_count) * l.slot_size;
}

uint64_t ReaderImpl::load_slot_word(const Attachment& a, uint64_t sequence) const {
    if (!a.by_copy) return seq_load(reinterpret_cast<const keplershm_slot_control*>(slot_address(a, sequence))->sequence);
    uint64_t word = 0;
    if (a.segment.read_at(slot_offset(a, sequence), &word, sizeof word) != sizeof word) {
        fail(KEPLERSHM_E_CORRUPT, "segment '{}' shrank below slot {} under the reader", name_, sequence % a.layout.slot_count);
    }
    // SYNC POINT (partner: the release store in seq_publish), as seq_load: the payload reads that follow
    // stay after the word. pread may copy the word in pieces; a word pieced from two values can only
    // equal PUBLISHED(n) if its last piece, read after the publish, completed it.
    std::atomic_thread_fence(std::memory_order_acquire);
    return word;
}

bool ReaderImpl::slot_unchanged(const Attachment& a, uint64_t sequence, uint64_t expected) const {
    if (!a.by_copy) {
        return seq_recheck(reinterpret_cast<const keplershm_slot_control*>(slot_address(a, sequence))->sequence, expected);
    }
    // SYNC POINT (partner: the release fence in seq_begin_write), as seq_recheck: the payload copied
    // above stays before the reload; each piece of the reload is read after it, so a payload byte of a
    // newer frame means a reload that differs.
    std::atomic_thread_fence(std::memory_order_acquire);
    uint64_t word = 0;
    return a.segment.read_at(slot_offset(a, sequence), &word, sizeof word) == sizeof word && word == expected;
}

int ReaderImpl::parse_slot(const Attachment& a, uint64_t sequence, keplershm_view& view) {
    const uint64_t frame_at = slot_offset(a, sequence) + KEPLERSHM_SLOT_CONTROL_SIZE;
    if (!a.by_copy) return parse_frame(a.segment.data() + frame_at, a.layout.max_frame_size, a.layout, view);
    // The frame header says how much to copy; parse_frame checks the size again, on the copy.
    keplershm_frame header{};
    const bool whole_header = a.segment.read_at(frame_at, &header, sizeof header) == sizeof header;
    const uint64_t wanted = std::min<uint64_t>(header.frame_size, a.layout.max_frame_size);
    staging_.resize(wanted / sizeof(uint64_t) + 1);
    auto* bytes = reinterpret_cast<uint8_t*>(staging_.data());
    if (!whole_header || a.segment.read_at(frame_at, bytes, wanted) != wanted) {
        fail(KEPLERSHM_E_CORRUPT, "segment '{}' shrank below frame {} under the reader", name_, sequence);
    }
    return parse_frame(bytes, wanted, a.layout, view);
}

nanoseconds ReaderImpl::heartbeat_timeout() const {
    if (options_.heartbeat_timeout.count() > 0) return options_.heartbeat_timeout;
    return nanoseconds(default_heartbeat_timeout_ns(current().layout.header.heartbeat_period_ns));
}

uint64_t ReaderImpl::watch_heartbeat() {
    const uint64_t now = monotonic_ns();
    watch_.observe(read_heartbeat(live_header()), now);
    return now;
}

bool ReaderImpl::writer_gone() {
    // SYNC POINT (partner: the writer's release store of RETIRED in close() and of REPLACED in
    // mark_replaced()): acquire, so that a reader that sees the loss also sees every frame before it.
    const uint32_t state = atomic_word(live_header().state).load(std::memory_order_acquire);
    if (state == KEPLERSHM_STATE_RETIRED || state == KEPLERSHM_STATE_REPLACED) return true;
    const uint64_t now = watch_heartbeat();
    return watch_.stale(now, static_cast<uint64_t>(heartbeat_timeout().count()));
}

uint64_t ReaderImpl::latest() {
    if (recording_) return recording_->frame_count();
    // Acquire: pairs with the writer's release store in announce(); frames up to this number are published.
    return atomic_word(live_header().latest_sequence).load(std::memory_order_acquire);
}

uint64_t ReaderImpl::oldest_readable() {
    // The ring holds the last slot_count frames, one fewer while the writer rewrites the slot after
    // `latest` (which held latest + 1 - slot_count). A hint: callers re-check the slot itself.
    const uint64_t newest = latest();
    const uint64_t slots = current().layout.slot_count;
    const uint64_t first = std::max<uint64_t>(current().layout.header.first_sequence, 1);
    const SlotState after = decode(load_slot_word(current(), newest + 1));
    const uint64_t kept = !after.published && after.frame == newest + 1 ? slots - 1 : slots;
    return std::max<uint64_t>(first, newest + 1 > kept ? newest + 1 - kept : 1);
}

Status ReaderImpl::classify(uint64_t slot_word, uint64_t sequence, keplershm_view& view) {
    const SlotState s = decode(slot_word);
    if (s.empty || s.frame <= sequence) return Status::not_yet;  // older frame, or frame n being written
    const uint64_t oldest = oldest_readable();
    view.missed = oldest > sequence ? oldest - sequence : 1;
    return Status::lapped;
}

Status ReaderImpl::acquire(uint64_t sequence, keplershm_view& view) {
    if (recording_) {
        const int rc = recording_->read(sequence, view);
        if (rc == KEPLERSHM_E_NOT_YET) return Status::not_yet;
        if (rc != KEPLERSHM_OK) fail(rc, "{}: {}", name_, last_error());
        return Status::ok;
    }
    const Attachment& a = current();
    const uint64_t seen = load_slot_word(a, sequence);
    if (seen != KEPLERSHM_SEQ_PUBLISHED(sequence)) return classify(seen, sequence, view);
    int rc = KEPLERSHM_OK;
    {
        RacyReads racy;  // validated by slot_unchanged below
        rc = parse_slot(a, sequence, view);
    }
    if (!slot_unchanged(a, sequence, seen)) return classify(load_slot_word(a, sequence), sequence, view);
    if (rc != KEPLERSHM_OK) fail(rc, "segment '{}', frame {}: {}", name_, sequence, last_error());
    if (view.sequence != sequence || view.generation != a.layout.header.generation) {
        fail(KEPLERSHM_E_CORRUPT, "segment '{}': slot for frame {} holds frame {} of generation {:#x}", name_, sequence,
             view.sequence, view.generation);
    }
    view.segment = &a.layout.header;
    view.in_place = a.by_copy ? 0 : 1;  // by_copy: the frame is in staging_, a private copy
    view.missed = 0;
    return Status::ok;
}

bool ReaderImpl::validate(const keplershm_view& view) {
    if (recording_ || !view.in_place) return true;  // files and private copies do not change
    for (const Attachment& a : attachments_) {
        if (view.segment != &a.layout.header) continue;
        // Recompute the slot from the sequence rather than trusting the view's pointers.
        const uint8_t* slot = slot_address(a, view.sequence);
        if (view.base != slot + KEPLERSHM_SLOT_CONTROL_SIZE) return false;
        return seq_recheck(reinterpret_cast<const keplershm_slot_control*>(slot)->sequence,
                           KEPLERSHM_SEQ_PUBLISHED(view.sequence));
    }
    return false;  // a generation this reader no longer maps
}

Status ReaderImpl::copy(uint64_t sequence, keplershm_view& view) {
    if (recording_) return acquire(sequence, view);  // the file mapping is already a stable copy
    keplershm_view racy{};
    racy.sz = sizeof racy;
    const Status status = acquire(sequence, racy);
    if (status != Status::ok) {
        view.missed = racy.missed;
        return status;
    }
    const Attachment& a = current();
    // Grown to the frame at hand (bounded by the slot, itself under options_.max_frame_bytes).
    const size_t capacity = packed_frame_capacity(a.layout, racy.frame_size);
    if (buffer_.size() * sizeof(uint64_t) < capacity) buffer_.resize(capacity / sizeof(uint64_t) + 1);
    auto* out = reinterpret_cast<uint8_t*>(buffer_.data());
    size_t packed = 0;
    {
        RacyReads racy_reads;  // validated by slot_unchanged below
        packed = pack_frame(racy, a.layout, out, buffer_.size() * sizeof(uint64_t));
    }
    if (!a.by_copy && !slot_unchanged(a, sequence, KEPLERSHM_SEQ_PUBLISHED(sequence))) {
        return classify(load_slot_word(a, sequence), sequence, view);
    }
    if (packed == 0) fail(KEPLERSHM_E_CORRUPT, "segment '{}', frame {}: overlapping sections", name_, sequence);
    // The copy is private now: parse it again so the view's snapshot describes exactly these bytes.
    const int rc = parse_frame(out, packed, a.layout, view);
    if (rc != KEPLERSHM_OK) fail(rc, "segment '{}', frame {}: {}", name_, sequence, last_error());
    view.segment = &a.layout.header;
    view.in_place = 0;
    view.missed = 0;
    return Status::ok;
}

Status ReaderImpl::wait(uint64_t after, milliseconds timeout) {
    if (recording_) {
        if (after < recording_->frame_count()) return Status::ok;
        return recording_->truncated() ? Status::truncated : Status::end_of_recording;
    }
    const uint64_t deadline = monotonic_ns() + static_cast<uint64_t>(std::max<int64_t>(0, nanoseconds(timeout).count()));
    const nanoseconds slice = std::min<nanoseconds>(heartbeat_timeout() / 4, milliseconds(250));
    for (;;) {
        const keplershm_header& h = live_header();
        // SYNC POINT (partner: the writer's futex_word increment in announce). Read the word before
        // latest_sequence: a publish after this load changes the word, so FUTEX_WAIT below returns at once.
        const uint32_t word = atomic_word(h.futex_word).load(std::memory_order_acquire);
        if (latest() > after) return Status::ok;
        const uint64_t now = monotonic_ns();
        const nanoseconds remaining(deadline > now ? deadline - now : 0);
        if (writer_gone()) {
            if (options_.reattach && reattach()) return Status::ok;  // a new generation: look again
            // Report the loss at once; a caller that waits again is then polled for a successor (nobody
            // will wake the futex of a dead segment) instead of spinning on immediate returns.
            if (!gone_reported_ || remaining.count() == 0) {
                gone_reported_ = true;
                return Status::writer_gone;
            }
            std::this_thread::sleep_for(std::min<nanoseconds>(remaining, milliseconds(50)));
            continue;
        }
        gone_reported_ = false;  // alive again (a stalled writer resumed): a later loss is reported anew
        if (remaining.count() == 0) return Status::timeout;
        // The mapped word even when `h` is a copy: that is where the writer wakes. Past a shrunk end the
        // kernel answers EFAULT (no signal), and the loop looks again.
        const auto& mapped = *reinterpret_cast<const keplershm_header*>(current().segment.data());
        futex_wait(&mapped.futex_word, word, std::min(remaining, slice));
    }
}

bool ReaderImpl::reattach() {
    if (recording_) return false;
    dev_t device = 0;
    ino_t inode = 0;
    if (!segment_identity(name_, device, inode)) return false;
    if (device == current().segment.device() && inode == current().segment.inode()) return false;
    try {
        MappedSegment segment = MappedSegment::open_read_only(name_);
        // Read with pread: its owner may shrink it while we look (see Attachment::by_copy).
        uint32_t state = 0;
        const bool whole = segment.read_at(offsetof(keplershm_header, state), &state, sizeof state) == sizeof state;
        // SYNC POINT (partner: the new writer's release store of ACTIVE in create_generation), as an acquire load.
        std::atomic_thread_fence(std::memory_order_acquire);
        if (!whole || state == KEPLERSHM_STATE_INITIALIZING) return false;
        attach(std::move(segment));
    } catch (const Error&) {
        return false;  // mid-replacement or broken: try again later
    }
    ++reattach_count_;
    gone_reported_ = false;
    const uint64_t first = std::max<uint64_t>(current().layout.header.first_sequence, 1);
    if (started_) {
        if (first > last_ + 1) pending_missed_ += first - (last_ + 1);  // frames lost between generations
        if (first > last_ + 1 || first <= last_) last_ = first - 1;     // gap, or numbering restarted
    }
    return true;
}

Status ReaderImpl::next(milliseconds timeout, keplershm_view& view) {
    const uint64_t deadline = monotonic_ns() + static_cast<uint64_t>(std::max<int64_t>(0, nanoseconds(timeout).count()));
    // A writer can lap a slow reader again and again; give the caller control back after this many.
    constexpr int kMaxLaps = 1000;
    for (int laps = 0;;) {
        if (!started_) {
            const uint64_t newest = latest();
            if (recording_ || newest == 0) {
                started_ = true;  // recordings from the start; a fresh segment from its first frame
                last_ = recording_ ? 0 : std::max<uint64_t>(current().layout.header.first_sequence, 1) - 1;
            } else {
                started_ = true;
                last_ = (options_.start == ReaderOptions::Start::oldest_held ? oldest_readable() : newest) - 1;
            }
        }
        const uint64_t target = last_ + 1;
        Status status = Status::not_yet;
        try {
            status = copy(target, view);
        } catch (const Error& e) {
            // Step over a corrupt frame, so that the caller who logs it and calls again gets the next one
            // instead of the same error forever.
            if (e.code() == KEPLERSHM_E_CORRUPT) last_ = target;
            throw;
        }
        if (status == Status::ok) {
            view.missed = pending_missed_;
            pending_missed_ = 0;
            last_ = target;
            return status;
        }
        if (status == Status::lapped) {
            const uint64_t oldest = std::max(oldest_readable(), target + 1);
            pending_missed_ += oldest - target;
            last_ = oldest - 1;
            if (++laps < kMaxLaps) continue;
            view.missed = pending_missed_;
            return status;
        }
        if (!recording_ && latest() >= target) {
            // The writer stores latest_sequence only after publishing the slot, and we loaded it (acquire)
            // before looking at the slot again: frame `target` must now be there or overwritten. Still
            // "not yet" means the segment contradicts itself; bail out instead of spinning.
            const Status again = copy(target, view);
            if (again == Status::not_yet) {
                fail(KEPLERSHM_E_CORRUPT, "segment '{}': latest_sequence {} but frame {} was never published", name_,
                     latest(), target);
            }
            continue;
        }
        const uint64_t now = monotonic_ns();
        const Status waited = wait(last_, milliseconds(deadline > now ? (deadline - now) / 1'000'000 : 0));
        if (waited != Status::ok) return waited;
    }
}

keplershm_segment_info ReaderImpl::info() {
    const Layout* layout = recording_ ? recording_->first_layout() : &current().layout;
    if (layout == nullptr) {
        keplershm_segment_info empty{};
        empty.sz = sizeof empty;
        return empty;
    }
    const keplershm_header& h = layout->header;
    keplershm_segment_info info = info_from_header(h);
    info.reattach_count = reattach_count_;
    if (recording_) {
        info.is_recording = 1;
        info.latest_sequence = recording_->frame_count();
        info.state = KEPLERSHM_STATE_RETIRED;
        info.writer_cpu_time_ns = h.writer_cpu_time_ns;
        info.writer_rss_bytes = h.writer_rss_bytes;
        return info;
    }
    const keplershm_header& live = live_header();
    info.latest_sequence = latest();
    // SYNC POINT (partner: the writer's release stores of the state, as in writer_gone).
    info.state = atomic_word(live.state).load(std::memory_order_acquire);
    const uint64_t now = watch_heartbeat();
    const uint64_t timeout = static_cast<uint64_t>(heartbeat_timeout().count());
    info.heartbeat_age_ns = watch_.still_for_ns(now);
    info.heartbeat_count = watch_.last().count;
    info.heartbeat_realtime_ns = watch_.last().realtime_ns;
    info.heartbeat_timeout_ns = timeout;
    info.heartbeat_advanced = watch_.advanced() ? 1 : 0;
    const bool ended = info.state == KEPLERSHM_STATE_RETIRED || info.state == KEPLERSHM_STATE_REPLACED;
    info.writer_stale = !ended && watch_.stale(now, timeout) ? 1 : 0;
    info.writer_cpu_time_ns = atomic_word(live.writer_cpu_time_ns).load(std::memory_order_relaxed);
    info.writer_rss_bytes = atomic_word(live.writer_rss_bytes).load(std::memory_order_relaxed);
    return info;
}

std::vector<keplershm_field> ReaderImpl::schema() const {
    const Layout* layout = recording_ ? recording_->first_layout() : &current().layout;
    return layout != nullptr ? layout->schema : std::vector<keplershm_field>{};
}

const Layout* ReaderImpl::layout_for(const keplershm_view& view) const {
    if (recording_) return recording_->layout_for(view.segment);
    for (const Attachment& a : attachments_) {
        if (view.segment == &a.layout.header) return &a.layout;
    }
    return nullptr;
}

// ------------------------------------------------------------------------------------------------

Reader::Reader(std::unique_ptr<ReaderImpl> impl) : impl_(std::move(impl)) {}
Reader Reader::open(const std::string& name, const ReaderOptions& options) { return Reader(ReaderImpl::open_live(name, options)); }
Reader Reader::open_recording(const std::string& path, const ReaderOptions& options) {
    return Reader(ReaderImpl::open_recording(path, options));
}
Reader::Reader(Reader&&) noexcept = default;
Reader& Reader::operator=(Reader&&) noexcept = default;
Reader::~Reader() = default;
keplershm_segment_info Reader::info() { return impl_->info(); }
uint64_t Reader::latest() { return impl_->latest(); }
Status Reader::wait(uint64_t after, milliseconds timeout) { return impl_->wait(after, timeout); }
Status Reader::acquire(uint64_t sequence, FrameView& view) { return impl_->acquire(sequence, view.raw()); }
bool Reader::validate(const FrameView& view) { return impl_->validate(view.raw()); }
Status Reader::copy(uint64_t sequence, FrameView& view) { return impl_->copy(sequence, view.raw()); }
Status Reader::next(milliseconds timeout, FrameView& view) { return impl_->next(timeout, view.raw()); }
bool Reader::reattach() { return impl_->reattach(); }
std::vector<keplershm_field> Reader::schema() { return impl_->schema(); }

}  // namespace keplershm
