/*
 * keplershm_layout.h — the byte layout of keplershm segments and recordings: constants, enums, records,
 * the segment header and the recording format (every offset asserted in keplershm_layout_checks.h,
 * which it includes). Included by keplershm.h; this file is the single definition of the layout. The
 * C++ API, the field schema published in every segment (generated from this file at build time by
 * tools/gen_schema.py) and the Python bindings all derive from it. PROTOCOL.md describes the same
 * layout normatively.
 *
 * Segment (POSIX shared memory object, /dev/shm/<name>), all integers little-endian, native x86_64/arm64:
 *
 *   offset                      size                          content
 *   0                           header_size (4096 in 1.x)     struct keplershm_header
 *   schema_offset               schema_count * 64             struct keplershm_field[] (field schema)
 *   slots_offset (page aligned) slot_count * slot_size        ring of slots
 *
 * Slot i (frame n lives in slot n % slot_count; frame numbers start at 1):
 *   0                           64                            struct keplershm_slot_control (sequence word)
 *   64                          slot_size - 64                frame bytes
 *
 * Frame (offsets relative to the frame start, i.e. slot start + 64):
 *   0                           frame_header_size (256)       struct keplershm_frame
 *   frame_header_size           section_count * 16            struct keplershm_section[] (directory)
 *   section.offset              section.count * section.stride records of one section
 *
 * struct keplershm_header (4096 bytes in every 1.x)
 *   off  size  field                         off  size  field
 *   0    8     magic "KEPLSHM\0"             160  8     metric_mask
 *   8    2     abi_major                     168  4     cpu_count
 *   10   2     abi_minor                     172  4     zone_count
 *   12   4     header_size                   176  4     clock_ticks_per_second
 *   16   8     segment_size                  180  4     reserved0
 *   24   8     generation                    184  8     boot_time_realtime_ns
 *   32   8     writer_start_realtime_ns      192  256   node_name
 *   40   8     writer_start_monotonic_ns     448  128   cpu_model
 *   48   8     heartbeat_period_ns           576  2048  zones[32] (struct keplershm_zone_info)
 *   56   4     segment_kind                  2624 8     first_sequence
 *   60   4     writer_version                2632 64    platform_meter_id (1.3)
 *                                               2696 4     gpu_device_capacity (1.4)
 *                                               2700 4     gpu_usage_capacity (1.4)
 *                                               2704 1136  reserved (zero)
 *   64   4     slot_count                    3840 64    control line: state, overhead, producer stats
 *   68   4     frame_header_size             3904 64    heartbeat line:
 *   72   8     slot_size                       3904 8   heartbeat_ns (CLOCK_MONOTONIC, for 1.0 readers)
 *   80   8     slots_offset                    3912 8   heartbeat_count (1.1: liveness is its progress)
 *   88   4     section_entry_size              3920 8   heartbeat_realtime_ns (1.1: for people and logs)
 *   92   4     process_record_size             3928 40  reserved (zero)
 *   96   4     workload_record_size          3968 64    publish line: futex word, latest sequence
 *   100  4     zone_record_size              4032 64    reserved (zero)
 *   104  4     cpu_record_size
 *   108  4     unaccounted_record_size
 *   112  4     process_capacity
 *   116  4     workload_capacity
 *   120  4     zone_capacity
 *   124  4     cpu_capacity
 *   128  4     string_capacity
 *   132  4     max_sections
 *   136  8     schema_offset
 *   144  4     schema_count
 *   148  4     schema_entry_size
 *   152  8     max_segment_bytes
 *   (92-108 are record sizes: readers step by these, never by sizeof)
 *
 * Ordering (PROTOCOL.md "Seqlock"): the writer stores KEPLERSHM_SEQ_WRITING(n) into the slot, issues a
 * release fence, writes the frame, then store-releases KEPLERSHM_SEQ_PUBLISHED(n). A reader load-acquires
 * the sequence, reads the frame, issues an acquire fence and reloads the sequence: equal and published
 * means the bytes it read are frame n, whole.
 *
 * Liveness (PROTOCOL.md §1.3): the writer advances heartbeat_count at least every heartbeat_period_ns. A
 * reader calls an ACTIVE writer stale once it has seen neither heartbeat_count nor heartbeat_ns change for
 * its timeout, measured on its own CLOCK_MONOTONIC from when it began watching. Heartbeat values are only
 * compared with earlier values, never with the reader's clock: writer and reader may sit in different
 * time namespaces, boots or machines.
 * ------------------------------------------------------------------------------------------------
 */
