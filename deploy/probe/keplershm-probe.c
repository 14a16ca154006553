/* keplershm-probe: liveness/readiness check of a keplershm segment, through the C ABI only.
 * With --alive-file PATH it checks instead that a file's mtime is recent: kepler-estimate --alive-file
 * touches one every second from its pipeline loop, so its liveness needs none of its HTTP workers (a
 * flood of slow clients holding every worker must not get it restarted) and says the loop runs.
 *
 * Opens /dev/shm/NAME read-only (as any reader would), watches its writer's heartbeat, and exits
 *   0  the writer is ACTIVE and its heartbeat advanced while watched (within one heartbeat period),
 *   1  it is not: no segment, unreadable, not a keplershm segment, retired, replaced, or stale (the
 *      heartbeat stood still for the limit); with --alive-file: the file is missing, or its mtime is
 *      further than the limit from now (CLOCK_REALTIME, in either direction),
 *   2  usage error.
 * One line on stdout (healthy) or stderr (unhealthy) says which, so `kubectl describe pod` and
 * `systemctl status` show the reason. Liveness depends neither on pids nor on whose clock the writer
 * reads (PROTOCOL.md §1.3): only the writer state and the progress of its heartbeat, timed on the
 * probe's own clock, so the writer may run in another time namespace.
 *
 * C99, keplershm.h and libkeplershm.so.1 only, so it fits into any image beside the library. */
#define _POSIX_C_SOURCE 200809L /* gmtime_r, clock_gettime, st_mtim */
#include <sys/stat.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "keplershm.h"

enum { EXIT_HEALTHY = 0, EXIT_UNHEALTHY = 1, EXIT_USAGE = 2 };

/* --alive-file without --max-age: ten of the estimator's one-second touches missed. */
#define ALIVE_FILE_DEFAULT_MAX_AGE_NS 10000000000ull

struct probe_options {
    const char *shm_name;
    int shm_name_given;
    const char *alive_file; /* NULL: probe the segment */
    uint64_t max_age_ns; /* how long the heartbeat may stand still; 0: the readers' own limit, 3 periods + 1 s */
    int quiet;
};

static void usage(FILE *out) {
    fprintf(out,
            "usage: keplershm-probe [--shm-name[=]NAME] [--max-age[=]DURATION] [--quiet]\n"
            "       keplershm-probe --alive-file[=]PATH [--max-age[=]DURATION] [--quiet]\n"
            "  --shm-name NAME     segment under /dev/shm (default: keplershm)\n"
            "  --max-age DURATION  how long the heartbeat may stand still, e.g. 10s, 500ms (default: 3\n"
            "                      heartbeat periods + 1 s, the limit readers use); the probe watches the\n"
            "                      segment this long at most, and answers as soon as the heartbeat advances.\n"
            "                      With --alive-file: how old the file's mtime may be (default: 10s)\n"
            "  --alive-file PATH   instead of a segment, check that PATH was modified within --max-age\n"
            "                      (kepler-estimate --alive-file touches it every second); answers at once\n"
            "  --quiet             print nothing when healthy\n"
            "exit status: 0 writer active with an advancing heartbeat (or a fresh alive file), 1 unhealthy\n"
            "(reason on stderr), 2 usage\n");
}

/* "10s", "500ms", "2m", "1h", "1.5" (seconds) -> nanoseconds; 0 on a malformed or non-positive value. */
static uint64_t parse_duration_ns(const char *text) {
    char *unit = NULL;
    double value;
    double scale = 1e9;
    errno = 0;
    value = strtod(text, &unit);
    if (errno != 0 || unit == text || !(value > 0)) return 0;
    if (strcmp(unit, "ms") == 0) scale = 1e6;
    else if (strcmp(unit, "us") == 0) scale = 1e3;
    else if (strcmp(unit, "m") == 0) scale = 60e9;
    else if (strcmp(unit, "h") == 0) scale = 3600e9;
    else if (strcmp(unit, "s") != 0 && *unit != '\0') return 0;
    if (value * scale > 86400e9) return 0; /* more than a day is a typo, not a probe */
    return (uint64_t)(value * scale);
}

