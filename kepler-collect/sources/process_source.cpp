#include "sources/process_source.hpp"

#include <algorithm>

namespace kepler::collect {

void ProcessActivity::set_comm(std::string_view text) noexcept {
    comm.fill('\0');
    std::copy_n(text.begin(), std::min(text.size(), comm.size() - 1), comm.begin());
}

}  // namespace kepler::collect
