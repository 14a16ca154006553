// Template definitions of process.hpp.
#pragma once

#include <thread>

namespace e2e {

template <class Predicate>
bool wait_until(Predicate ready, std::chrono::milliseconds timeout, std::chrono::milliseconds step) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
        if (ready()) return true;
        std::this_thread::sleep_for(step);
    }
    return ready();
}

}  // namespace e2e
