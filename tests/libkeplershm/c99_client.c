/* A C99 client of libkeplershm.so.1, built with -std=c99 -Wall -Wextra -Werror -pedantic from keplershm.h
 * alone: writes frames, reads them back in place and by copy, records them and replays the recording.
 * usage: c99_client SEGMENT_NAME RECORDING_PATH */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "keplershm.h"

#define CHECK(call)                                                                                      \
    do {                                                                                                 \
        int rc_ = (call);                                                                                \
        if (rc_ != KEPLERSHM_OK) {                                                                       \
            fprintf(stderr, "%s:%d: %s -> %s (%s)\n", __FILE__, __LINE__, #call, keplershm_strerror(rc_), \
                    keplershm_last_error_detail());                                                      \
            return 1;                                                                                    \
        }                                                                                                \
    } while (0)

static int publish(keplershm_writer *writer, uint32_t processes) {
    struct keplershm_draft draft;
    uint32_t i;
    memset(&draft, 0, sizeof draft);
    draft.sz = sizeof draft;
    CHECK(keplershm_writer_begin(writer, &draft));
    for (i = 0; i < processes && i < draft.process_capacity; ++i) {
        struct keplershm_process *p = &draft.processes[i];
        memset(p, 0, sizeof *p);
        p->pid = 1000 + i;
        p->tgid = p->pid;
        p->start_time_ticks = 42 + i;
        p->cpu_time_ns = (uint64_t)draft.sequence * 1000000u + i;
        p->workload_index = KEPLERSHM_NO_WORKLOAD;
        strncpy(p->comm, "c99-client", sizeof p->comm - 1);
    }
    draft.process_count = i;
    draft.frame->interval_start_ns = draft.sequence * 1000000000ull;
    draft.frame->interval_end_ns = draft.frame->interval_start_ns + 1000000000ull;
    draft.frame->source = KEPLERSHM_SOURCE_SYNTHETIC;
    draft.unaccounted->cpu_time_ns = 5;
    CHECK(keplershm_writer_commit(writer, &draft));
    return 0;
}

static int check_frame(const struct keplershm_view *view, uint32_t expected_processes) {
    const void *records = NULL;
    uint32_t count = 0, stride = 0, i;
    CHECK(keplershm_view_section(view, KEPLERSHM_SECTION_PROCESSES, &records, &count, &stride));
    if (count != expected_processes || stride < sizeof(struct keplershm_process)) {
        fprintf(stderr, "frame %llu: %u processes (stride %u), expected %u\n", (unsigned long long)view->sequence,
                count, stride, expected_processes);
        return 1;
    }
    for (i = 0; i < count; ++i) {
        const struct keplershm_process *p =
            (const struct keplershm_process *)((const uint8_t *)records + (size_t)i * stride);
        if (p->pid != 1000 + i || p->cpu_time_ns != view->sequence * 1000000u + i || strcmp(p->comm, "c99-client") != 0) {
            fprintf(stderr, "frame %llu: process %u has wrong content\n", (unsigned long long)view->sequence, i);
            return 1;
        }
    }
    return 0;
}

/* argv[1] made unique to this run: its pid and a random number (builds and checkouts running their tests
 * at the same time share /dev/shm, and pids repeat between pid namespaces). */
static void unique_name(const char *stem, char *name, size_t size) {
    unsigned random = 0;
    FILE *urandom = fopen("/dev/urandom", "rb");
    if (urandom != NULL) {
        if (fread(&random, sizeof random, 1, urandom) != 1) random = 0;
        fclose(urandom);
    }
    snprintf(name, size, "%s-%ld-%u", stem, (long)getpid(), random);
}