/* The value of option `name` given as "NAME VALUE" or "NAME=VALUE" at argv[*i], or NULL if argv[*i] is not it. */
static const char *option_value(int argc, char **argv, int *i, const char *name) {
    const size_t n = strlen(name);
    if (strncmp(argv[*i], name, n) != 0) return NULL;
    if (argv[*i][n] == '=') return argv[*i] + n + 1;
    if (argv[*i][n] == '\0' && *i + 1 < argc) return argv[++*i];
    return NULL;
}

static int parse_arguments(int argc, char **argv, struct probe_options *o) {
    int i;
    o->shm_name = "keplershm";
    o->shm_name_given = 0;
    o->alive_file = NULL;
    o->max_age_ns = 0;
    o->quiet = 0;
    for (i = 1; i < argc; ++i) {
        const char *arg = argv[i];
        const char *value;
        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
            usage(stdout);
            exit(EXIT_HEALTHY);
        } else if (strcmp(arg, "--quiet") == 0) {
            o->quiet = 1;
        } else if ((value = option_value(argc, argv, &i, "--shm-name")) != NULL) {
            o->shm_name = value;
            o->shm_name_given = 1;
        } else if ((value = option_value(argc, argv, &i, "--alive-file")) != NULL) {
            if (*value == '\0') {
                fprintf(stderr, "keplershm-probe: --alive-file: expected a path\n");
                return -1;
            }
            o->alive_file = value;
        } else if ((value = option_value(argc, argv, &i, "--max-age")) != NULL) {
            o->max_age_ns = parse_duration_ns(value);
            if (o->max_age_ns == 0) {
                fprintf(stderr, "keplershm-probe: --max-age: expected a duration like 10s or 500ms, got '%s'\n", value);
                return -1;
            }
        } else {
            fprintf(stderr, "keplershm-probe: unknown or incomplete option '%s'\n", arg);
            usage(stderr);
            return -1;
        }
    }
    if (o->alive_file != NULL && o->shm_name_given) {
        fprintf(stderr, "keplershm-probe: --alive-file checks a file, --shm-name a segment: give one of them\n");
        return -1;
    }
    return 0;
}

/* Why opening failed, in the operator's terms. */
static void explain_open_error(const char *name, int rc) {
    const char *detail = keplershm_last_error_detail();
    switch (rc) {
    case KEPLERSHM_E_NOT_FOUND:
        fprintf(stderr, "keplershm-probe: UNHEALTHY: no segment /dev/shm/%s: the collector has not created it yet, "
                        "or stopped and removed it\n", name);
        break;
    case KEPLERSHM_E_PERMISSION:
        fprintf(stderr, "keplershm-probe: UNHEALTHY: /dev/shm/%s is not readable by this user: give it the "
                        "collector's group (--segment-mode, fsGroup; see deploy/README.md): %s\n", name, detail);
        break;
    case KEPLERSHM_E_BAD_MAGIC:
    case KEPLERSHM_E_CORRUPT:
    case KEPLERSHM_E_UNSUPPORTED_MAJOR:
        fprintf(stderr, "keplershm-probe: UNHEALTHY: /dev/shm/%s is not a segment this library reads (%s): %s\n", name,
                keplershm_strerror(rc), detail);
        break;
    default:
        fprintf(stderr, "keplershm-probe: UNHEALTHY: cannot open /dev/shm/%s: %s: %s\n", name, keplershm_strerror(rc),
                detail);
        break;
    }
}

/* " since 2026-12-03T09:40:01Z" for a CLOCK_REALTIME value; "" for 0 (writers of ABI 1.0 store none). */
static void since_text(uint64_t realtime_ns, char *text, size_t size) {
    const time_t seconds = (time_t)(realtime_ns / 1000000000ull);
    struct tm utc;
    text[0] = '\0';
    if (realtime_ns != 0 && gmtime_r(&seconds, &utc) != NULL) strftime(text, size, " since %Y-%m-%dT%H:%M:%SZ", &utc);
}

