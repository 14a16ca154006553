// Internal error helpers: every failure carries a keplershm_error code and a message that names the
// file, field or value at fault. The C ABI keeps the last message per thread.
#pragma once

#include <fmt/format.h>

#include <string>

#include "keplershm/keplershm.hpp"

namespace keplershm::detail {

template <class... Args>
[[noreturn]] void fail(int code, fmt::format_string<Args...> format, Args&&... args) {
    throw Error(code, fmt::format(format, std::forward<Args>(args)...));
}

/// Records `message` as this thread's last error detail (read by keplershm_last_error_detail).
void set_last_error(const std::string& message);
void clear_last_error();
const char* last_error();

/// errno value → keplershm_error code.
int error_from_errno(int err) noexcept;

}  // namespace keplershm::detail
