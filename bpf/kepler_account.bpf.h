/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * kepler_account.bpf.h — the accounting behind the hooks of kepler.bpf.c: process and thread records,
 * slices, hardware counters, softirqs, page cache, exits. Included by kepler.bpf.c after its settings
 * and maps (one BPF object; split only so each file reads in one sitting). Everything here is
 * __always_inline: each hook flavour gets its own copy, with the flavour's cheapest reads.
 */
#ifndef KEPLER_ACCOUNT_BPF_H
#define KEPLER_ACCOUNT_BPF_H

/* Kernels before 5.5 named the boot-based start time real_start_time. */
struct task_struct___pre55 {
    u64 real_start_time;
} __attribute__((preserve_access_index));

/* Kernels 5.16–6.5 kept the large-folio order in its own byte; later ones in _flags_1's low byte. */
struct folio___pre66 {
    unsigned char _folio_order;
} __attribute__((preserve_access_index));

/* Orders the version stores around the fields they protect (the JIT emits stores in program order). */
#define compiler_barrier() asm volatile("" ::: "memory")

static __always_inline void count_drop(__u32 counter, __u64 amount)
{
    __u64 *value = bpf_map_lookup_elem(&drops, &counter);
    if (value)
        *value += amount; /* per-CPU slot: no other writer */
}

static __always_inline __u64 leader_start_ticks(struct task_struct *task)
{
    struct task_struct *leader = BPF_CORE_READ(task, group_leader);
    __u64 boot_ns;

    if (bpf_core_field_exists(leader->start_boottime))
        boot_ns = BPF_CORE_READ(leader, start_boottime);
    else
        boot_ns = BPF_CORE_READ((struct task_struct___pre55 *)leader, real_start_time);
    /* The kernel's nsec_to_clock_t() for /proc/<pid>/stat field 22: a truncating division. */
    return boot_ns / ns_per_tick;
}

static __always_inline void key_of(struct task_struct *task, __u32 tgid, struct kepler_proc_key *key)
{
    key->tgid = tgid;
    key->reserved = 0;
    key->start_ticks = leader_start_ticks(task);
}

/* Entry of the current task's process, created on first sight; NULL when the map is full (counted). */
static __always_inline struct kepler_proc_stats *current_stats(const struct kepler_proc_key *key)
{
    struct kepler_proc_stats *stats = bpf_map_lookup_elem(&processes, key);
    if (stats)
        return stats;

    struct task_struct *task = (struct task_struct *)bpf_get_current_task();
    struct kepler_proc_stats fresh = {};
    fresh.cgroup_id = bpf_get_current_cgroup_id();
    if (BPF_CORE_READ(task, flags) & PF_KTHREAD)
        fresh.flags |= KEPLER_STATS_KTHREAD;
    /* A process seen for the first time while its last thread is exiting is already gone. */
    if (BPF_CORE_READ(task, signal, live.counter) == 0)
        fresh.flags |= KEPLER_STATS_EXITED;
    BPF_CORE_READ_STR_INTO(&fresh.comm, task, group_leader, comm);

    long err = bpf_map_update_elem(&processes, key, &fresh, BPF_NOEXIST);
    if (err && err != -EEXIST) { /* -EEXIST: another CPU created it meanwhile, which is fine */
        count_drop(KEPLER_DROP_MAP_FULL, 1);
        return NULL;
    }
    return bpf_map_lookup_elem(&processes, key);
}

/* The current thread's record, created (with its process key and no runtime baseline yet) on first
 * sight; NULL only if the LRU map cannot take it. */
static __always_inline struct kepler_thread *current_thread(__u64 task_address, __u64 pid_tgid)
{
    struct kepler_thread *thread = bpf_map_lookup_elem(&threads, &task_address);
    if (thread && thread->tid == (__u32)pid_tgid)
        return thread;
    struct kepler_thread fresh = {.tid = (__u32)pid_tgid};
    key_of((struct task_struct *)task_address, pid_tgid >> 32, &fresh.proc);
    bpf_map_update_elem(&threads, &task_address, &fresh, BPF_ANY);
    return bpf_map_lookup_elem(&threads, &task_address);
}