#ifndef KEPLERSHM_LAYOUT_H
#define KEPLERSHM_LAYOUT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------------------------- */
/* Versions and constants                                                                          */
/* ---------------------------------------------------------------------------------------------- */

#define KEPLERSHM_ABI_MAJOR 1
/* Minor 1: heartbeat_count and heartbeat_realtime_ns on the heartbeat line; liveness is judged from the
 * progress of the heartbeat on each reader's own clock (PROTOCOL.md §1.3). */
/* Minor 2: runtime values for VMMs run without libvirt. Minor 3: platform meters (BMC over Redfish, PMBus
 * power supplies), zone sample flags INTEGRATED and STALE, zone_info.meter_detail and the header's
 * platform_meter_id (PROTOCOL.md §9). Minor 4: GPUs — sections GPU_DEVICES (each GPU and MIG instance, its
 * facts and state this interval) and GPU_USAGE (per process and device: engine time, memory), with their
 * capacities in the header (PROTOCOL.md §10). */
#define KEPLERSHM_ABI_MINOR 5
/* Readers accept this major and the one before it (none before 1). */
#define KEPLERSHM_ABI_OLDEST_MAJOR 1

#define KEPLERSHM_MAGIC 0x004d48534c50454bULL           /* bytes "KEPLSHM\0" read as a little-endian u64 */
#define KEPLERSHM_RECORDING_MAGIC 0x314345524c50454bULL /* bytes "KEPLREC1" */

#define KEPLERSHM_CACHE_LINE 64u
#define KEPLERSHM_HEADER_SIZE 4096u
#define KEPLERSHM_SLOT_CONTROL_SIZE 64u
#define KEPLERSHM_MAX_ZONES 32u
#define KEPLERSHM_NODE_NAME_LEN 256u
#define KEPLERSHM_CPU_MODEL_LEN 128u
#define KEPLERSHM_COMM_LEN 16u
#define KEPLERSHM_SOFTIRQ_VECTORS 10u
#define KEPLERSHM_NO_WORKLOAD 0xffffffffu

/* A slot's sequence word: 0 = never written; odd = frame n being written; even = frame n published. */
#define KEPLERSHM_SEQ_WRITING(n) (2u * (uint64_t)(n) + 1u)
#define KEPLERSHM_SEQ_PUBLISHED(n) (2u * (uint64_t)(n) + 2u)

enum keplershm_segment_kind {
    KEPLERSHM_SEGMENT_FRAMES = 1,    /* collector frames */
    KEPLERSHM_SEGMENT_ESTIMATES = 2, /* per-frame answers of an external model (see PROTOCOL.md) */
};

enum keplershm_writer_state {
    KEPLERSHM_STATE_INITIALIZING = 0,
    KEPLERSHM_STATE_ACTIVE = 1,
    KEPLERSHM_STATE_RETIRED = 2,  /* clean stop: no more frames will come */
    KEPLERSHM_STATE_REPLACED = 3, /* a newer generation took the name (restart or growth) */
};

/* Which per-process metrics a node produces (header.metric_mask) and a frame carries (frame.metric_mask). */
enum keplershm_metric {
    KEPLERSHM_METRIC_CPU_TIME = 1u << 0,
    KEPLERSHM_METRIC_CYCLES = 1u << 1,
    KEPLERSHM_METRIC_INSTRUCTIONS = 1u << 2,
    KEPLERSHM_METRIC_CACHE_MISSES = 1u << 3,
    KEPLERSHM_METRIC_PAGE_CACHE = 1u << 4,
    KEPLERSHM_METRIC_SOFTIRQ = 1u << 5,
    KEPLERSHM_METRIC_NODE_CPU = 1u << 6,
    KEPLERSHM_METRIC_ENERGY = 1u << 7,
};

enum keplershm_section_id {
    KEPLERSHM_SECTION_PROCESSES = 1,
    KEPLERSHM_SECTION_WORKLOADS = 2,
    KEPLERSHM_SECTION_ZONES = 3,
    KEPLERSHM_SECTION_CPUS = 4,
    KEPLERSHM_SECTION_STRINGS = 5,     /* stride 1, count = bytes used */
    KEPLERSHM_SECTION_UNACCOUNTED = 6, /* exactly one record */
    KEPLERSHM_SECTION_ESTIMATES = 7,   /* estimates segments only */
    /* 1.4 */
    KEPLERSHM_SECTION_GPU_DEVICES = 8, /* struct keplershm_gpu_device: every GPU and MIG instance */
    KEPLERSHM_SECTION_GPU_USAGE = 9,   /* struct keplershm_gpu_usage: per (process, device) */
};
#define KEPLERSHM_MAX_SECTIONS 16u

