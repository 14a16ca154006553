/*
 * keplershm.h — the keplershm shared-memory protocol's stable C ABI: error codes, reader, writer and
 * recorder. The one header a client includes; the byte layout of segments and recordings (records,
 * header, recording format) is defined once, in keplershm_layout.h, which it includes.
 *
 * C99, no C++ types. Every function returns 0 (KEPLERSHM_OK) or a negative keplershm error code;
 * keplershm_strerror() turns a code into text. Handles are opaque. Option and info structs carry their
 * own size in their first field (`sz`): the library accepts a smaller struct from an older caller and
 * rejects non-zero bytes it does not know from a newer one.
 */
#ifndef KEPLERSHM_H
#define KEPLERSHM_H

#include <stddef.h>
#include <stdint.h>

#include "keplershm_layout.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(KEPLERSHM_BUILDING_LIBRARY)
#define KEPLERSHM_API __attribute__((visibility("default")))
#else
#define KEPLERSHM_API
#endif

/* ---------------------------------------------------------------------------------------------- */
/* Error codes                                                                                     */
/* ---------------------------------------------------------------------------------------------- */

enum keplershm_error {
    KEPLERSHM_OK = 0,
    KEPLERSHM_E_INVALID_ARGUMENT = -1,
    KEPLERSHM_E_NOT_FOUND = -2,        /* no segment or file under that name */
    KEPLERSHM_E_PERMISSION = -3,
    KEPLERSHM_E_BAD_MAGIC = -4,        /* not a keplershm segment or recording */
    KEPLERSHM_E_UNSUPPORTED_MAJOR = -5,
    KEPLERSHM_E_CORRUPT = -6,          /* a size, count or offset out of bounds */
    KEPLERSHM_E_NOT_YET = -7,          /* frame not published yet */
    KEPLERSHM_E_LAPPED = -8,           /* frame overwritten before or while it was read */
    KEPLERSHM_E_TIMEOUT = -9,
    KEPLERSHM_E_WRITER_GONE = -10,     /* retired, replaced, or heartbeat stale */
    KEPLERSHM_E_EXISTS = -11,          /* a live writer already owns the name */
    KEPLERSHM_E_NO_SPACE = -12,        /* cap or filesystem free space exceeded */
    KEPLERSHM_E_CAPACITY = -13,        /* more records than the frame holds */
    KEPLERSHM_E_IO = -14,
    KEPLERSHM_E_END_OF_RECORDING = -15,
    KEPLERSHM_E_TRUNCATED = -16,       /* recording ends in the middle of a record */
    KEPLERSHM_E_STATE = -17,           /* call not valid in this state (e.g. commit without begin) */
    KEPLERSHM_E_NO_MEMORY = -18,
    KEPLERSHM_E_UNKNOWN_OPTION = -19,  /* a newer caller's option struct has non-zero bytes we do not know */
    KEPLERSHM_E_INTERNAL = -20,
};

/* ---------------------------------------------------------------------------------------------- */
/* C ABI                                                                                           */
/* ---------------------------------------------------------------------------------------------- */

typedef struct keplershm_reader keplershm_reader;
typedef struct keplershm_writer keplershm_writer;
typedef struct keplershm_recorder keplershm_recorder;

/* (major << 16) | minor of the library. */
KEPLERSHM_API uint32_t keplershm_abi_version(void);
KEPLERSHM_API const char *keplershm_strerror(int error);
/* Details of the last error on this thread (file, field and value), or "" if none. */
KEPLERSHM_API const char *keplershm_last_error_detail(void);

/* --- Layout introspection (for bindings) -------------------------------------------------------- */

/* Size of a record type or ABI struct as compiled into this library (enum keplershm_record_type), or 0. */
KEPLERSHM_API uint32_t keplershm_record_size(uint32_t record_type);
/* The library's field schema: fills up to `capacity` entries, returns the total in *count. */
KEPLERSHM_API int keplershm_schema(struct keplershm_field *fields, uint32_t capacity, uint32_t *count);

/* --- Reader ------------------------------------------------------------------------------------ */

