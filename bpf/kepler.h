/*
 * kepler.h — the layout shared by the eBPF program (kepler.bpf.c) and user space (kepler-collect).
 *
 * libbpf-bootstrap pattern: both sides include this file, so a map value means the same bytes on both
 * sides of the boundary. Everything here is plain C with fixed-width kernel types.
 *
 * Counters in `struct kepler_proc_stats` are cumulative since the program was loaded and only ever grow
 * while the entry exists. User space never drains them: it keeps the previous reading per key and
 * publishes differences, so no update can fall between "read" and "delete" (the Kepler 0.7 defect that
 * lost the first slice of a process after each drain). Entries are deleted only after their process
 * has exited and user space has published the final values.
 */
#ifndef KEPLER_BPF_SHARED_H
#define KEPLER_BPF_SHARED_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

#define KEPLER_COMM_LEN 16
#define KEPLER_SOFTIRQ_VECTORS 10 /* HI TIMER NET_TX NET_RX BLOCK IRQ_POLL TASKLET SCHED HRTIMER RCU */

/* Hardware counters, in the order of the perf_event_array maps. */
enum kepler_hw_counter {
    KEPLER_HW_CYCLES = 0,
    KEPLER_HW_INSTRUCTIONS = 1,
    KEPLER_HW_CACHE_MISSES = 2, /* last-level cache read misses */
    KEPLER_HW_COUNTERS = 3,
};

/* A process: its thread-group id and the start time of its group leader in clock ticks since boot
 * (/proc/<pid>/stat field 22). The pair never repeats, so a reused pid never merges two processes. */
struct kepler_proc_key {
    __u32 tgid;
    __u32 reserved; /* zero */
    __u64 start_ticks;
};

enum kepler_proc_stats_flag {
    KEPLER_STATS_EXITED = 1u << 0,  /* the whole thread group has exited (sched_process_exit, last thread) */
    KEPLER_STATS_KTHREAD = 1u << 1, /* kernel thread */
};

/* Value of the `processes` hash map. */
struct kepler_proc_stats {
    __u64 cpu_time_ns;                         /* on-CPU time of all threads, slices that ended */
    __u64 hw[KEPLER_HW_COUNTERS];              /* counter deltas summed over this process's slices */
    __u64 hw_unavailable[KEPLER_HW_COUNTERS];  /* slices whose counter read failed (-ENOENT: no PMU event) */
    __u64 page_cache_requested;                /* pages asked of the page cache (mm_filemap_get_pages) */
    __u64 page_cache_added;                    /* pages inserted (mm_filemap_add_to_page_cache, 1<<order) */
    __u64 softirq[KEPLER_SOFTIRQ_VECTORS];     /* softirq_entry events that ran while this process was current */
    __u64 cgroup_id;                           /* cgroup v2 id of the last thread seen on a CPU */
    __u32 flags;                               /* enum kepler_proc_stats_flag */
    __u32 reserved;
    char comm[KEPLER_COMM_LEN];                /* group leader's comm (updated on exec) */
    __u64 marked_boundary_ns;                  /* the boundary whose cut mark this entry has (a hint for
                                                  the program only: user space reads `cut_marks`) */
    __u64 fence;                               /* for the program only: a locked add on it orders the
                                                  hint's store before a later load (mark_boundary()) */
};

/*
 * Value of the `cut_marks` hash map: the process's cpu_time_ns as it stood at a frame boundary, written
 * by the first charge after that boundary and before that charge is added. Its key is the process's key
 * with `reserved` set to the boundary's parity (the low bit of boundary_ns, which user space alternates),
 * so consecutive boundaries never share a mark: the first charger inserts it (BPF_NOEXIST) and any other
 * thread of the process finds it there, and user space deletes a parity's marks once it has read them,
 * before it publishes the next boundary of that parity. The map is only ever written through
 * bpf_map_update_elem(), which inserts a whole element under its bucket lock, and read with batch
 * lookups that copy under the same lock: user space never sees half of a mark (unlike the in-place
 * fields of `processes`, whose copy may tear between two fields).
 */
struct kepler_cut_mark {
    __u64 boundary_ns;  /* bpf_ktime_get_ns() value of the boundary */
    __u64 cpu_time_ns;  /* kepler_proc_stats.cpu_time_ns of slices that ended before it */
};

