/* keplershm-probe: liveness/readiness check of a keplershm segment, through the C ABI only.
 *
 * Opens /dev/shm/NAME read-only (as any reader would), and exits
 *   0  the writer is ACTIVE and its heartbeat is younger than the limit,
 *   1  it is not: no segment, unreadable, not a keplershm segment, retired, replaced, or stale,
 *   2  usage error.
 * One line on stdout (healthy) or stderr (unhealthy) says which, so `kubectl describe pod` and
 * `systemctl status` show the reason. Liveness never depends on pids (PROTOCOL.md §1.1): only the
 * writer state and the CLOCK_MONOTONIC heartbeat, which every container of a host shares.
 *
 * C99, keplershm.h and libkeplershm.so.1 only, so it fits into any image beside the library. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "keplershm.h"

enum { EXIT_HEALTHY = 0, EXIT_UNHEALTHY = 1, EXIT_USAGE = 2 };

struct probe_options {
    const char *shm_name;
    uint64_t max_age_ns; /* 0: the readers' own limit, 3 heartbeat periods + 1 s (from the header) */
    int quiet;
};

static void usage(FILE *out) {
    fprintf(out,
            "usage: keplershm-probe [--shm-name[=]NAME] [--max-age[=]DURATION] [--quiet]\n"
            "  --shm-name NAME     segment under /dev/shm (default: keplershm)\n"
            "  --max-age DURATION  heartbeat age limit, e.g. 10s, 500ms (default: 3 heartbeat periods + 1 s,\n"
            "                      the limit readers use)\n"
            "  --quiet             print nothing when healthy\n"
            "exit status: 0 writer active with a fresh heartbeat, 1 unhealthy (reason on stderr), 2 usage\n");
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

/* The verdict on an opened segment: EXIT_HEALTHY or EXIT_UNHEALTHY, with its one line. */
static int judge(const struct probe_options *o, const struct keplershm_segment_info *info) {
    const uint64_t period_ns = info->header->heartbeat_period_ns;
    const uint64_t limit_ns = o->max_age_ns != 0 ? o->max_age_ns : 3 * period_ns + 1000000000ull;
    const double age_s = (double)info->heartbeat_age_ns / 1e9;
    const double limit_s = (double)limit_ns / 1e9;
    switch (info->state) {
    case KEPLERSHM_STATE_ACTIVE:
        break;
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
    if (info->heartbeat_age_ns > limit_ns) {
        fprintf(stderr, "keplershm-probe: UNHEALTHY: /dev/shm/%s is stale: heartbeat %.1f s old, limit %.1f s "
                        "(the collector is hung or was killed)\n", o->shm_name, age_s, limit_s);
        return EXIT_UNHEALTHY;
    }
    if (!o->quiet) {
        printf("keplershm-probe: OK: /dev/shm/%s active, generation %#llx, frame %llu, heartbeat %.3f s old "
               "(limit %.1f s)\n", o->shm_name, (unsigned long long)info->generation,
               (unsigned long long)info->latest_sequence, age_s, limit_s);
    }
    return EXIT_HEALTHY;
}

int main(int argc, char **argv) {
    struct probe_options options;
    struct keplershm_reader_opts reader_options;
    struct keplershm_segment_info info;
    keplershm_reader *reader = NULL;
    int rc;
    int verdict;

    if (parse_arguments(argc, argv, &options) != 0) return EXIT_USAGE;

    memset(&reader_options, 0, sizeof reader_options);
    reader_options.sz = sizeof reader_options;
    reader_options.no_reattach = 1; /* judge the generation at the name now, do not wait for another */
    rc = keplershm_reader_open(options.shm_name, &reader_options, &reader);
    if (rc == KEPLERSHM_E_INVALID_ARGUMENT) {
        fprintf(stderr, "keplershm-probe: %s\n", keplershm_last_error_detail());
        return EXIT_USAGE;
    }
    if (rc != KEPLERSHM_OK) {
        explain_open_error(options.shm_name, rc);
        return EXIT_UNHEALTHY;
    }

    memset(&info, 0, sizeof info);
    info.sz = sizeof info;
    rc = keplershm_reader_info(reader, &info);
    if (rc != KEPLERSHM_OK) {
        fprintf(stderr, "keplershm-probe: UNHEALTHY: /dev/shm/%s: %s: %s\n", options.shm_name, keplershm_strerror(rc),
                keplershm_last_error_detail());
        keplershm_reader_close(reader);
        return EXIT_UNHEALTHY;
    }
    verdict = judge(&options, &info);
    keplershm_reader_close(reader);
    return verdict;
}
