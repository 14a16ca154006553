/* A stand-in for libkeplershm whose layout introspection lies, to prove that the Python bindings refuse
 * to run against a library whose struct layout differs from theirs. Every other symbol resolves to the
 * real library this one links. KEPLERSHM_SKEW=size: the process record grows by 8 bytes;
 * KEPLERSHM_SKEW=offset: process.cpu_time_ns moves by 8 bytes. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include "keplershm.h"

static const char *skew(void) {
    const char *s = getenv("KEPLERSHM_SKEW");
    return s != NULL ? s : "";
}

uint32_t keplershm_record_size(uint32_t record_type) {
    uint32_t (*real)(uint32_t);
    *(void **)&real = dlsym(RTLD_NEXT, "keplershm_record_size");  /* POSIX's way past ISO C's pointer rule */
    uint32_t size = real(record_type);
    if (strcmp(skew(), "size") == 0 && record_type == KEPLERSHM_RECORD_PROCESS) size += 8;
    return size;
}

int keplershm_schema(struct keplershm_field *fields, uint32_t capacity, uint32_t *count) {
    int (*real)(struct keplershm_field *, uint32_t, uint32_t *);
    *(void **)&real = dlsym(RTLD_NEXT, "keplershm_schema");
    int rc = real(fields, capacity, count);
    if (rc != 0 || fields == NULL || strcmp(skew(), "offset") != 0) return rc;
    for (uint32_t i = 0; i < capacity && i < *count; ++i) {
        if (fields[i].record_type == KEPLERSHM_RECORD_PROCESS && strcmp(fields[i].name, "cpu_time_ns") == 0) {
            fields[i].offset += 8;
        }
    }
    return rc;
}