enum keplershm_source {
    KEPLERSHM_SOURCE_NONE = 0,
    KEPLERSHM_SOURCE_PROCFS = 1,
    KEPLERSHM_SOURCE_BPF = 2,
    KEPLERSHM_SOURCE_SYNTHETIC = 3, /* test and benchmark writers */
};

enum keplershm_power_source {
    KEPLERSHM_POWER_NONE = 0, /* no measured power: estimators must model it */
    KEPLERSHM_POWER_RAPL = 1,
    KEPLERSHM_POWER_HWMON = 2,
    KEPLERSHM_POWER_ACPI = 3,
    /* 1.3 */
    KEPLERSHM_POWER_REDFISH = 4, /* the node's BMC over Redfish (header.platform_meter_id names it) */
    KEPLERSHM_POWER_PMBUS = 5,   /* a power supply's own meter (hwmon pmbus and PSU drivers) */
    /* 1.4 */
    KEPLERSHM_POWER_NVML = 6,    /* an NVIDIA GPU's own meter, through NVML */
};

/* 1.3: what a zone's reading is, where the meter tells more than its kind (0: not said). */
enum keplershm_meter_detail {
    KEPLERSHM_METER_DETAIL_NONE = 0,
    KEPLERSHM_METER_POWER_SUPPLY = 1,  /* a power supply's input (wall side): Redfish PowerSupply, PMBus */
    KEPLERSHM_METER_POWER_CONTROL = 2, /* a chassis's consumed power: Redfish Power/PowerControl */
    KEPLERSHM_METER_POWER_METER = 3,   /* an ACPI power meter (whole platform) */
};

enum keplershm_frame_flag {
    KEPLERSHM_FRAME_TRUNCATED = 1u << 0,      /* more processes than capacity; rest is in unaccounted */
    KEPLERSHM_FRAME_FIRST = 1u << 1,          /* first frame of this generation: deltas since writer start */
    KEPLERSHM_FRAME_WORKLOADS_TRUNCATED = 1u << 2,
    KEPLERSHM_FRAME_STRINGS_TRUNCATED = 1u << 3,
    /* 1.5: the processes' CPU time may be cut off by a slice at this frame's end (unaccounted.inexact_cuts) */
    KEPLERSHM_FRAME_CUT_INEXACT = 1u << 4,
};

enum keplershm_process_flag {
    KEPLERSHM_PROC_CYCLES_VALID = 1u << 0,
    KEPLERSHM_PROC_INSTRUCTIONS_VALID = 1u << 1,
    KEPLERSHM_PROC_CACHE_MISSES_VALID = 1u << 2,
    KEPLERSHM_PROC_PAGE_CACHE_VALID = 1u << 3,
    KEPLERSHM_PROC_SOFTIRQ_VALID = 1u << 4,
    KEPLERSHM_PROC_EXITED = 1u << 5, /* the process ended during this interval */
    KEPLERSHM_PROC_NEW = 1u << 6,    /* first frame in which this (pid, start time) appears */
    KEPLERSHM_PROC_KERNEL = 1u << 7, /* kernel thread */
};

enum keplershm_cpu_sample_flag {
    /* The source does not measure per CPU: each record holds an equal share of the node's time (sums
     * over CPUs are exact, the split between them is not a measurement). */
    KEPLERSHM_CPU_NODE_SHARE = 1u << 0,
};

enum keplershm_zone_kind {
    KEPLERSHM_ZONE_PACKAGE = 1,
    KEPLERSHM_ZONE_CORE = 2,
    KEPLERSHM_ZONE_UNCORE = 3,
    KEPLERSHM_ZONE_DRAM = 4,
    KEPLERSHM_ZONE_PSYS = 5,     /* whole platform (RAPL psys) */
    KEPLERSHM_ZONE_PLATFORM = 6, /* whole platform, wall side (ACPI meter, PSU input, BMC); never added to
                                    the other kinds, which it contains */
    KEPLERSHM_ZONE_GPU = 7,
    KEPLERSHM_ZONE_OTHER = 8,    /* a meter of a part the writer cannot name: published, in no total */
};

