/* A C99 reader of kepler-collect's frames through libkeplershm.so.1 (keplershm.h alone), for the end
 * to end test: reads FRAMES consecutive frames of SEGMENT and checks that each holds the process
 * (PID, START_TICKS), stepping records by the stride the segment publishes.
 * usage: kepler_collect_c99_reader SEGMENT PID START_TICKS FRAMES
 * exit: 0 found in every frame, 1 missing or not consecutive, 2 error */
#define _POSIX_C_SOURCE 200809L /* nanosleep under -std=c99 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "keplershm.h"

static int has_process(const struct keplershm_view *view, unsigned long pid, unsigned long long start) {
    const void *records = NULL;
    uint32_t count = 0, stride = 0, i;
    if (keplershm_view_section(view, KEPLERSHM_SECTION_PROCESSES, &records, &count, &stride) != KEPLERSHM_OK) return 0;
    for (i = 0; i < count; ++i) {
        const struct keplershm_process *p =
            (const struct keplershm_process *)((const unsigned char *)records + (size_t)i * stride);
        if (p->pid == pid && p->start_time_ticks == start) return 1;
    }
    return 0;
}

int main(int argc, char **argv) {
    keplershm_reader *reader = NULL;
    struct keplershm_reader_opts opts;
    unsigned long pid;
    unsigned long long start;
    int frames, seen = 0, attempt, rc = KEPLERSHM_E_NOT_FOUND;
    uint64_t previous = 0;
    if (argc != 5) {
        fprintf(stderr, "usage: %s SEGMENT PID START_TICKS FRAMES\n", argv[0]);
        return 2;
    }
    pid = strtoul(argv[2], NULL, 10);
    start = strtoull(argv[3], NULL, 10);
    frames = atoi(argv[4]);
    memset(&opts, 0, sizeof opts);
    opts.sz = sizeof opts;
    for (attempt = 0; attempt < 1000 && rc != KEPLERSHM_OK; ++attempt) {
        rc = keplershm_reader_open(argv[1], &opts, &reader);
        if (rc != KEPLERSHM_OK) {
            struct timespec pause = {0, 10000000};
            nanosleep(&pause, NULL);
        }
    }
    if (rc != KEPLERSHM_OK) {
        fprintf(stderr, "c99_reader: open %s: %s (%s)\n", argv[1], keplershm_strerror(rc), keplershm_last_error_detail());
        return 2;
    }
    while (seen < frames) {
        struct keplershm_view view;
        memset(&view, 0, sizeof view);
        view.sz = sizeof view;
        rc = keplershm_reader_next(reader, 5000, &view);
        if (rc != KEPLERSHM_OK) {
            fprintf(stderr, "c99_reader: next: %s (%s)\n", keplershm_strerror(rc), keplershm_last_error_detail());
            keplershm_reader_close(reader);
            return 2;
        }
        if (has_process(&view, pid, start) && (seen == 0 || view.sequence == previous + 1)) {
            ++seen;
        } else {
            seen = 0;
        }
        previous = view.sequence;
        if (previous > (uint64_t)frames * 10u) break; /* generous bound: never loop for ever */
    }
    keplershm_reader_close(reader);
    printf("c99_reader: process %lu in %d consecutive frames (last frame %llu)\n", pid, seen,
           (unsigned long long)previous);
    return seen >= frames ? 0 : 1;
}
