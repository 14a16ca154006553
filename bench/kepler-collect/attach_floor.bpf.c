// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* attach_floor.bpf.c — an empty sched_switch program: what any program on the tracepoint costs here
 * (the kernel's dispatch to it, and bpf_stats' own clock reads when those are on). bpf_cost.sh measures
 * it beside kepler's program so that the program's own part of the cost can be told apart. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

char LICENSE[] SEC("license") = "Dual BSD/GPL";

SEC("tp_btf/sched_switch")
int BPF_PROG(kepler_floor_switch, bool preempt, struct task_struct *prev, struct task_struct *next)
{
    return 0;
}
