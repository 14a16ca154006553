#include "error.hpp"

#include <cerrno>

namespace keplershm::detail {
namespace {
thread_local std::string t_last_error;
}

void set_last_error(const std::string& message) { t_last_error = message; }
void clear_last_error() { t_last_error.clear(); }
const char* last_error() { return t_last_error.c_str(); }

int error_from_errno(int err) noexcept {
    switch (err) {
    case ENOENT: return KEPLERSHM_E_NOT_FOUND;
    case EACCES:
    case EPERM: return KEPLERSHM_E_PERMISSION;
    case EEXIST: return KEPLERSHM_E_EXISTS;
    case ENOSPC:
    case EFBIG: return KEPLERSHM_E_NO_SPACE;
    case ENOMEM: return KEPLERSHM_E_NO_MEMORY;
    case EINVAL:
    case ENAMETOOLONG: return KEPLERSHM_E_INVALID_ARGUMENT;
    case ELOOP: return KEPLERSHM_E_PERMISSION;  // a symlink where a segment should be
    default: return KEPLERSHM_E_IO;
    }
}

}  // namespace keplershm::detail