struct keplershm_reader_opts {
    size_t sz;                          /* sizeof(struct keplershm_reader_opts) */
    uint32_t heartbeat_timeout_ms;      /* how long the writer's heartbeat may stand still (this reader's clock)
                                           before the writer is stale; 0: 3 heartbeat periods + 1 s */
    uint32_t no_reattach;               /* 1: stay on this generation instead of following the writer */
    uint32_t max_frame_mib;             /* refuse a segment whose slots hold frames larger than this; 0: 64 */
    uint32_t owner_check;               /* KEPLERSHM_OWNER_ROOT_OR_SELF (0), _ROOT_OR_UID, or _ANY */
    uint32_t owner_uid;                 /* the uid accepted besides root with KEPLERSHM_OWNER_ROOT_OR_UID */
    uint32_t reserved[1];
};

/* Who may own a segment a reader opens; a world-writable segment is refused unless _ANY. */
enum keplershm_owner_check {
    KEPLERSHM_OWNER_ROOT_OR_SELF = 0,
    KEPLERSHM_OWNER_ROOT_OR_UID = 1,
    KEPLERSHM_OWNER_ANY = 2,
};

struct keplershm_segment_info {
    size_t sz;                          /* caller sets sizeof(struct keplershm_segment_info) */
    const struct keplershm_header *header; /* the reader's validated private copy of the header (zones,
                                           node facts); runtime fields below are read live */
    uint64_t generation;
    uint64_t segment_size;
    uint32_t abi_major;
    uint32_t abi_minor;
    uint32_t segment_kind;
    uint32_t slot_count;
    uint32_t process_capacity;
    uint32_t cpu_count;
    uint32_t zone_count;
    uint32_t is_recording;
    uint64_t metric_mask;
    uint64_t latest_sequence;
    uint32_t state;
    uint32_t reserved0;
    uint64_t heartbeat_age_ns;          /* how long this reader has seen the heartbeat stand still, on its own
                                           clock: since it last saw it advance, or since it began watching */
    uint64_t writer_cpu_time_ns;
    uint64_t writer_rss_bytes;
    char node_name[256];
    char cpu_model[128];
    uint64_t reattach_count;            /* times this reader moved to a new generation */
    /* ABI 1.1: the writer's liveness as this reader judges it (PROTOCOL.md §1.3) */
    uint64_t heartbeat_count;           /* the writer's heartbeat counter as last read (0: ABI 1.0 writer) */
    uint64_t heartbeat_realtime_ns;     /* CLOCK_REALTIME of the writer's last heartbeat (0: ABI 1.0 writer) */
    uint64_t heartbeat_timeout_ns;      /* how long the heartbeat may stand still before this reader calls
                                           the writer stale */
    uint32_t heartbeat_advanced;        /* 1: the heartbeat advanced while this reader watched this generation */
    uint32_t writer_stale;              /* 1: not retired or replaced, yet the heartbeat stood still for
                                           heartbeat_timeout_ns: the writer is hung or dead */
};

/* A frame, read in place (pointers into the mapping) or from a private copy. Counts, offsets and
 * strides are a snapshot taken once and bounds-checked; use keplershm_view_section() to get them. */
struct keplershm_view {
    size_t sz;                          /* caller sets sizeof(struct keplershm_view) */
    uint64_t sequence;
    uint64_t generation;
    uint64_t missed;                    /* frames skipped between the previous next() and this one */
    const struct keplershm_frame *frame;/* in the mapping or the copy; header fields also copied below */
    uint64_t interval_start_ns;
    uint64_t interval_end_ns;
    uint32_t flags;
    uint32_t source;
    uint32_t power_source;
    uint32_t section_count;
    struct keplershm_section sections[16];
    const uint8_t *base;                /* frame start */
    uint64_t frame_size;
    uint32_t in_place;                  /* 1: points into the mapping (validate before trusting it) */
    uint32_t reserved0;
    const struct keplershm_header *segment; /* header describing this frame (record sizes, zones) */
};

KEPLERSHM_API int keplershm_reader_open(const char *shm_name, const struct keplershm_reader_opts *opts,
                                        keplershm_reader **out);
KEPLERSHM_API int keplershm_reader_open_recording(const char *path, const struct keplershm_reader_opts *opts,
                                                  keplershm_reader **out);
KEPLERSHM_API void keplershm_reader_close(keplershm_reader *reader);
KEPLERSHM_API int keplershm_reader_info(keplershm_reader *reader, struct keplershm_segment_info *info);
/* Field schema the segment (or the recording's first generation) publishes. */
KEPLERSHM_API int keplershm_reader_schema(keplershm_reader *reader, struct keplershm_field *fields, uint32_t capacity,
                                          uint32_t *count);
