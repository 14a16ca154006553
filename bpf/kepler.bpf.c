// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * kepler.bpf.c — per-process (thread group) activity for kepler-collect.
 *
 * What it keeps, per (tgid, leader start time), cumulative since load (see kepler.h):
 *   on-CPU ns (sched_switch: the scheduler's own se.sum_exec_runtime, per thread, between two
 *   switch-outs), hardware counter deltas per slice (perf_event_array, where a PMU exists),
 *   softirq entries per vector (irq/softirq_entry, charged to the task they interrupted),
 *   page-cache pages requested and added (filemap tracepoints), and whether the process exited.
 *
 * Every hook exists in three flavours — tp_btf, raw_tp and classic tracepoint — with the same body.
 * User space enables one flavour with bpf_program__set_autoload() before load (tp_btf first, then
 * raw_tp, then tracepoint), because kernels differ in which of them they can load and attach.
 *
 * All hooks run in the context of the task they account (sched_switch fires while `prev` is still
 * current), so the accounted task is always `current`; only sched_switch's `next` is another task.
 *
 * This file holds the settings, the maps and the entry points; kepler_account.bpf.h the accounting.
 */
#include "vmlinux.h"
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "kepler.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

#define PF_KTHREAD 0x00200000 /* include/linux/sched.h, stable since 2.6 */
#define EEXIST 17             /* uapi errno; vmlinux.h has no macros */

/* Set by user space before load. */
const volatile __u64 ns_per_tick = 10000000; /* 1e9 / sysconf(_SC_CLK_TCK): USER_HZ, not the kernel's HZ */
const volatile __u32 hw_counters_enabled = 0; /* 0: no PMU event could be opened, skip the reads */

/*
 * The next frame boundary, in bpf_ktime_get_ns() time; 0 before the first. Its low bit alternates
 * from one boundary to the next (user space draws them so): it names the boundary's cut marks' key.
 * User space publishes it a little ahead of time and reads the maps only once it has passed, so the program itself cuts every
 * process's CPU time at the boundary (one boundary per frame, the same for every process and CPU):
 *   - the first charge of a process at or after the boundary first stores what the process had before
 *     it (a `cut_marks` entry);
 *   - the slice that was running on a CPU at the boundary records its time before the boundary in that
 *     CPU's state when it ends (spanned_*), or is still running when user space looks.
 * A process's CPU time at the boundary is then its mark (or, with no mark, its whole total: nothing was
 * charged since) plus its spanning slices, however late user space reads the maps.
 */
volatile __u64 cut_boundary_ns = 0;

struct {
    __uint(type, BPF_MAP_TYPE_HASH); /* not LRU: an entry must never disappear without being counted */
    __uint(max_entries, 16384);      /* user space sets the size from --bpf-max-processes */
    __type(key, struct kepler_proc_key);
    __type(value, struct kepler_proc_stats);
} processes SEC(".maps");

/* A thread as sched_switch sees it. Keyed by the address of its task_struct (free to get, unlike
 * anything read through a pointer); `tid` tells a reused task_struct from the thread it was. */
struct kepler_thread {
    __u64 last_runtime;          /* se.sum_exec_runtime at its last switch-out; 0 = none seen yet */
    struct kepler_proc_key proc; /* its process, so the hot path never recomputes it */
    __u32 tid;
    __u32 reserved;
};

/*
 * The slice of a thread is the growth of its own runtime counter between two switch-outs, so a switch
 * the tracepoint never reported (some kernels switch back to a task without a sched_switch event)
 * loses nothing: the next switch-out still sees the whole growth. LRU, because threads come and go
 * without telling: a dead thread's entry is the least recently used and goes first, and an evicted
 * live thread only has its next slice measured from the per-CPU switch-in record instead.
 */
struct {
    __uint(type, BPF_MAP_TYPE_LRU_HASH);
    __uint(max_entries, 32768);      /* user space sets the size from --bpf-max-threads */
    __type(key, __u64);
    __type(value, struct kepler_thread);
} threads SEC(".maps");

