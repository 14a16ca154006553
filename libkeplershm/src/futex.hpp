// Cross-process wake-up on a 32-bit word in the shared header (shared futex: no FUTEX_PRIVATE_FLAG,
// since writer and readers are different processes, possibly in different containers). FUTEX_WAIT works
// on a read-only mapping.
#pragma once

#include <chrono>
#include <cstdint>

namespace keplershm::detail {

/// Sleeps while *word == expected, at most `timeout`. Returns when woken, when the word differs,
/// on a signal, or at the timeout; callers re-check their condition in every case.
void futex_wait(const uint32_t* word, uint32_t expected, std::chrono::nanoseconds timeout) noexcept;
/// Wakes every waiter on `word`.
void futex_wake_all(uint32_t* word) noexcept;

}  // namespace keplershm::detail