/* The current process's key (via the thread record when there is one). */
static __always_inline void current_key(struct kepler_thread *thread, __u64 pid_tgid, struct kepler_proc_key *key)
{
    if (thread)
        *key = thread->proc;
    else
        key_of((struct task_struct *)bpf_get_current_task(), pid_tgid >> 32, key);
}

/* The current process's entry (via the thread record when there is one). */
static __always_inline struct kepler_proc_stats *stats_of(struct kepler_thread *thread, __u64 pid_tgid)
{
    struct kepler_proc_key key;
    current_key(thread, pid_tgid, &key);
    return current_stats(&key);
}

/* Reads one hardware counter on this CPU; *delta is its change since the last switch here. */
static __always_inline bool read_counter(void *map, __u32 index, struct kepler_cpu_state *cpu, __u64 *delta)
{
    struct bpf_perf_event_value value = {};
    __u32 bit = 1u << index;

    if (bpf_perf_event_read_value(map, BPF_F_CURRENT_CPU, &value, sizeof(value)) != 0) {
        cpu->hw_last_valid &= ~bit; /* -ENOENT: no event in this CPU's slot; "unavailable", not zero */
        return false;
    }
    bool had_start = cpu->hw_last_valid & bit;
    *delta = value.counter - cpu->hw_last[index & (KEPLER_HW_COUNTERS - 1)];
    cpu->hw_last[index & (KEPLER_HW_COUNTERS - 1)] = value.counter;
    cpu->hw_last_valid |= bit;
    return had_start;
}

static __always_inline void charge_counters(struct kepler_cpu_state *cpu, struct kepler_proc_stats *stats)
{
    __u64 delta = 0;

    if (read_counter(&hw_cycles, KEPLER_HW_CYCLES, cpu, &delta)) {
        if (stats) __sync_fetch_and_add(&stats->hw[KEPLER_HW_CYCLES], delta);
    } else if (stats) {
        __sync_fetch_and_add(&stats->hw_unavailable[KEPLER_HW_CYCLES], 1);
    }
    if (read_counter(&hw_instructions, KEPLER_HW_INSTRUCTIONS, cpu, &delta)) {
        if (stats) __sync_fetch_and_add(&stats->hw[KEPLER_HW_INSTRUCTIONS], delta);
    } else if (stats) {
        __sync_fetch_and_add(&stats->hw_unavailable[KEPLER_HW_INSTRUCTIONS], 1);
    }
    if (read_counter(&hw_cache_misses, KEPLER_HW_CACHE_MISSES, cpu, &delta)) {
        if (stats) __sync_fetch_and_add(&stats->hw[KEPLER_HW_CACHE_MISSES], delta);
    } else if (stats) {
        __sync_fetch_and_add(&stats->hw_unavailable[KEPLER_HW_CACHE_MISSES], 1);
    }
}

/* On-CPU ns of the current thread since its previous switch-out (see `threads`); `runtime` is its
 * se.sum_exec_runtime now (at sched_switch the scheduler has updated it for prev in put_prev_task). */
static __always_inline __u64 slice_of_current(struct kepler_cpu_state *cpu, struct kepler_thread *thread,
                                              __u32 tid, __u64 now, __u64 runtime)
{
    __u64 slice = 0;

    if (thread && thread->last_runtime != 0) {
        slice = runtime > thread->last_runtime ? runtime - thread->last_runtime : 0;
    } else if (cpu->running_since_ns != 0 && cpu->tid == tid && now > cpu->running_since_ns) {
        slice = now - cpu->running_since_ns; /* first switch-out seen: wall time since the switch-in */
    } else {
        count_drop(KEPLER_DROP_UNKNOWN_SLICE, 1); /* running since before load, or record lost */
    }
    if (thread)
        thread->last_runtime = runtime;
    return slice;
}

/* The boundary user space published last (see cut_boundary_ns in kepler.bpf.c). SYNC POINT: pairs with
 * BpfProgram::publish_boundary(), which stores it ahead of time and fences; `now` was read before this
 * load, so a charge at or after the boundary always sees it. */