int main(int argc, char **argv) {
    char name[200];
    struct keplershm_writer_opts wopts;
    struct keplershm_segment_info info;
    struct keplershm_view view;
    struct keplershm_recorder_opts ropts;
    keplershm_writer *writer = NULL;
    keplershm_reader *reader = NULL;
    keplershm_reader *replay = NULL;
    keplershm_recorder *recorder = NULL;
    uint64_t latest = 0, n;
    int frames = 0, rc;

    if (argc != 3) {
        fprintf(stderr, "usage: %s SEGMENT_NAME RECORDING_PATH\n", argv[0]);
        return 2;
    }
    if (keplershm_abi_version() >> 16 != KEPLERSHM_ABI_MAJOR) return 1;
    unique_name(argv[1], name, sizeof name);

    memset(&wopts, 0, sizeof wopts);
    wopts.sz = sizeof wopts;
    wopts.slot_count = 4;
    wopts.process_capacity = 16;
    wopts.node_name = "c99-node";
    CHECK(keplershm_writer_create(name, &wopts, &writer));
    CHECK(keplershm_reader_open(name, NULL, &reader));
    memset(&info, 0, sizeof info);
    info.sz = sizeof info;
    CHECK(keplershm_reader_info(reader, &info));
    if (strcmp(info.node_name, "c99-node") != 0 || info.process_capacity != 16) return 1;
    /* ABI 1.1: the heartbeat as this reader judges it (default period 1 s: timeout 3 periods + 1 s). */
    if (info.heartbeat_count < 1 || info.heartbeat_realtime_ns == 0 || info.heartbeat_timeout_ns != UINT64_C(4000000000) ||
        info.writer_stale != 0) {
        return 1;
    }

    CHECK(keplershm_recorder_open(argv[2], NULL, &recorder));
    for (n = 1; n <= 5; ++n) {
        if (publish(writer, (uint32_t)n) != 0) return 1;
        memset(&view, 0, sizeof view);
        view.sz = sizeof view;
        CHECK(keplershm_reader_acquire(reader, n, &view)); /* in place */
        if (check_frame(&view, (uint32_t)n) != 0) return 1;
        CHECK(keplershm_reader_validate(reader, &view));
        CHECK(keplershm_recorder_append(recorder, reader, &view));
    }
    CHECK(keplershm_reader_latest(reader, &latest));
    if (latest != 5) return 1;
    memset(&view, 0, sizeof view);
    view.sz = sizeof view;
    if (keplershm_reader_acquire(reader, 1, &view) != KEPLERSHM_E_LAPPED) return 1; /* 4 slots */
    CHECK(keplershm_reader_copy(reader, 5, &view));
    if (check_frame(&view, 5) != 0) return 1;
    {
        uint64_t recorded = 0, bytes = 0;
        struct keplershm_field fields[256];
        uint32_t field_count = 0;
        CHECK(keplershm_recorder_stats(recorder, &recorded, &bytes));
        if (recorded != 5 || bytes == 0) return 1;
        CHECK(keplershm_view_schema(reader, &view, fields, 256, &field_count));
        if (field_count == 0 || field_count > 256 || keplershm_record_size(KEPLERSHM_STRUCT_VIEW) != sizeof view) return 1;
    }
    CHECK(keplershm_recorder_close(recorder));

    memset(&ropts, 0, sizeof ropts);
    ropts.sz = sizeof ropts;
    CHECK(keplershm_reader_open_recording(argv[2], NULL, &replay));
    for (;;) {
        memset(&view, 0, sizeof view);
        view.sz = sizeof view;
        rc = keplershm_reader_next(replay, 0, &view);
        if (rc == KEPLERSHM_E_END_OF_RECORDING) break;
        CHECK(rc);
        if (check_frame(&view, (uint32_t)view.sequence) != 0) return 1;
        ++frames;
    }
    if (frames != 5) return 1;
    keplershm_reader_close(replay);
    keplershm_reader_close(reader);
    keplershm_writer_close(writer, 0);
    unlink(argv[2]);
    printf("c99 client: wrote, read and replayed %d frames\n", frames);
    return 0;
}