enum keplershm_zone_sample_flag {
    KEPLERSHM_ZONE_VALID = 1u << 0,   /* read succeeded this interval */
    KEPLERSHM_ZONE_WRAPPED = 1u << 1, /* the raw counter wrapped during this interval (corrected) */
    /* 1.3 */
    KEPLERSHM_ZONE_INTEGRATED = 1u << 2, /* energy is power integrated between reading times, not a counter */
    KEPLERSHM_ZONE_STALE = 1u << 3,      /* the meter's newest reading is older than its stated age: not VALID */
};

/* 1.4: who made a GPU. */
enum keplershm_gpu_vendor {
    KEPLERSHM_GPU_VENDOR_UNKNOWN = 0,
    KEPLERSHM_GPU_NVIDIA = 1, /* through NVML */
    KEPLERSHM_GPU_AMD = 2,    /* through the kernel (amdgpu hwmon, DRM fdinfo) */
    KEPLERSHM_GPU_INTEL = 3,  /* through the kernel (i915/xe hwmon, DRM fdinfo) */
};

/* 1.4: a GPU device record's state this interval. */
enum keplershm_gpu_device_flag {
    KEPLERSHM_GPU_MIG_ENABLED = 1u << 0,  /* a physical GPU partitioned into MIG instances */
    KEPLERSHM_GPU_MIG_INSTANCE = 1u << 1, /* a MIG instance: `parent` is its GPU's record */
    KEPLERSHM_GPU_LOST = 1u << 2,         /* unreachable this interval (fell off the bus, driver gone) */
    KEPLERSHM_GPU_USAGE_VALID = 1u << 3,  /* its per-process usage was read this interval: the GPU_USAGE
                                             records of this device are all of its users */
    KEPLERSHM_GPU_ACTIVE_VALID = 1u << 4, /* active_ns is measured */
};

/* 1.4: what a GPU usage record holds. */
enum keplershm_gpu_usage_flag {
    KEPLERSHM_GPU_USE_COMPUTE = 1u << 0,    /* runs a compute context on the device */
    KEPLERSHM_GPU_USE_GRAPHICS = 1u << 1,   /* runs a graphics context on the device */
    KEPLERSHM_GPU_USE_BUSY_VALID = 1u << 2, /* busy_ns is measured (else the process was only seen running) */
};

enum keplershm_workload_kind {
    KEPLERSHM_WORKLOAD_SYSTEM = 1,    /* host process outside any container */
    KEPLERSHM_WORKLOAD_CONTAINER = 2, /* container outside Kubernetes */
    KEPLERSHM_WORKLOAD_POD = 3,       /* container in a Kubernetes pod */
    KEPLERSHM_WORKLOAD_VM = 4,        /* libvirt / qemu virtual machine */
    KEPLERSHM_WORKLOAD_KERNEL = 5,    /* kernel threads */
};

enum keplershm_runtime {
    KEPLERSHM_RUNTIME_UNKNOWN = 0,
    KEPLERSHM_RUNTIME_DOCKER = 1,
    KEPLERSHM_RUNTIME_CONTAINERD = 2,
    KEPLERSHM_RUNTIME_CRIO = 3,
    KEPLERSHM_RUNTIME_PODMAN = 4,
    KEPLERSHM_RUNTIME_LIBVIRT = 5,
    /* 1.2: the VMMs that run one process per VM, named from that process's command line */
    KEPLERSHM_RUNTIME_QEMU = 6,             /* QEMU (KVM or TCG) started without libvirt */
    KEPLERSHM_RUNTIME_XEN = 7,              /* QEMU as Xen's device model (-xen-domid) */
    KEPLERSHM_RUNTIME_FIRECRACKER = 8,
    KEPLERSHM_RUNTIME_CLOUD_HYPERVISOR = 9,
    KEPLERSHM_RUNTIME_VIRTUALBOX = 10,
    KEPLERSHM_RUNTIME_VMWARE = 11,
};

/* ---------------------------------------------------------------------------------------------- */
/* Records                                                                                         */
/* Fields are annotated `unit: X` for the generated schema; `reserved*` fields are zero.          */
/* ---------------------------------------------------------------------------------------------- */

struct keplershm_zone_info {            /* 64 bytes, in the header */
    char name[32];                      /* unit: text  e.g. "package-0", "dram-0", "psys", "hwmon0" */
    uint32_t kind;                      /* unit: enum  enum keplershm_zone_kind */
    uint32_t socket;                    /* unit: index */
    uint32_t power_source;              /* unit: enum  enum keplershm_power_source */
    uint32_t meter_detail;              /* unit: enum  enum keplershm_meter_detail (1.3; 0 before) */
    uint64_t max_energy_range_uj;       /* unit: uJ  0 when unknown */
    uint64_t reserved1;                 /* unit: none */
};