static __always_inline __u64 current_boundary(void)
{
    return *(volatile __u64 *)&cut_boundary_ns;
}

/* The key of a process's cut mark for `boundary`: its process key with the boundary's parity. */
static __always_inline struct kepler_proc_key mark_key_of(const struct kepler_proc_key *key, __u64 boundary)
{
    struct kepler_proc_key slot = *key;
    slot.reserved = (__u32)(boundary & 1);
    return slot;
}

/*
 * Before the first charge of a process at or after `boundary`: store what it had before the boundary.
 * Two threads of one process may both be first on two CPUs. The mark is inserted, not replaced
 * (BPF_NOEXIST): the first insert wins, and its total was read before any charge after the boundary,
 * since every such charge comes after an insert (its own, or the failed insert that found the winner's).
 * A mark of an older boundary of the same parity (a boundary user space drew again because it published
 * the first one late, or one it has not deleted yet) is replaced, unless the hint says another thread
 * marked this boundary meanwhile. SYNC POINT: the mark is in the map before the charge is added to
 * cpu_time_ns, and user space reads `processes` before `cut_marks` (bpf_source.cpp), so a total that
 * holds a charge from after the boundary always comes with its mark.
 * A charge from before the boundary can still be added after the mark's total was read (a vCPU stalled
 * between its stamp and its add): the marker sees the total move after its store, or the late charger
 * sees the hint, and either counts KEPLER_DROP_CUT_LATE, so user space flags the frame. SYNC POINT: the
 * locked adds on `fence` order the marker's hint store before its second load of the total, and a
 * replacer's load of the total before its load of the hint, as the late charger's locked add on
 * cpu_time_ns orders its add before its load of the hint (charge_before()).
 */
static __always_inline void mark_boundary(struct kepler_proc_stats *stats, const struct kepler_proc_key *key,
                                          __u64 boundary, __u64 now)
{
    if (boundary == 0 || now < boundary || stats->marked_boundary_ns == boundary)
        return;
    struct kepler_proc_key slot = mark_key_of(key, boundary);
    struct kepler_cut_mark mark = {.boundary_ns = boundary};
    mark.cpu_time_ns = *(volatile __u64 *)&stats->cpu_time_ns;
    long err = bpf_map_update_elem(&cut_marks, &slot, &mark, BPF_NOEXIST);
    bool stored = err == 0;
    if (err == -EEXIST) {
        struct kepler_cut_mark *present = bpf_map_lookup_elem(&cut_marks, &slot);
        if (!present || present->boundary_ns != boundary) {
            __sync_fetch_and_add(&stats->fence, 0);
            if (*(volatile __u64 *)&stats->marked_boundary_ns != boundary) {
                err = bpf_map_update_elem(&cut_marks, &slot, &mark, BPF_ANY);
                stored = err == 0;
            } else {
                err = 0; /* another thread of this process marked this boundary meanwhile */
            }
        } else {
            err = 0; /* another thread of this process marked this boundary first */
        }
    }
    if (err) {
        count_drop(KEPLER_DROP_CUT_MARK, 1); /* map full: tried again at this process's next charge */
        return;
    }
    stats->marked_boundary_ns = boundary;
    if (stored) {
        __sync_fetch_and_add(&stats->fence, 0);
        if (*(volatile __u64 *)&stats->cpu_time_ns != mark.cpu_time_ns)
            count_drop(KEPLER_DROP_CUT_LATE, 1);
    }
}

/* Adds a slice that ended before `boundary` (or with no boundary yet). See mark_boundary(). */
static __always_inline void charge_before(struct kepler_proc_stats *stats, __u64 boundary, __u64 slice)
{
    __sync_fetch_and_add(&stats->cpu_time_ns, slice);
    if (boundary != 0 && *(volatile __u64 *)&stats->marked_boundary_ns == boundary)
        count_drop(KEPLER_DROP_CUT_LATE, 1);
}

/* Whether the slice ending now (started at the record's switch-in) began before `boundary` and ends at
 * or after it. */
