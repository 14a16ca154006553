// libFuzzer: whole segment images through the public Reader (a real /dev/shm object per input): open,
// info, schema, every frame in place + validate, copy-out, next().
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "keplershm/keplershm.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace keplershm;
    static const std::string name = "kshm-fuzz-segment-" + std::to_string(getpid());
    shm_unlink(("/" + name).c_str());
    const int fd = shm_open(("/" + name).c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0) return 0;
    if (size > 0 && write(fd, data, size) != static_cast<ssize_t>(size)) {
        close(fd);
        return 0;
    }
    close(fd);
    try {
        ReaderOptions options;
        options.reattach = false;
        Reader reader = Reader::open(name, options);
        (void)reader.info();
        (void)reader.schema();
        FrameView view;
        for (uint64_t n = 0; n < 6; ++n) {
            try {
                if (reader.acquire(n, view) == Status::ok) {
                    for (const auto& p : view.processes()) (void)p.cpu_time_ns;
                    (void)reader.validate(view);
                }
                (void)reader.copy(n, view);
            } catch (const Error&) {
            }
        }
        (void)reader.next(std::chrono::milliseconds(0), view);
    } catch (const Error&) {
    }
    shm_unlink(("/" + name).c_str());
    return 0;
}