/* The verdict on the writer's state alone: EXIT_UNHEALTHY with its line, or -1 while it is ACTIVE. */
static int judge_state(const struct probe_options *o, const struct keplershm_segment_info *info) {
    switch (info->state) {
    case KEPLERSHM_STATE_ACTIVE:
        return -1;
    case KEPLERSHM_STATE_RETIRED:
        fprintf(stderr, "keplershm-probe: UNHEALTHY: /dev/shm/%s is retired: its collector stopped cleanly "
                        "(generation %#llx, last frame %llu)\n", o->shm_name, (unsigned long long)info->generation,
                (unsigned long long)info->latest_sequence);
        return EXIT_UNHEALTHY;
    case KEPLERSHM_STATE_REPLACED:
        fprintf(stderr, "keplershm-probe: UNHEALTHY: /dev/shm/%s generation %#llx was replaced while probing; "
                        "probe again\n", o->shm_name, (unsigned long long)info->generation);
        return EXIT_UNHEALTHY;
    default:
        fprintf(stderr, "keplershm-probe: UNHEALTHY: /dev/shm/%s is in state %u (not active)\n", o->shm_name,
                (unsigned)info->state);
        return EXIT_UNHEALTHY;
    }
}

static int report_stale(const struct probe_options *o, const struct keplershm_segment_info *info) {
    char since[64];
    since_text(info->heartbeat_realtime_ns, since, sizeof since);
    fprintf(stderr, "keplershm-probe: UNHEALTHY: /dev/shm/%s is stale: writer stale%s; its heartbeat "
                    "stood still for %.1f s while probed, limit %.1f s, period %.1f s (the collector is hung or "
                    "was killed)\n", o->shm_name, since, (double)info->heartbeat_age_ns / 1e9,
            (double)info->heartbeat_timeout_ns / 1e9, (double)info->header->heartbeat_period_ns / 1e9);
    return EXIT_UNHEALTHY;
}

static int report_healthy(const struct probe_options *o, const struct keplershm_segment_info *info) {
    if (o->quiet) return EXIT_HEALTHY;
    printf("keplershm-probe: OK: /dev/shm/%s active, generation %#llx, frame %llu, heartbeat advancing (beat %llu, "
           "limit %.1f s)\n", o->shm_name, (unsigned long long)info->generation,
           (unsigned long long)info->latest_sequence, (unsigned long long)info->heartbeat_count,
           (double)info->heartbeat_timeout_ns / 1e9);
    return EXIT_HEALTHY;
}

/* Watches the writer (PROTOCOL.md §1.3) until its heartbeat advances (healthy, within one heartbeat
 * period) or stands still for the limit (stale), or its state ends it. The library keeps the time on
 * this process's clock; the probe only waits in short slices and asks. */
static int watch(const struct probe_options *o, keplershm_reader *reader) {
    struct keplershm_segment_info info;
    for (;;) {
        int verdict;
        memset(&info, 0, sizeof info);
        info.sz = sizeof info;
        if (keplershm_reader_info(reader, &info) != KEPLERSHM_OK) {
            fprintf(stderr, "keplershm-probe: UNHEALTHY: /dev/shm/%s: %s\n", o->shm_name, keplershm_last_error_detail());
            return EXIT_UNHEALTHY;
        }
        if ((verdict = judge_state(o, &info)) >= 0) return verdict;
        if (info.heartbeat_advanced) return report_healthy(o, &info);
        if (info.writer_stale) return report_stale(o, &info);
        /* Returns at a new frame, at the loss, or after the slice: the next look tells which. */
        (void)keplershm_reader_wait(reader, info.latest_sequence, 50);
    }
}

/* Healthy while `o->alive_file` was modified within --max-age of now. Both sides are CLOCK_REALTIME
 * of this host (time namespaces do not virtualize it), so the ages compare; an mtime in the future by
 * more than the limit is refused too, or a file set ahead once would pass for as long as it is ahead. */