/* Published frame number of the newest frame (0 if none). */
KEPLERSHM_API int keplershm_reader_latest(keplershm_reader *reader, uint64_t *sequence);
/* Blocks until a frame newer than `after` is published, the writer goes away, or timeout. The writer is
 * gone when retired or replaced, or stale: its heartbeat stood still for the heartbeat timeout on this
 * reader's clock, counted from when the reader began watching (PROTOCOL.md §1.3). WRITER_GONE is
 * returned as soon as the loss is seen; waiting again then polls for a successor writer until timeout. */
KEPLERSHM_API int keplershm_reader_wait(keplershm_reader *reader, uint64_t after, int32_t timeout_ms);
/* Frame `sequence` in place: OK, NOT_YET, or LAPPED (view->missed = frames lost). For a recording,
 * `sequence` is the frame's position in the file, from 1 (the view carries the frame's own number). */
KEPLERSHM_API int keplershm_reader_acquire(keplershm_reader *reader, uint64_t sequence, struct keplershm_view *view);
/* Field schema of the generation a view was read from (recordings may span several generations). */
KEPLERSHM_API int keplershm_view_schema(keplershm_reader *reader, const struct keplershm_view *view,
                                        struct keplershm_field *fields, uint32_t capacity, uint32_t *count);
/* OK while an in-place view is intact; LAPPED once the writer started to overwrite it. */
KEPLERSHM_API int keplershm_reader_validate(keplershm_reader *reader, const struct keplershm_view *view);
/* Frame `sequence` copied into the reader's private buffer (valid until the next copy on this reader). */
KEPLERSHM_API int keplershm_reader_copy(keplershm_reader *reader, uint64_t sequence, struct keplershm_view *view);
/* Next frame after the last one returned, copied; waits up to timeout_ms; reports missed frames and
 * follows the writer to a new generation by itself (view->missed counts frames lost to the gap).
 * A corrupt frame gives KEPLERSHM_E_CORRUPT once and is stepped over: the next call reads on. */
KEPLERSHM_API int keplershm_reader_next(keplershm_reader *reader, int32_t timeout_ms, struct keplershm_view *view);
/* Copies frame bytes to caller memory; *frame_size receives the size needed. */
KEPLERSHM_API int keplershm_view_export(const struct keplershm_view *view, void *buffer, size_t capacity,
                                        size_t *frame_size);
/* Section of a view: base pointer, record count and stride (0 records if absent). */
KEPLERSHM_API int keplershm_view_section(const struct keplershm_view *view, uint32_t section_id,
                                         const void **records, uint32_t *count, uint32_t *stride);
/* Reader re-reads the name and attaches to a newer generation if there is one: 1 moved, 0 same. */
KEPLERSHM_API int keplershm_reader_reattach(keplershm_reader *reader);

/* --- Writer ------------------------------------------------------------------------------------ */

struct keplershm_writer_opts {
    size_t sz;                          /* sizeof(struct keplershm_writer_opts) */
    uint32_t slot_count;                /* default 8 */
    uint32_t process_capacity;          /* default 4096 */
    uint32_t workload_capacity;         /* default 512 */
    uint32_t zone_capacity;             /* default KEPLERSHM_MAX_ZONES */
    uint32_t cpu_capacity;              /* default: CPUs configured */
    uint32_t string_capacity;           /* default 64 KiB */
    uint32_t segment_kind;              /* default KEPLERSHM_SEGMENT_FRAMES */
    uint32_t mode;                      /* file mode, default 0640 */
    uint64_t max_segment_bytes;         /* default 256 MiB */
    uint64_t heartbeat_period_ns;       /* default 1 s */
    uint64_t metric_mask;
    const char *node_name;              /* default: uname nodename */
    const char *cpu_model;
    uint32_t cpu_count;
    uint32_t zone_count;
    const struct keplershm_zone_info *zones;
    uint32_t writer_version;
    uint32_t replace_live;              /* 1: take the name even from a live writer (tests, operators) */
    /* 1.4 (callers built against 1.3 leave them out: sz says so) */
    uint32_t gpu_device_capacity;       /* GPU_DEVICES records per frame; 0: no GPU sections */
    uint32_t gpu_usage_capacity;        /* GPU_USAGE records per frame */
};