struct keplershm_process {              /* 192 bytes in ABI 1.0 */
    uint32_t pid;                       /* unit: id */
    uint32_t tgid;                      /* unit: id */
    uint64_t start_time_ticks;          /* unit: ticks  /proc/<pid>/stat field 22, clock ticks since boot */
    uint64_t cgroup_id;                 /* unit: id  cgroup v2 inode number (or v1 cpu controller) */
    uint32_t workload_index;            /* unit: index  into the WORKLOADS section, or KEPLERSHM_NO_WORKLOAD */
    uint32_t flags;                     /* unit: flags  enum keplershm_process_flag */
    char comm[16];                      /* unit: text */
    uint64_t cpu_time_ns;               /* unit: ns  on-CPU time in this interval */
    uint64_t cycles;                    /* unit: count  valid with KEPLERSHM_PROC_CYCLES_VALID */
    uint64_t instructions;              /* unit: count */
    uint64_t cache_misses;              /* unit: count  last-level cache misses */
    uint64_t page_cache_hits;           /* unit: pages */
    uint64_t page_cache_misses;         /* unit: pages  pages added to the page cache */
    uint64_t softirq[10];               /* unit: count  per vector: HI TIMER NET_TX NET_RX BLOCK IRQ_POLL TASKLET SCHED HRTIMER RCU */
    uint64_t reserved[2];               /* unit: none */
};

struct keplershm_workload {             /* 768 bytes in ABI 1.0 */
    uint32_t kind;                      /* unit: enum  enum keplershm_workload_kind */
    uint32_t runtime;                   /* unit: enum  enum keplershm_runtime */
    uint64_t cgroup_id;                 /* unit: id */
    char container_id[80];              /* unit: text */
    char container_name[64];            /* unit: text */
    char pod_uid[48];                   /* unit: text */
    char pod_name[256];                 /* unit: text */
    char pod_namespace[64];             /* unit: text */
    char vm_id[64];                     /* unit: text */
    char vm_name[128];                  /* unit: text */
    uint32_t cgroup_path_offset;        /* unit: offset  into the STRINGS section */
    uint32_t cgroup_path_length;        /* unit: bytes */
    uint64_t reserved[5];               /* unit: none */
};

struct keplershm_zone_sample {          /* 40 bytes in ABI 1.0 */
    uint32_t zone_index;                /* unit: index  into header.zones */
    uint32_t flags;                     /* unit: flags  enum keplershm_zone_sample_flag */
    uint64_t read_time_ns;              /* unit: ns  CLOCK_MONOTONIC when this zone was read */
    uint64_t energy_total_uj;           /* unit: uJ  cumulative since writer start, wrap-corrected */
    uint64_t energy_delta_uj;           /* unit: uJ  this interval */
    uint64_t reserved;                  /* unit: none */
};

struct keplershm_cpu_sample {           /* 80 bytes in ABI 1.0, deltas over the interval */
    uint32_t cpu;                       /* unit: index */
    uint32_t flags;                     /* unit: flags  enum keplershm_cpu_sample_flag */
    uint64_t user_ns;                   /* unit: ns */
    uint64_t nice_ns;                   /* unit: ns */
    uint64_t system_ns;                 /* unit: ns */
    uint64_t idle_ns;                   /* unit: ns */
    uint64_t iowait_ns;                 /* unit: ns */
    uint64_t irq_ns;                    /* unit: ns */
    uint64_t softirq_ns;                /* unit: ns */
    uint64_t steal_ns;                  /* unit: ns */
    uint64_t reserved;                  /* unit: none */
};

struct keplershm_unaccounted {          /* 64 bytes in ABI 1.0 */
    uint64_t cpu_time_ns;               /* unit: ns  node busy time that no process record explains */
    uint64_t truncated_processes;       /* unit: count  processes left out for capacity */
    uint64_t truncated_cpu_time_ns;     /* unit: ns  their CPU time (included in cpu_time_ns) */
    uint64_t dropped_entries;           /* unit: count  entries the source could not store (BPF map full) */
    uint64_t exited_processes;          /* unit: count  processes that exited in the interval */
    uint64_t inexact_cuts;              /* unit: count  1.5: places the cut at the interval's end may be off by a slice */
    uint64_t reserved[2];               /* unit: none */
};

