#include "futex.hpp"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <climits>
#include <ctime>

namespace keplershm::detail {

void futex_wait(const uint32_t* word, uint32_t expected, std::chrono::nanoseconds timeout) noexcept {
    if (timeout.count() <= 0) return;
    timespec relative{};
    relative.tv_sec = static_cast<time_t>(timeout.count() / 1'000'000'000);
    relative.tv_nsec = static_cast<long>(timeout.count() % 1'000'000'000);
    // EAGAIN (value changed), EINTR and ETIMEDOUT all mean "look again": nothing to report.
    syscall(SYS_futex, word, FUTEX_WAIT, expected, &relative, nullptr, 0);
}

void futex_wake_all(uint32_t* word) noexcept {
    syscall(SYS_futex, word, FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

}  // namespace keplershm::detail