/* Each process's CPU time at the last two boundaries (see cut_boundary_ns and struct kepler_cut_mark);
 * inserted whole, never edited. */
struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, 32768);      /* user space sizes it as twice `processes` (two boundaries' marks) */
    __type(key, struct kepler_proc_key);
    __type(value, struct kepler_cut_mark);
} cut_marks SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
    __uint(max_entries, 1);
    __type(key, __u32);
    __type(value, struct kepler_cpu_state);
} cpu_states SEC(".maps");

#ifdef KEPLER_CUT_STATS
struct {
    __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
    __uint(max_entries, 1);
    __type(key, __u32);
    __type(value, struct kepler_cut_stats);
} cut_stats SEC(".maps");
#endif

struct {
    __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
    __uint(max_entries, KEPLER_DROP_COUNTERS);
    __type(key, __u32);
    __type(value, __u64);
} drops SEC(".maps");

/* One perf event per CPU per counter, opened by user space; an empty slot reads as -ENOENT. */
struct {
    __uint(type, BPF_MAP_TYPE_PERF_EVENT_ARRAY);
    __type(key, __u32);
    __type(value, __u32);
} hw_cycles SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_PERF_EVENT_ARRAY);
    __type(key, __u32);
    __type(value, __u32);
} hw_instructions SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_PERF_EVENT_ARRAY);
    __type(key, __u32);
    __type(value, __u32);
} hw_cache_misses SEC(".maps");

#include "kepler_account.bpf.h"

/*
 * Repair of the per-CPU record, run by a software cpu-clock perf event on each CPU (50 Hz). Some
 * kernels switch back to a task without a sched_switch event; until the next reported switch the
 * record then names a task that is not running, and a boundary would credit the wrong one. When the
 * record and `current` disagree, account current's untracked runtime now (its own counter says how
 * much) and record it as running from here on. Runs in interrupt context with interrupts off, so it
 * never interleaves with on_switch() on this CPU.
 */
SEC("perf_event")
int kepler_repair(void *ctx)
{
    __u32 zero = 0;
    struct kepler_cpu_state *cpu = bpf_map_lookup_elem(&cpu_states, &zero);
    if (!cpu || cpu->running_since_ns == 0)
        return 0;
    __u64 pid_tgid = bpf_get_current_pid_tgid();
    if ((__u32)pid_tgid == cpu->tid)
        return 0; /* the common case: the record is right */
    __u64 now = bpf_ktime_get_ns();
    __u64 version = begin_state_write(cpu);
    if ((pid_tgid >> 32) != 0) {
        struct task_struct *task = (struct task_struct *)bpf_get_current_task();
        account_current(cpu, (__u64)task, pid_tgid, now, BPF_CORE_READ(task, se.sum_exec_runtime),
                        current_boundary());
    }
    record_running(cpu, (__u32)pid_tgid, now);
    end_state_write(cpu, version);
    return 0;
}

/* ---- tp_btf flavour ---------------------------------------------------------------------------- */

/* The scheduler clock of the CPU `prev` is switching out on: __schedule() has updated it under the run
 * queue lock it still holds. Reached through the task's CFS run queue (the per-CPU `runqueues` symbol
 * needs CONFIG_KALLSYMS_ALL); 0 without group scheduling, and from a faulting load (plain loads through
 * typed pointers read 0 instead of faulting), which makes on_switch() read the precise clock. */
static __always_inline __u64 rq_clock_btf(struct task_struct *prev)
{
    if (!bpf_core_field_exists(prev->se.cfs_rq))
        return 0;
    return prev->se.cfs_rq->rq->clock;
}