struct keplershm_section {              /* 16 bytes */
    uint32_t id;                        /* unit: enum  enum keplershm_section_id */
    uint32_t stride;                    /* unit: bytes  record size */
    uint32_t offset;                    /* unit: bytes  from the frame start */
    uint32_t count;                     /* unit: count */
};

struct keplershm_frame {                /* 256 bytes in ABI 1.0 */
    uint64_t sequence;                  /* unit: count  frame number, from 1 */
    uint64_t generation;                /* unit: id  copy of header.generation */
    uint64_t interval_start_ns;         /* unit: ns  CLOCK_MONOTONIC */
    uint64_t interval_end_ns;           /* unit: ns  CLOCK_MONOTONIC */
    uint64_t interval_start_realtime_ns;/* unit: ns  CLOCK_REALTIME */
    uint64_t interval_end_realtime_ns;  /* unit: ns  CLOCK_REALTIME */
    uint64_t process_read_time_ns;      /* unit: ns  CLOCK_MONOTONIC when per-process data was read */
    uint64_t metric_mask;               /* unit: flags  enum keplershm_metric valid in this frame */
    uint32_t flags;                     /* unit: flags  enum keplershm_frame_flag */
    uint32_t source;                    /* unit: enum  enum keplershm_source */
    uint32_t power_source;              /* unit: enum  enum keplershm_power_source */
    uint32_t section_count;             /* unit: count */
    uint32_t frame_size;                /* unit: bytes  used bytes of this frame */
    uint32_t processes_seen;            /* unit: count  processes in the interval, before truncation */
    uint64_t producer_sequence;         /* unit: count  estimates: collector frame sequence answered */
    uint64_t producer_generation;       /* unit: id  estimates: collector generation answered */
    uint64_t reserved[19];              /* unit: none */
};

/* 1.4: a GPU or a MIG instance (section GPU_DEVICES; the same devices in the same order in every frame of
 * a generation). Its energy is the GPU zone `zone_index` (MIG instances share their GPU's zone). */
struct keplershm_gpu_device {           /* 256 bytes in ABI 1.4 */
    uint32_t zone_index;                /* unit: index  into header.zones: the GPU's energy zone, or 0xffffffff */
    uint32_t vendor;                    /* unit: enum  enum keplershm_gpu_vendor */
    uint32_t device_index;              /* unit: index  the vendor's index (NVML index, DRM card number) */
    uint32_t flags;                     /* unit: flags  enum keplershm_gpu_device_flag */
    uint32_t parent;                    /* unit: index  a MIG instance's GPU record, else 0xffffffff */
    uint32_t gpu_instance_id;           /* unit: id  MIG GPU instance, else 0xffffffff */
    uint32_t compute_instance_id;       /* unit: id  MIG compute instance, else 0xffffffff */
    uint32_t reserved0;                 /* unit: none */
    uint64_t power_limit_mw;            /* unit: mW  enforced power limit, 0 when unknown */
    uint64_t active_ns;                 /* unit: ns  engine-busy time in this interval (KEPLERSHM_GPU_ACTIVE_VALID) */
    uint64_t memory_used_bytes;         /* unit: bytes  held by its processes at read time */
    char uuid[96];                      /* unit: text  e.g. "GPU-6a1b2c3d-...", "MIG-..." */
    char name[64];                      /* unit: text  product name, e.g. "NVIDIA H100 80GB HBM3" */
    char pci_bus_id[32];                /* unit: text  domain:bus:device.function */
    uint64_t reserved[1];               /* unit: none */
};

/* 1.4: one process's use of one GPU device in the interval (section GPU_USAGE). */
struct keplershm_gpu_usage {            /* 64 bytes in ABI 1.4 */
    uint32_t pid;                       /* unit: id  thread-group id */
    uint32_t device;                    /* unit: index  into this frame's GPU_DEVICES records */
    uint64_t start_time_ticks;          /* unit: ticks  with pid, the process's key; 0 when not resolved */
    uint32_t process_index;             /* unit: index  into this frame's PROCESSES, or 0xffffffff */
    uint32_t flags;                     /* unit: flags  enum keplershm_gpu_usage_flag */
    uint64_t busy_ns;                   /* unit: ns  engine time in the interval (NVML: SM share x sample period) */
    uint64_t memory_bytes;              /* unit: bytes  GPU memory it holds at read time */
    uint64_t reserved[3];               /* unit: none */
};

