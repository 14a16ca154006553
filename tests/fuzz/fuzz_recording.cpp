// libFuzzer: recording files through the public Reader: open, index, read every frame (checksums, bounds).
#include <fcntl.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "keplershm/keplershm.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace keplershm;
    static const std::string path = "/tmp/kshm-fuzz-recording-" + std::to_string(getpid());
    const int fd = open(path.c_str(), O_CREAT | O_TRUNC | O_WRONLY, 0600);
    if (fd < 0) return 0;
    const bool written = size == 0 || write(fd, data, size) == static_cast<ssize_t>(size);
    close(fd);
    if (!written) return 0;
    try {
        Reader reader = Reader::open_recording(path);
        (void)reader.info();
        FrameView view;
        for (int i = 0; i < 64; ++i) {
            try {
                if (reader.next(std::chrono::milliseconds(0), view) != Status::ok) break;
                for (const auto& p : view.processes()) (void)p.cpu_time_ns;
                for (const auto& w : view.workloads()) (void)view.string_at(w.cgroup_path_offset, w.cgroup_path_length);
            } catch (const Error&) {
            }
        }
    } catch (const Error&) {
    }
    return 0;
}