/*
 * What runs on one CPU now (per-CPU array, one slot). Written only on that CPU (sched_switch and the
 * repair sampler); read by user space at each interval boundary to credit a task that is still running
 * with its time up to the boundary. Only the thread id is kept: resolving it to its process would cost
 * every context switch, while user space needs it for one task per CPU per interval.
 * Torn reads are detected with two copies of a version number: the program stores `version_begin`
 * first and `version_end` last; the kernel copies the value to user space in ascending address order,
 * so a copy with version_end == version_begin was not written while it was copied (on x86's ordered
 * stores and loads; elsewhere the check still catches almost every tear).
 */
struct kepler_cpu_state {
    __u64 version_end;                         /* stored last by the writer, read first by user space */
    __u64 running_since_ns;                    /* the switch-in in bpf_ktime_get_ns() time (see
                                                  sample_clock() in kepler_account.bpf.h), 0 = unknown */
    __u32 tid;                                 /* thread id of the running task (0 = idle) */
    __u32 hw_last_valid;                       /* bit i: hw_last[i] holds a real reading */
    __u64 hw_last[KEPLER_HW_COUNTERS];         /* counter values at the last switch on this CPU */
    /* The slice that was running on this CPU at the last boundary, once it has ended: its process and
     * its time before the boundary. Written at most once per boundary (only one slice can span it). */
    __u64 spanned_boundary_ns;                 /* that boundary; 0 = no such slice has ended yet */
    __u64 spanned_before_ns;                   /* its on-CPU ns before the boundary */
    struct kepler_proc_key spanned_process;
    /* This CPU's busy time on the processes' clock, cumulative since load: the slices of tasks that
     * ended here (ticks from /proc/stat overcount tasks that wake on the tick). */
    __u64 task_ns;
    /* task_ns as it stood at `marked_boundary_ns`, stored by the first task switch-out at or after that
     * boundary (with the running slice's part before it), so user space cuts it exactly there. */
    __u64 marked_boundary_ns;
    __u64 task_at_mark_ns;
    /* For the program only: this CPU's scheduler clock (rq->clock) translated to bpf_ktime_get_ns()
     * time, from the last two offsets measured (ktime - rq clock, mod 2^64) at precise reads. */
    __u64 clock_sampled_at_ns;                 /* rq clock of the last sample, 0 = none */
    __u64 clock_last_offset_ns;                /* the last sample's offset */
    __u64 clock_offset_ns;                     /* the translation, when clock_trusted */
    __u32 clock_trusted;                       /* the last two samples agreed */
    __u32 clock_translated;                    /* switches stamped with the translation (mod 2^32): the
                                                  tests' evidence that it engages */
    __u64 version_begin;                       /* stored first by the writer, read last by user space */
};

/* Per-CPU counters of events the program could not record (index into the `drops` per-CPU array). */
enum kepler_drop_counter {
    KEPLER_DROP_MAP_FULL = 0,      /* a new process did not fit into the `processes` map */
    KEPLER_DROP_MAP_FULL_NS = 1,   /* on-CPU ns of such processes */
    KEPLER_DROP_UNKNOWN_SLICE = 2, /* slices whose start was not seen (first slice after load) */
    KEPLER_DROP_CUT_MARK = 3,      /* a cut mark did not fit into `cut_marks` (its process's frame may
                                      then hold time from after the boundary) */
    KEPLER_DROP_CUT_LATE = 4,      /* a charge from before a boundary was added after its process's mark
                                      for it was taken (two threads of one process on two CPUs, one of
                                      them stalled): that slice may land one frame late */
    KEPLER_DROP_COUNTERS = 5,
};

/*
 * Built with KEPLER_CUT_STATS only (cmake -DKEPLERSHM_BPF_CUT_STATS=ON): how far a switch stamped with
 * the translated scheduler clock lay from the precise clock read at the same switch (one extra
 * bpf_ktime_get_ns() per translated switch), per CPU, in log2 buckets of ns. Bucket 0 holds 0 ns,
 * bucket i holds [2^(i-1), 2^i) ns (bucket 31: 1 s and more).
 */
#define KEPLER_LAG_BUCKETS 32
struct kepler_cut_stats {
    __u64 translated;                          /* switches measured */
    __u64 early[KEPLER_LAG_BUCKETS];           /* translated stamp before the precise clock by ... */
    __u64 late[KEPLER_LAG_BUCKETS];            /* ... or after it by ... */
    __u64 max_early_ns;
    __u64 max_late_ns;
};

#endif /* KEPLER_BPF_SHARED_H */