/* Per-frame answer of an external model (segment_kind == ESTIMATES, section ESTIMATES). */
struct keplershm_estimate {             /* 64 bytes in ABI 1.0 */
    uint32_t zone_index;                /* unit: index  into header.zones, or 0xffffffff for the node */
    uint32_t workload_index;            /* unit: index  into the answered frame's workloads, or 0xffffffff */
    uint32_t pid;                       /* unit: id  0 for node/workload rows */
    uint32_t flags;                     /* unit: flags */
    uint64_t start_time_ticks;          /* unit: ticks */
    double power_watts;                 /* unit: W */
    double energy_joules;               /* unit: J  over the answered interval */
    uint64_t reserved[3];               /* unit: none */
};

struct keplershm_slot_control {         /* 64 bytes: the sequence word alone on its cache line */
    uint64_t sequence;                  /* unit: count  see KEPLERSHM_SEQ_* */
    uint64_t reserved[7];               /* unit: none */
};

/* Field schema entry, one per field of each record type (generated from this header at build time). */
enum keplershm_record_type {
    KEPLERSHM_RECORD_PROCESS = 1,
    KEPLERSHM_RECORD_WORKLOAD = 2,
    KEPLERSHM_RECORD_ZONE_SAMPLE = 3,
    KEPLERSHM_RECORD_CPU_SAMPLE = 4,
    KEPLERSHM_RECORD_UNACCOUNTED = 5,
    KEPLERSHM_RECORD_FRAME = 6,
    KEPLERSHM_RECORD_ZONE_INFO = 7,
    KEPLERSHM_RECORD_ESTIMATE = 8,
    KEPLERSHM_RECORD_SECTION = 9,
    KEPLERSHM_RECORD_GPU_DEVICE = 10, /* 1.4 */
    KEPLERSHM_RECORD_GPU_USAGE = 11,  /* 1.4 */
    /* Structs of the C ABI that are not frame records (keplershm_record_size only, no schema entries),
     * so bindings can check their mirrors of them too. */
    KEPLERSHM_STRUCT_HEADER = 100,
    KEPLERSHM_STRUCT_SEGMENT_INFO = 101,
    KEPLERSHM_STRUCT_VIEW = 102,
    KEPLERSHM_STRUCT_DRAFT = 103,
    KEPLERSHM_STRUCT_FIELD = 104,
    KEPLERSHM_STRUCT_READER_OPTS = 105,
    KEPLERSHM_STRUCT_WRITER_OPTS = 106,
    KEPLERSHM_STRUCT_RECORDER_OPTS = 107,
    KEPLERSHM_STRUCT_RECORDING_HEADER = 108,
    KEPLERSHM_STRUCT_RECORD_HEADER = 109,
    KEPLERSHM_STRUCT_SLOT_CONTROL = 110,
};

enum keplershm_field_type {
    KEPLERSHM_TYPE_U32 = 1,
    KEPLERSHM_TYPE_U64 = 2,
    KEPLERSHM_TYPE_F64 = 3,
    KEPLERSHM_TYPE_CHAR = 4, /* NUL-padded text, `count` bytes */
};

struct keplershm_field {                /* 64 bytes */
    char name[32];
    char unit[16];
    uint16_t record_type;               /* enum keplershm_record_type */
    uint16_t type;                      /* enum keplershm_field_type */
    uint32_t offset;                    /* bytes from the record start */
    uint32_t count;                     /* array elements (bytes for CHAR) */
    uint32_t size;                      /* total bytes */
};