static __always_inline bool slice_spans(const struct kepler_cpu_state *cpu, __u64 boundary, __u64 now)
{
    return boundary != 0 && now >= boundary && cpu->running_since_ns != 0 && cpu->running_since_ns < boundary;
}

/* The part before `boundary` of a spanning slice that ends `now`: wall time since the switch-in, which
 * never exceeds the slice (the scheduler's count of it), and at least what of the slice does not fit
 * after the boundary. The scheduler can count more than the stamps span: a switch that follows a
 * wakeup's preemption reuses the run queue's clock of the wakeup (the update is skipped), which a
 * stalled vCPU can leave milliseconds behind the precise stamp, and the task's runtime starts there. That
 * time lies before the switch-in, so before the boundary: the part after it stays within `now - boundary`
 * and no frame is credited more than its wall time. */
static __always_inline __u64 part_before_boundary(const struct kepler_cpu_state *cpu, __u64 boundary, __u64 now,
                                                  __u64 slice)
{
    __u64 before = boundary - cpu->running_since_ns;
    if (before > slice)
        before = slice;
    __u64 after_wall = now - boundary;
    if (slice - before > after_wall)
        before = slice - after_wall;
    return before;
}

/* The slice ending now spans `boundary`: keep its part before the boundary for user space (one such
 * slice per CPU and boundary). */
static __always_inline void record_spanning(struct kepler_cpu_state *cpu, const struct kepler_proc_key *key,
                                            __u32 tid, __u64 boundary, __u64 now, __u64 slice)
{
    if (cpu->tid != tid || !slice_spans(cpu, boundary, now))
        return;
    cpu->spanned_boundary_ns = boundary;
    cpu->spanned_before_ns = part_before_boundary(cpu, boundary, now, slice);
    cpu->spanned_process = *key;
}

/* Before the first task slice that ends on this CPU at or after `boundary`: store the CPU's task time as
 * it stood at the boundary, with the ending slice's part before it (0 when the record's slice is not
 * this thread's). */
static __always_inline void mark_cpu_task_time(struct kepler_cpu_state *cpu, __u64 boundary, __u64 now,
                                               __u64 slice)
{
    if (boundary == 0 || now < boundary || cpu->marked_boundary_ns == boundary)
        return;
    __u64 task = cpu->task_ns;
    if (slice_spans(cpu, boundary, now))
        task += part_before_boundary(cpu, boundary, now, slice);
    cpu->task_at_mark_ns = task;
    cpu->marked_boundary_ns = boundary;
}

/* Charges the current thread's slice to its process, cut at the boundary; returns the process entry
 * (NULL: map full). Called between begin_state_write() and end_state_write(). */
static __always_inline struct kepler_proc_stats *account_current(struct kepler_cpu_state *cpu, __u64 task_address,
                                                                 __u64 pid_tgid, __u64 now, __u64 runtime,
                                                                 __u64 boundary)
{
    struct kepler_thread *thread = current_thread(task_address, pid_tgid);
    struct kepler_proc_key key;
    current_key(thread, pid_tgid, &key);
    struct kepler_proc_stats *stats = current_stats(&key);
    __u64 slice = slice_of_current(cpu, thread, (__u32)pid_tgid, now, runtime);
    if (stats && (boundary == 0 || now < boundary)) {
        charge_before(stats, boundary, slice);
    } else if (stats) {
        mark_boundary(stats, &key, boundary, now);
        __sync_fetch_and_add(&stats->cpu_time_ns, slice);
    } else {
        count_drop(KEPLER_DROP_MAP_FULL_NS, slice);
    }
    record_spanning(cpu, &key, (__u32)pid_tgid, boundary, now, slice);
    /* The record's slice is this thread's only when it names it; else (a switch the tracepoint missed)
     * nothing of the record's slice is known and no part of it goes before the boundary. */
    mark_cpu_task_time(cpu, boundary, now, cpu->tid == (__u32)pid_tgid ? slice : 0);
    cpu->task_ns += slice;
    return stats;
}

/* Every change of this CPU's state happens between these two. SYNC POINT: pairs with
 * BpfSource::read_cpu_states() in bpf_source.cpp (version_end read first, version_begin last). */