static int probe_alive_file(const struct probe_options *o) {
    const uint64_t limit_ns = o->max_age_ns != 0 ? o->max_age_ns : ALIVE_FILE_DEFAULT_MAX_AGE_NS;
    struct stat st;
    struct timespec now;
    double age_s;
    if (stat(o->alive_file, &st) != 0) {
        const int err = errno;
        if (err == ENOENT) {
            fprintf(stderr, "keplershm-probe: UNHEALTHY: no alive file %s: the estimator has not started its loop, "
                            "or runs without --alive-file=%s\n", o->alive_file, o->alive_file);
        } else {
            fprintf(stderr, "keplershm-probe: UNHEALTHY: cannot stat alive file %s: %s\n", o->alive_file, strerror(err));
        }
        return EXIT_UNHEALTHY;
    }
    if (!S_ISREG(st.st_mode)) {
        fprintf(stderr, "keplershm-probe: UNHEALTHY: alive file %s is not a regular file\n", o->alive_file);
        return EXIT_UNHEALTHY;
    }
    clock_gettime(CLOCK_REALTIME, &now);
    age_s = (double)(now.tv_sec - st.st_mtim.tv_sec) + (double)(now.tv_nsec - st.st_mtim.tv_nsec) / 1e9;
    if (age_s > (double)limit_ns / 1e9) {
        fprintf(stderr, "keplershm-probe: UNHEALTHY: alive file %s is stale: age %.1f s, limit %.1f s (the "
                        "estimator's loop is hung or stopped)\n", o->alive_file, age_s, (double)limit_ns / 1e9);
        return EXIT_UNHEALTHY;
    }
    if (-age_s > (double)limit_ns / 1e9) {
        fprintf(stderr, "keplershm-probe: UNHEALTHY: alive file %s was modified %.1f s in the future, limit %.1f s "
                        "(set by something other than the estimator, or the clock stepped back)\n", o->alive_file,
                -age_s, (double)limit_ns / 1e9);
        return EXIT_UNHEALTHY;
    }
    if (!o->quiet) {
        printf("keplershm-probe: OK: alive file %s modified %.1f s ago (limit %.1f s)\n", o->alive_file,
               age_s < 0 ? 0.0 : age_s, (double)limit_ns / 1e9);
    }
    return EXIT_HEALTHY;
}

int main(int argc, char **argv) {
    struct probe_options options;
    struct keplershm_reader_opts reader_options;
    keplershm_reader *reader = NULL;
    int rc;
    int verdict;

    if (parse_arguments(argc, argv, &options) != 0) return EXIT_USAGE;
    if (options.alive_file != NULL) return probe_alive_file(&options);
    if ((keplershm_abi_version() & 0xffffu) < 1) {  /* 1.0 libraries judge liveness by comparing clocks */
        fprintf(stderr, "keplershm-probe: UNHEALTHY: the libkeplershm.so.1 loaded is ABI %u.%u; this probe needs 1.1 "
                        "or newer (liveness from heartbeat progress)\n", keplershm_abi_version() >> 16,
                keplershm_abi_version() & 0xffffu);
        return EXIT_UNHEALTHY;
    }

    memset(&reader_options, 0, sizeof reader_options);
    reader_options.sz = sizeof reader_options;
    reader_options.no_reattach = 1; /* judge the generation at the name now, do not wait for another */
    /* Milliseconds, at least 1: the library's option unit (0 would mean its default). */
    reader_options.heartbeat_timeout_ms =
        options.max_age_ns == 0 ? 0 : (uint32_t)(options.max_age_ns / 1000000u > 0 ? options.max_age_ns / 1000000u : 1);
    rc = keplershm_reader_open(options.shm_name, &reader_options, &reader);
    if (rc == KEPLERSHM_E_INVALID_ARGUMENT) {
        fprintf(stderr, "keplershm-probe: %s\n", keplershm_last_error_detail());
        return EXIT_USAGE;
    }
    if (rc != KEPLERSHM_OK) {
        explain_open_error(options.shm_name, rc);
        return EXIT_UNHEALTHY;
    }
    verdict = watch(&options, reader);
    keplershm_reader_close(reader);
    return verdict;
}