struct keplershm_header {
    uint64_t magic;
    uint16_t abi_major;
    uint16_t abi_minor;
    uint32_t header_size;
    uint64_t segment_size;
    uint64_t generation;                /* unique per writer instance and growth step */
    uint64_t writer_start_realtime_ns;
    uint64_t writer_start_monotonic_ns;
    uint64_t heartbeat_period_ns;       /* the writer updates the heartbeat at least this often */
    uint32_t segment_kind;              /* enum keplershm_segment_kind */
    uint32_t writer_version;            /* producer software version, (major<<16)|(minor<<8)|patch */
    uint32_t slot_count;
    uint32_t frame_header_size;
    uint64_t slot_size;                 /* bytes per slot, including the 64-byte control line */
    uint64_t slots_offset;
    uint32_t section_entry_size;
    uint32_t process_record_size;
    uint32_t workload_record_size;
    uint32_t zone_record_size;
    uint32_t cpu_record_size;
    uint32_t unaccounted_record_size;
    uint32_t process_capacity;
    uint32_t workload_capacity;
    uint32_t zone_capacity;
    uint32_t cpu_capacity;
    uint32_t string_capacity;
    uint32_t max_sections;
    uint64_t schema_offset;
    uint32_t schema_count;
    uint32_t schema_entry_size;
    uint64_t max_segment_bytes;         /* the cap this segment was created under */
    uint64_t metric_mask;               /* enum keplershm_metric this node can produce */
    uint32_t cpu_count;
    uint32_t zone_count;
    uint32_t clock_ticks_per_second;    /* sysconf(_SC_CLK_TCK) of the writer */
    uint32_t reserved0;
    uint64_t boot_time_realtime_ns;     /* to turn start_time_ticks into wall time */
    char node_name[256];
    char cpu_model[128];
    struct keplershm_zone_info zones[32];
    uint64_t first_sequence;            /* first frame number of this generation (continues the previous
                                           generation's numbering when the writer could read it) */
    char platform_meter_id[64];         /* 1.3: the node's BMC (the bmc_id of Kepler's labels); "" when none */
    uint32_t gpu_device_capacity;       /* 1.4: GPU_DEVICES records a frame holds (0 before 1.4) */
    uint32_t gpu_usage_capacity;        /* 1.4: GPU_USAGE records a frame holds */
    uint8_t reserved1[1136];

    /* Runtime block. Each line is written by the writer only; readers map the segment read-only. */
    /* control line (3840) */
    uint32_t state;                     /* enum keplershm_writer_state */
    uint32_t reserved2;
    uint64_t writer_cpu_time_ns;        /* the producer's own CPU time so far, to show its overhead */
    uint64_t writer_rss_bytes;
    uint64_t frames_truncated;
    uint64_t reserved3[4];
    /* heartbeat line (3904): stored together at every heartbeat (PROTOCOL.md §1.3) */
    uint64_t heartbeat_ns;              /* CLOCK_MONOTONIC of the writer's last heartbeat, in the writer's time
                                           namespace: kept for readers of ABI 1.0, which compare it with theirs */
    uint64_t heartbeat_count;           /* 1.1: +1 at every heartbeat, from 1. Readers judge liveness by its
                                           progress on their own clock; 0: a writer of ABI 1.0 */
    uint64_t heartbeat_realtime_ns;     /* 1.1: CLOCK_REALTIME of the last heartbeat, for people and logs only */
    uint64_t reserved4[5];
    /* publish line (3968) */
    uint32_t futex_word;                /* bumped after every publish and state change; readers FUTEX_WAIT on it */
    uint32_t reserved5;
    uint64_t latest_sequence;           /* last published frame number, 0 before the first */
    uint64_t reserved6[6];
    /* reserved line (4032) */
    uint64_t reserved7[8];
};

/* ---------------------------------------------------------------------------------------------- */
/* Recording files                                                                                 */
/* ---------------------------------------------------------------------------------------------- */
/*
 * A recording is a file header followed by records. Each record is a keplershm_record_header then
 * `length` bytes of payload, padded to 8 bytes. A SEGMENT record holds the segment header and schema
 * (bytes [0, slots_offset) of the segment) that describes the FRAME records after it; a recording
 * spanning a writer restart holds one SEGMENT record per generation. A FRAME record holds the frame
 * bytes exactly as they were in the slot (frame_size bytes). `checksum` is CRC-32 of the payload.
 */
struct keplershm_recording_header {     /* 64 bytes */
    uint64_t magic;                     /* KEPLERSHM_RECORDING_MAGIC */
    uint16_t abi_major;
    uint16_t abi_minor;
    uint32_t header_size;
    uint64_t created_realtime_ns;
    uint64_t reserved[5];
};

enum keplershm_recording_record_type {
    KEPLERSHM_RECORDING_SEGMENT = 1,
    KEPLERSHM_RECORDING_FRAME = 2,
};

struct keplershm_record_header {        /* 24 bytes */
    uint32_t type;                      /* enum keplershm_recording_record_type */
    uint32_t checksum;                  /* CRC-32 (IEEE) of the payload */
    uint64_t length;                    /* payload bytes (without padding) */
    uint64_t sequence;                  /* frame number for FRAME records, generation for SEGMENT */
};

#ifdef __cplusplus
}
#endif

#include "keplershm_layout_checks.h" /* every offset above, asserted at compile time */
#endif /* KEPLERSHM_LAYOUT_H */