static __always_inline __u64 begin_state_write(struct kepler_cpu_state *cpu)
{
    __u64 version = cpu->version_begin + 1;
    cpu->version_begin = version;
    compiler_barrier();
    return version;
}

static __always_inline void end_state_write(struct kepler_cpu_state *cpu, __u64 version)
{
    compiler_barrier();
    cpu->version_end = version;
}

/* Records who runs on this CPU from `now` on. */
static __always_inline void record_running(struct kepler_cpu_state *cpu, __u32 tid, __u64 now)
{
    cpu->running_since_ns = now;
    cpu->tid = tid;
}

/*
 * The time of this switch in bpf_ktime_get_ns() time. bpf_ktime_get_ns() costs about a third of this
 * program in a VM (~60 ns: a retpolined call to the clocksource), while __schedule() has just stamped the
 * switch with the CPU's scheduler clock (rq->clock, updated under the run-queue lock before it picks the
 * next task). So the rq clock is translated by an offset measured at precise reads (ktime - rq clock),
 * and the precise clock is read only
 *   - while a boundary is pending on this CPU (published, and no task slice has ended here after it):
 *     every "before or after the boundary" decision is then made on the precise clock, exactly as
 *     without the translation; later switches here are all after the boundary (a translated time is
 *     never taken below it);
 *   - when the last sample is older than KEPLER_CLOCK_SAMPLE_NS, or the last two samples disagree.
 * A sample is late by however long __schedule() took from its clock update to the tracepoint: ~1 µs
 * when it switches to a task, up to hundreds of µs when it switches to idle (it balances load first,
 * so those are not sampled), and milliseconds when the hypervisor stalls the vCPU in between. A
 * translation from one stalled sample would then stamp every switch late by that stall until the next
 * one (a first version that trusted one sample, withdrawn in cee906c, credited a CPU 1–5.5 ms more than
 * the interval under load). So a translation is trusted only when the last two samples agree within
 * KEPLER_CLOCK_AGREE_NS, and it is the smaller of them. The two clocks ran 0.06 ppm apart on the
 * development VM (sched_clk against ktime in /sys/kernel/debug/sched/debug, 20 s apart), so
 * two samples 10 ms apart agree to well under 1 µs; a clock being slewed fast (chrony corrects large
 * offsets at up to 8%) makes them disagree, and every switch then reads the precise clock. A translated
 * time is early by its own switch's lag (the scheduler's time of the switch, not the tracepoint's).
 */
#define KEPLER_CLOCK_SAMPLE_NS 10000000ULL /* a precise read at least every 10 ms per busy CPU */
#define KEPLER_CLOCK_AGREE_NS 5000LL

static __always_inline void sample_clock(struct kepler_cpu_state *cpu, __u64 rq_clock, __u64 now)
{
    __u64 offset = now - rq_clock; /* mod 2^64: the rq clock may be ahead of ktime */
    __s64 change = (__s64)(offset - cpu->clock_last_offset_ns);
    bool recent = cpu->clock_sampled_at_ns != 0 && rq_clock >= cpu->clock_sampled_at_ns &&
                  rq_clock - cpu->clock_sampled_at_ns <= 2 * KEPLER_CLOCK_SAMPLE_NS;
    cpu->clock_trusted = recent && change <= KEPLER_CLOCK_AGREE_NS && change >= -KEPLER_CLOCK_AGREE_NS;
    cpu->clock_offset_ns = change < 0 ? offset : cpu->clock_last_offset_ns;
    cpu->clock_last_offset_ns = offset;
    cpu->clock_sampled_at_ns = rq_clock;
}

#ifdef KEPLER_CUT_STATS
static __always_inline __u32 lag_bucket(__u64 ns)
{
    __u32 bucket = 0;
    for (int bit = 0; bit < KEPLER_LAG_BUCKETS - 1 && ns != 0; ++bit) {
        ++bucket;
        ns >>= 1;
    }
    return bucket < KEPLER_LAG_BUCKETS ? bucket : KEPLER_LAG_BUCKETS - 1;
}

