/* keplershm-segment-size: the bytes a collector segment with given capacities takes in /dev/shm.
 *
 * Asks the real library rather than re-deriving the layout: it creates a segment with those capacities
 * under a private name, reads its size back, and removes it. Operators use it to size the /dev/shm
 * emptyDir (deploy/README.md gives the formula it follows); the deploy tests use it to check the
 * manifests. Options and defaults mirror kepler-collect's.
 *
 * C99, keplershm.h and libkeplershm.so.1 only. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "keplershm.h"

static void usage(FILE *out) {
    fprintf(out,
            "usage: keplershm-segment-size [--process-capacity N] [--workload-capacity N] [--string-capacity N]\n"
            "                              [--slots N] [--cpus N] [--verbose]\n"
            "  defaults are kepler-collect's: 4096 processes, 512 workloads, 65536 string bytes, 8 slots,\n"
            "  and this machine's CPU count. Prints the segment size in bytes.\n");
}

static int parse_u32(const char *text, uint32_t *out) {
    char *end = NULL;
    unsigned long long value = strtoull(text, &end, 10);
    if (end == text || *end != '\0' || value == 0 || value > 0xffffffffull) return -1;
    *out = (uint32_t)value;
    return 0;
}

int main(int argc, char **argv) {
    struct keplershm_writer_opts opts;
    struct keplershm_segment_info info;
    keplershm_writer *writer = NULL;
    char name[64];
    int verbose = 0;
    int i;
    int rc;

    memset(&opts, 0, sizeof opts);
    opts.sz = sizeof opts;
    opts.slot_count = 8;
    opts.process_capacity = 4096;
    opts.workload_capacity = 512;
    opts.string_capacity = 65536;
    opts.max_segment_bytes = ~(uint64_t)0; /* measure, do not cap */
    for (i = 1; i < argc; ++i) {
        uint32_t *target = NULL;
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return 0;
        }
        if (strcmp(argv[i], "--verbose") == 0) {
            verbose = 1;
            continue;
        }
        if (strcmp(argv[i], "--process-capacity") == 0) target = &opts.process_capacity;
        else if (strcmp(argv[i], "--workload-capacity") == 0) target = &opts.workload_capacity;
        else if (strcmp(argv[i], "--string-capacity") == 0) target = &opts.string_capacity;
        else if (strcmp(argv[i], "--slots") == 0) target = &opts.slot_count;
        else if (strcmp(argv[i], "--cpus") == 0) target = &opts.cpu_count;
        if (target == NULL || i + 1 >= argc || parse_u32(argv[i + 1], target) != 0) {
            fprintf(stderr, "keplershm-segment-size: bad or incomplete option '%s'\n", argv[i]);
            usage(stderr);
            return 2;
        }
        ++i;
    }

    snprintf(name, sizeof name, "keplershm-segment-size-%ld", (long)getpid());
    rc = keplershm_writer_create(name, &opts, &writer);
    if (rc != KEPLERSHM_OK) {
        fprintf(stderr, "keplershm-segment-size: %s: %s\n", keplershm_strerror(rc), keplershm_last_error_detail());
        return 1;
    }
    memset(&info, 0, sizeof info);
    info.sz = sizeof info;
    rc = keplershm_writer_info(writer, &info);
    if (rc != KEPLERSHM_OK || info.header == NULL) {
        fprintf(stderr, "keplershm-segment-size: %s: %s\n", keplershm_strerror(rc), keplershm_last_error_detail());
        keplershm_writer_close(writer, 0);
        return 1;
    }
    if (verbose) {
        printf("segment_size %llu\nslots_offset %llu\nslot_size %llu\nslot_count %u\nschema_count %u\ncpu_capacity %u\n",
               (unsigned long long)info.segment_size, (unsigned long long)info.header->slots_offset,
               (unsigned long long)info.header->slot_size, info.header->slot_count, info.header->schema_count,
               info.header->cpu_capacity);
    } else {
        printf("%llu\n", (unsigned long long)info.segment_size);
    }
    keplershm_writer_close(writer, 0); /* info.header points into the segment: close only after printing */
    return 0;
}