/* Pointers into the slot being written. Fill records, set the counts, then commit. */
struct keplershm_draft {
    size_t sz;                          /* caller sets sizeof(struct keplershm_draft) */
    uint64_t sequence;
    struct keplershm_frame *frame;      /* caller fills interval, source, flags ... (sequence and
                                           generation are set by the writer) */
    struct keplershm_process *processes;
    uint32_t process_capacity;
    uint32_t process_count;
    struct keplershm_workload *workloads;
    uint32_t workload_capacity;
    uint32_t workload_count;
    struct keplershm_zone_sample *zones;
    uint32_t zone_capacity;
    uint32_t zone_count;
    struct keplershm_cpu_sample *cpus;
    uint32_t cpu_capacity;
    uint32_t cpu_count;
    char *strings;
    uint32_t string_capacity;
    uint32_t string_used;
    struct keplershm_unaccounted *unaccounted;
    uint32_t processes_wanted;          /* processes the interval had; above capacity the writer grows */
    uint32_t reserved0;
    struct keplershm_estimate *estimates;
    uint32_t estimate_capacity;
    uint32_t estimate_count;
    /* 1.4 */
    struct keplershm_gpu_device *gpu_devices;
    uint32_t gpu_device_capacity;
    uint32_t gpu_device_count;
    struct keplershm_gpu_usage *gpu_usage;
    uint32_t gpu_usage_capacity;
    uint32_t gpu_usage_count;
};

KEPLERSHM_API int keplershm_writer_create(const char *shm_name, const struct keplershm_writer_opts *opts,
                                          keplershm_writer **out);
/* Starts frame n+1 in its slot (marks the slot odd). The frame header, directory and unaccounted record
 * are zeroed; record areas are not (that would double the cost of publishing): write whole records,
 * starting from zeroed structs, so that reserved fields are zero. */
KEPLERSHM_API int keplershm_writer_begin(keplershm_writer *writer, struct keplershm_draft *draft);
/* Publishes the draft: writes the section directory, marks the slot even, wakes waiting readers. */
KEPLERSHM_API int keplershm_writer_commit(keplershm_writer *writer, struct keplershm_draft *draft);
KEPLERSHM_API int keplershm_writer_heartbeat(keplershm_writer *writer);
KEPLERSHM_API int keplershm_writer_set_overhead(keplershm_writer *writer, uint64_t cpu_time_ns, uint64_t rss_bytes);
KEPLERSHM_API int keplershm_writer_info(keplershm_writer *writer, struct keplershm_segment_info *info);
/* Marks the segment retired, wakes readers and unmaps; the name is removed unless keep_name. */
KEPLERSHM_API void keplershm_writer_close(keplershm_writer *writer, int keep_name);

/* --- Recorder ---------------------------------------------------------------------------------- */

struct keplershm_recorder_opts {
    size_t sz;
    uint64_t max_bytes;                 /* 0: unlimited; the recorder stops with NO_SPACE at the cap */
    uint32_t fsync_every;               /* frames between fsyncs, 0: only at close */
    uint32_t reserved0;
};

KEPLERSHM_API int keplershm_recorder_open(const char *path, const struct keplershm_recorder_opts *opts,
                                          keplershm_recorder **out);
/* Appends a frame that `reader` returned (writes a SEGMENT record first when its generation is new). */
KEPLERSHM_API int keplershm_recorder_append(keplershm_recorder *recorder, keplershm_reader *reader,
                                            const struct keplershm_view *view);
/* Follows a live reader: appends frames for up to duration_ms (0: until max_bytes or the writer retires). */
KEPLERSHM_API int keplershm_recorder_follow(keplershm_recorder *recorder, keplershm_reader *reader,
                                            uint64_t duration_ms, uint64_t *frames_written);
/* Frames and bytes written so far (either pointer may be NULL). */
KEPLERSHM_API int keplershm_recorder_stats(keplershm_recorder *recorder, uint64_t *frames, uint64_t *bytes);
KEPLERSHM_API int keplershm_recorder_close(keplershm_recorder *recorder);


#ifdef __cplusplus
}
#endif
#endif /* KEPLERSHM_H */