SEC("tp_btf/sched_switch")
int BPF_PROG(kepler_switch_btf, bool preempt, struct task_struct *prev, struct task_struct *next)
{
    /* Typed arguments: plain loads, no bpf_probe_read_kernel() calls on the hottest path. */
    __u64 pid_tgid = ((__u64)prev->tgid << 32) | (__u32)prev->pid;
    return on_switch((__u64)prev, pid_tgid, prev->se.sum_exec_runtime, next->pid, rq_clock_btf(prev));
}

SEC("tp_btf/softirq_entry")
int BPF_PROG(kepler_softirq_btf, unsigned int vector)
{
    return on_softirq(vector);
}

SEC("tp_btf/mm_filemap_get_pages")
int BPF_PROG(kepler_pages_requested_btf, struct address_space *mapping, unsigned long index, unsigned long last)
{
    return on_pages_requested(index, last);
}

SEC("tp_btf/mm_filemap_add_to_page_cache")
int BPF_PROG(kepler_pages_added_btf, struct folio *folio)
{
    return on_pages_added(folio_pages(folio));
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(kepler_exit_btf)
{
    return on_exit();
}

SEC("tp_btf/sched_process_exec")
int BPF_PROG(kepler_exec_btf)
{
    return on_exec();
}

/* ---- raw_tp flavour ---------------------------------------------------------------------------- */

SEC("raw_tp/sched_switch")
int BPF_PROG(kepler_switch_raw, bool preempt, struct task_struct *prev, struct task_struct *next)
{
    return on_switch((__u64)prev, bpf_get_current_pid_tgid(), BPF_CORE_READ(prev, se.sum_exec_runtime),
                     BPF_CORE_READ(next, pid), 0);
}

SEC("raw_tp/softirq_entry")
int BPF_PROG(kepler_softirq_raw, unsigned int vector)
{
    return on_softirq(vector);
}

SEC("raw_tp/mm_filemap_get_pages")
int BPF_PROG(kepler_pages_requested_raw, struct address_space *mapping, unsigned long index, unsigned long last)
{
    return on_pages_requested(index, last);
}

SEC("raw_tp/mm_filemap_add_to_page_cache")
int BPF_PROG(kepler_pages_added_raw, struct folio *folio)
{
    return on_pages_added(folio_pages(folio));
}

SEC("raw_tp/sched_process_exit")
int BPF_PROG(kepler_exit_raw)
{
    return on_exit();
}

SEC("raw_tp/sched_process_exec")
int BPF_PROG(kepler_exec_raw)
{
    return on_exec();
}

/* ---- classic tracepoint flavour (needs tracefs for attaching) -------------------------------- */

SEC("tracepoint/sched/sched_switch")
int kepler_switch_tp(struct trace_event_raw_sched_switch *ctx)
{
    struct task_struct *prev = (struct task_struct *)bpf_get_current_task();
    return on_switch((__u64)prev, bpf_get_current_pid_tgid(), BPF_CORE_READ(prev, se.sum_exec_runtime),
                     ctx->next_pid, 0);
}

SEC("tracepoint/irq/softirq_entry")
int kepler_softirq_tp(struct trace_event_raw_softirq *ctx)
{
    return on_softirq(ctx->vec);
}

SEC("tracepoint/filemap/mm_filemap_get_pages")
int kepler_pages_requested_tp(struct trace_event_raw_mm_filemap_op_page_cache_range *ctx)
{
    return on_pages_requested(ctx->index, ctx->last_index);
}

SEC("tracepoint/filemap/mm_filemap_add_to_page_cache")
int kepler_pages_added_tp(struct trace_event_raw_mm_filemap_op_page_cache *ctx)
{
    __u64 order = 0;
    if (bpf_core_field_exists(ctx->order))
        order = BPF_CORE_READ(ctx, order);
    return on_pages_added(1ULL << (order & 31));
}

SEC("tracepoint/sched/sched_process_exit")
int kepler_exit_tp(void *ctx)
{
    return on_exit();
}

SEC("tracepoint/sched/sched_process_exec")
int kepler_exec_tp(void *ctx)
{
    return on_exec();
}
