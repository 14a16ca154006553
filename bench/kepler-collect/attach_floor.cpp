// attach_floor — keeps the empty sched_switch program of attach_floor.bpf.c attached until SIGINT or
// SIGTERM (bpf_cost.sh's floor). Prints "attached" once it is.
//
//   kepler_attach_floor [OBJECT]   (default: the object built beside it)
#include <bpf/libbpf.h>
#include <signal.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

int main(int argc, char** argv) {
    const char* path = argc > 1 ? argv[1] : KEPLER_ATTACH_FLOOR_OBJECT;
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    sigprocmask(SIG_BLOCK, &stop, nullptr);  // taken by sigwait below, so the links are closed on exit

    bpf_object* object = bpf_object__open_file(path, nullptr);
    if (object == nullptr) {
        std::fprintf(stderr, "attach_floor: cannot open %s: %s\n", path, std::strerror(errno));
        return 1;
    }
    if (const int err = bpf_object__load(object); err != 0) {
        std::fprintf(stderr, "attach_floor: cannot load %s: %s\n", path, std::strerror(-err));
        return 1;
    }
    bpf_program* program = bpf_object__find_program_by_name(object, "kepler_floor_switch");
    bpf_link* link = program != nullptr ? bpf_program__attach(program) : nullptr;
    if (link == nullptr) {
        std::fprintf(stderr, "attach_floor: cannot attach kepler_floor_switch: %s\n", std::strerror(errno));
        return 1;
    }
    std::puts("attached");
    std::fflush(stdout);
    int signal_number = 0;
    sigwait(&stop, &signal_number);
    bpf_link__destroy(link);
    bpf_object__close(object);
    return 0;
}
