// The per-slot seqlock, after the kernel's vDSO/seqcount pattern. Every fence names its partner.
//
// Slot sequence word: 0 never written, KEPLERSHM_SEQ_WRITING(n) while frame n is written,
// KEPLERSHM_SEQ_PUBLISHED(n) once it is whole. Payload bytes are copied with memcpy inside the library;
// a reader trusts them only after seq_recheck() says the word did not move.
#pragma once

#include <atomic>
#include <cstdint>

#include "keplershm.h"

namespace keplershm::detail {

#if defined(__SANITIZE_THREAD__)
#define KEPLERSHM_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define KEPLERSHM_TSAN 1
#endif
#endif
#if defined(KEPLERSHM_TSAN)
extern "C" void AnnotateIgnoreReadsBegin(const char* file, int line);
extern "C" void AnnotateIgnoreReadsEnd(const char* file, int line);
#endif

/// Scope of the reads a seqlock reader makes before it knows whether they were torn. ThreadSanitizer does
/// not model the fence pairing (seq_begin_write / seq_recheck) that makes them safe to discard, so under
/// TSan these reads are hidden from it; everything else, the sequence words included, stays checked.
class RacyReads {
public:
#if defined(KEPLERSHM_TSAN)
    RacyReads() { AnnotateIgnoreReadsBegin(__FILE__, __LINE__); }
    ~RacyReads() { AnnotateIgnoreReadsEnd(__FILE__, __LINE__); }
#else
    RacyReads() noexcept {}  // user-provided: a guard object is "used" even when it does nothing
    ~RacyReads() {}
#endif
    RacyReads(const RacyReads&) = delete;
    RacyReads& operator=(const RacyReads&) = delete;
};

// std::atomic_ref has no const overload in C++20; readers only ever load through it (the mapping is
// PROT_READ), so casting the constness away never leads to a store.
inline std::atomic_ref<uint64_t> atomic_word(const uint64_t& word) {
    return std::atomic_ref<uint64_t>(const_cast<uint64_t&>(word));
}
inline std::atomic_ref<uint32_t> atomic_word(const uint32_t& word) {
    return std::atomic_ref<uint32_t>(const_cast<uint32_t&>(word));
}

/// Writer: marks the slot as being rewritten with frame n.
inline void seq_begin_write(uint64_t& word, uint64_t n) {
    atomic_word(word).store(KEPLERSHM_SEQ_WRITING(n), std::memory_order_relaxed);
    // SYNC POINT (partner: the acquire fence in seq_recheck). Orders the odd store above before every
    // payload store below: a reader whose copy contains any byte of the new frame is then guaranteed to
    // see the odd (or a later) value when it re-checks, and throws its copy away.
    std::atomic_thread_fence(std::memory_order_release);
}

/// Writer: frame n is whole.
inline void seq_publish(uint64_t& word, uint64_t n) {
    // SYNC POINT (partner: seq_load). Release orders every payload store before the even value: a reader
    // that loads PUBLISHED(n) with acquire sees the whole frame n.
    atomic_word(word).store(KEPLERSHM_SEQ_PUBLISHED(n), std::memory_order_release);
}

/// Reader: first look at the slot, before touching the payload.
inline uint64_t seq_load(const uint64_t& word) {
    // SYNC POINT (partner: the release store in seq_publish). Acquire keeps the payload reads that
    // follow from being performed before this load.
    return atomic_word(word).load(std::memory_order_acquire);
}

/// Reader: after copying the payload, true if nothing was rewritten meanwhile.
inline bool seq_recheck(const uint64_t& word, uint64_t expected) {
    // SYNC POINT (partner: the release fence in seq_begin_write). Keeps the payload reads above from
    // moving after the reload below; together with the writer's fence, seeing a new payload byte
    // implies seeing the odd sequence here.
    std::atomic_thread_fence(std::memory_order_acquire);
    return atomic_word(word).load(std::memory_order_relaxed) == expected;
}

/// Decodes a slot word into (frame number, published?).
struct SlotState {
    uint64_t frame;
    bool published;
    bool empty;
};
inline SlotState decode(uint64_t word) {
    if (word == 0) return {0, false, true};
    if (word % 2 == 1) return {(word - 1) / 2, false, false};
    return {(word - 2) / 2, true, false};
}

}  // namespace keplershm::detail