/* How far the translated stamp of this switch lies from the precise clock (see struct kepler_cut_stats). */
static __always_inline void record_translation_lag(__u64 translated)
{
    __u32 zero = 0;
    struct kepler_cut_stats *stats = bpf_map_lookup_elem(&cut_stats, &zero);
    if (!stats)
        return;
    __u64 precise = bpf_ktime_get_ns();
    stats->translated++;
    if (translated <= precise) {
        __u64 lag = precise - translated;
        stats->early[lag_bucket(lag) & (KEPLER_LAG_BUCKETS - 1)]++;
        if (lag > stats->max_early_ns)
            stats->max_early_ns = lag;
    } else {
        __u64 lag = translated - precise;
        stats->late[lag_bucket(lag) & (KEPLER_LAG_BUCKETS - 1)]++;
        if (lag > stats->max_late_ns)
            stats->max_late_ns = lag;
    }
}
#endif

/* Whether this switch may be stamped with the translated rq clock (see sample_clock()). */
static __always_inline bool translation_usable(const struct kepler_cpu_state *cpu, __u64 rq_clock, __u64 boundary)
{
    bool boundary_pending = boundary != 0 && cpu->marked_boundary_ns != boundary;
    return !boundary_pending && rq_clock != 0 && cpu->clock_trusted && rq_clock >= cpu->clock_sampled_at_ns &&
           rq_clock - cpu->clock_sampled_at_ns < KEPLER_CLOCK_SAMPLE_NS;
}

/*
 * Where the scheduler starts counting next's time at a switch stamped with the precise clock `now`: the
 * run queue's clock, translated with the last trusted offset, where that is earlier. A switch after a
 * wakeup's preemption reuses the clock of the wakeup (the update is skipped), milliseconds behind when
 * the vCPU was stopped in between, and next's runtime starts there; a switch-in stamped `now` would leave
 * that gap out of next's part before a boundary and put it into its slice's part after it, above wall
 * time. Never before the switch-in it follows on this CPU, nor before a boundary this switch is after
 * (the time before that boundary went to prev).
 */
static __always_inline __u64 scheduler_start(const struct kepler_cpu_state *cpu, __u64 rq_clock, __u64 now,
                                             __u64 boundary)
{
    if (rq_clock == 0 || !cpu->clock_trusted || rq_clock < cpu->clock_sampled_at_ns ||
        rq_clock - cpu->clock_sampled_at_ns >= 2 * KEPLER_CLOCK_SAMPLE_NS)
        return now;
    __u64 start = rq_clock + cpu->clock_offset_ns;
    if (start >= now)
        return now;
    if (start < cpu->running_since_ns)
        start = cpu->running_since_ns;
    if (boundary != 0 && now >= boundary && start < boundary)
        start = boundary;
    return start;
}

/* prev is current: its task_struct's address, its tgid << 32 | pid and its se.sum_exec_runtime, each
 * read by the flavour the cheapest way it can (from typed arguments; bpf_get_current_pid_tgid() and
 * bpf_get_current_task() are calls that cost ~20 ns each); next_tid is the thread switched to (0: this
 * CPU's idle task); rq_clock is this CPU's scheduler clock at this switch (0 where the flavour cannot
 * read it cheaply: every switch then reads the precise clock). */
static __always_inline int on_switch(__u64 prev_address, __u64 pid_tgid, __u64 prev_runtime, __u32 next_tid,
                                     __u64 rq_clock)
{
    __u32 zero = 0;
    struct kepler_cpu_state *cpu = bpf_map_lookup_elem(&cpu_states, &zero);
    if (!cpu)
        return 0;
    struct kepler_proc_stats *stats = NULL;
    __u64 version = begin_state_write(cpu);
    __u64 boundary = current_boundary();
    __u64 now, next_start;
    if (translation_usable(cpu, rq_clock, boundary)) {
        /* This CPU has marked `boundary`, so the switch is after it. SYNC POINT (draw_boundary() in
         * bpf_source.cpp): a later boundary is published at least 500 µs ahead, and a translated time
         * is late by the smaller lag of two agreeing samples (µs), so it stays before a boundary that
         * this switch did not see. */
        now = rq_clock + cpu->clock_offset_ns;
#ifdef KEPLER_CUT_STATS
        record_translation_lag(now);
#endif
        if (now < boundary)
            now = boundary;
        next_start = now;
        cpu->clock_translated++;
    } else {
        now = bpf_ktime_get_ns();
        boundary = current_boundary(); /* again, after `now`: see current_boundary() */
        next_start = scheduler_start(cpu, rq_clock, now, boundary); /* before this switch's own sample */
        if (rq_clock != 0 && next_tid != 0) /* switching to idle may balance load first: no sample */
            sample_clock(cpu, rq_clock, now);
    }

    if ((pid_tgid >> 32) != 0) /* tgid 0: the idle task, not a process */
        /* prev's slice ends where next's starts: at or after `boundary` exactly when `now` is. */
        stats = account_current(cpu, prev_address, pid_tgid, next_start, prev_runtime, boundary);
    if (hw_counters_enabled)
        charge_counters(cpu, stats);
    record_running(cpu, next_tid, next_start);
    end_state_write(cpu, version);
    return 0;
}

static __always_inline struct kepler_proc_stats *stats_of_current(void)
{
    __u64 pid_tgid = bpf_get_current_pid_tgid();
    if ((pid_tgid >> 32) == 0)
        return NULL; /* idle: softirqs on an idle CPU belong to no process */
    return stats_of(current_thread(bpf_get_current_task(), pid_tgid), pid_tgid);
}

static __always_inline int on_softirq(__u32 vector)
{
    if (vector >= KEPLER_SOFTIRQ_VECTORS)
        return 0;
    struct kepler_proc_stats *stats = stats_of_current();
    if (stats)
        __sync_fetch_and_add(&stats->softirq[vector], 1);
    return 0;
}

static __always_inline int on_pages_requested(unsigned long first, unsigned long last)
{
    if (last < first)
        return 0;
    struct kepler_proc_stats *stats = stats_of_current();
    if (stats)
        __sync_fetch_and_add(&stats->page_cache_requested, last - first + 1); /* last is inclusive */
    return 0;
}

static __always_inline int on_pages_added(__u64 pages)
{
    struct kepler_proc_stats *stats = stats_of_current();
    if (stats)
        __sync_fetch_and_add(&stats->page_cache_added, pages);
    return 0;
}

static __always_inline __u64 folio_pages(struct folio *folio)
{
    unsigned long page_flags = 0;
    __u64 order;

    /* The page flags word is the first member of struct page and struct folio in every layout. */
    bpf_probe_read_kernel(&page_flags, sizeof(page_flags), folio);
    if (!(page_flags & (1UL << bpf_core_enum_value(enum pageflags, PG_head))))
        return 1;
    if (bpf_core_field_exists(((struct folio___pre66 *)folio)->_folio_order))
        order = BPF_CORE_READ((struct folio___pre66 *)folio, _folio_order);
    else if (bpf_core_field_exists(folio->_flags_1))
        order = BPF_CORE_READ(folio, _flags_1) & 0xff;
    else
        order = 0;
    return 1ULL << (order & 31);
}

static __always_inline int on_exit(void)
{
    struct task_struct *task = (struct task_struct *)bpf_get_current_task();
    if (BPF_CORE_READ(task, signal, live.counter) != 0)
        return 0; /* other threads of the group still run */
    struct kepler_proc_stats *stats = stats_of_current();
    if (stats)
        stats->flags |= KEPLER_STATS_EXITED; /* only ever set; user space deletes the entry later */
    return 0;
}

static __always_inline int on_exec(void)
{
    struct kepler_proc_stats *stats = stats_of_current();
    if (!stats)
        return 0;
    bpf_get_current_comm(&stats->comm, sizeof(stats->comm)); /* the exec'ing thread is now the leader */
    stats->cgroup_id = bpf_get_current_cgroup_id();          /* runtimes place a container before exec */
    return 0;
}

#endif /* KEPLER_ACCOUNT_BPF_H */
