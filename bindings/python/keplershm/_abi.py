"""ctypes mirrors of the structs in keplershm.h and keplershm_layout.h, and the import-time check that they match the library.

The mirrors are what the C ABI passes by pointer (views, drafts, options, infos) plus the record
structs. The record mirrors are compared field by field with the layout that the *loaded library*
reports (``keplershm_record_size`` and ``keplershm_schema``): a mismatch means these bindings were
built for a different layout, and reading with them would give wrong numbers silently, so import
fails with :class:`~keplershm.errors.LayoutMismatch` instead.

tests/bindings/test_abi_layout.py (python.abi_layout) checks every mirror here, and the constants,
against the headers as a C compiler lays them out: change the header and this file together.

Record data itself is never read through these mirrors: numpy dtypes are built from the schema that
each segment or recording publishes (see :mod:`keplershm.schema`).
"""
import ctypes as C

from .errors import LayoutMismatch

u8, u16, u32, u64, f64 = C.c_uint8, C.c_uint16, C.c_uint32, C.c_uint64, C.c_double

ABI_MAJOR = 1
MAX_ZONES = 32
MAX_SECTIONS = 16

# enum keplershm_record_type
RECORD_PROCESS, RECORD_WORKLOAD, RECORD_ZONE_SAMPLE, RECORD_CPU_SAMPLE = 1, 2, 3, 4
RECORD_UNACCOUNTED, RECORD_FRAME, RECORD_ZONE_INFO, RECORD_ESTIMATE, RECORD_SECTION = 5, 6, 7, 8, 9
RECORD_GPU_DEVICE, RECORD_GPU_USAGE = 10, 11  # 1.4

# enum keplershm_field_type
TYPE_U32, TYPE_U64, TYPE_F64, TYPE_CHAR = 1, 2, 3, 4


class ZoneInfo(C.Structure):
    _fields_ = [("name", C.c_char * 32), ("kind", u32), ("socket", u32), ("power_source", u32),
                ("meter_detail", u32), ("max_energy_range_uj", u64), ("reserved1", u64)]


class Process(C.Structure):
    _fields_ = [("pid", u32), ("tgid", u32), ("start_time_ticks", u64), ("cgroup_id", u64),
                ("workload_index", u32), ("flags", u32), ("comm", C.c_char * 16), ("cpu_time_ns", u64),
                ("cycles", u64), ("instructions", u64), ("cache_misses", u64), ("page_cache_hits", u64),
                ("page_cache_misses", u64), ("softirq", u64 * 10), ("reserved", u64 * 2)]


class Workload(C.Structure):
    _fields_ = [("kind", u32), ("runtime", u32), ("cgroup_id", u64), ("container_id", C.c_char * 80),
                ("container_name", C.c_char * 64), ("pod_uid", C.c_char * 48), ("pod_name", C.c_char * 256),
                ("pod_namespace", C.c_char * 64), ("vm_id", C.c_char * 64), ("vm_name", C.c_char * 128),
                ("cgroup_path_offset", u32), ("cgroup_path_length", u32), ("reserved", u64 * 5)]


class ZoneSample(C.Structure):
    _fields_ = [("zone_index", u32), ("flags", u32), ("read_time_ns", u64), ("energy_total_uj", u64),
                ("energy_delta_uj", u64), ("reserved", u64)]


class CpuSample(C.Structure):
    _fields_ = [("cpu", u32), ("flags", u32), ("user_ns", u64), ("nice_ns", u64), ("system_ns", u64),
                ("idle_ns", u64), ("iowait_ns", u64), ("irq_ns", u64), ("softirq_ns", u64), ("steal_ns", u64),
                ("reserved", u64)]


class Unaccounted(C.Structure):
    _fields_ = [("cpu_time_ns", u64), ("truncated_processes", u64), ("truncated_cpu_time_ns", u64),
                ("dropped_entries", u64), ("exited_processes", u64), ("inexact_cuts", u64),  # 1.5
                ("reserved", u64 * 2)]


class Section(C.Structure):
    _fields_ = [("id", u32), ("stride", u32), ("offset", u32), ("count", u32)]


class Frame(C.Structure):
    _fields_ = [("sequence", u64), ("generation", u64), ("interval_start_ns", u64), ("interval_end_ns", u64),
                ("interval_start_realtime_ns", u64), ("interval_end_realtime_ns", u64),
                ("process_read_time_ns", u64), ("metric_mask", u64), ("flags", u32), ("source", u32),
                ("power_source", u32), ("section_count", u32), ("frame_size", u32), ("processes_seen", u32),
                ("producer_sequence", u64), ("producer_generation", u64), ("reserved", u64 * 19)]


class Estimate(C.Structure):
    _fields_ = [("zone_index", u32), ("workload_index", u32), ("pid", u32), ("flags", u32),
                ("start_time_ticks", u64), ("power_watts", f64), ("energy_joules", f64), ("reserved", u64 * 3)]


class GpuDevice(C.Structure):
    _fields_ = [("zone_index", u32), ("vendor", u32), ("device_index", u32), ("flags", u32), ("parent", u32),
                ("gpu_instance_id", u32), ("compute_instance_id", u32), ("reserved0", u32), ("power_limit_mw", u64),
                ("active_ns", u64), ("memory_used_bytes", u64), ("uuid", C.c_char * 96), ("name", C.c_char * 64),
                ("pci_bus_id", C.c_char * 32), ("reserved", u64 * 1)]


class GpuUsage(C.Structure):
    _fields_ = [("pid", u32), ("device", u32), ("start_time_ticks", u64), ("process_index", u32), ("flags", u32),
                ("busy_ns", u64), ("memory_bytes", u64), ("reserved", u64 * 3)]


class Field(C.Structure):
    _fields_ = [("name", C.c_char * 32), ("unit", C.c_char * 16), ("record_type", u16), ("type", u16),
                ("offset", u32), ("count", u32), ("size", u32)]


class Header(C.Structure):
    """struct keplershm_header; read only from the reader's validated private copy (view.segment)."""
    _fields_ = [("magic", u64), ("abi_major", u16), ("abi_minor", u16), ("header_size", u32),
                ("segment_size", u64), ("generation", u64), ("writer_start_realtime_ns", u64),
                ("writer_start_monotonic_ns", u64), ("heartbeat_period_ns", u64), ("segment_kind", u32),
                ("writer_version", u32), ("slot_count", u32), ("frame_header_size", u32), ("slot_size", u64),
                ("slots_offset", u64), ("section_entry_size", u32), ("process_record_size", u32),
                ("workload_record_size", u32), ("zone_record_size", u32), ("cpu_record_size", u32),
                ("unaccounted_record_size", u32), ("process_capacity", u32), ("workload_capacity", u32),
                ("zone_capacity", u32), ("cpu_capacity", u32), ("string_capacity", u32), ("max_sections", u32),
                ("schema_offset", u64), ("schema_count", u32), ("schema_entry_size", u32),
                ("max_segment_bytes", u64), ("metric_mask", u64), ("cpu_count", u32), ("zone_count", u32),
                ("clock_ticks_per_second", u32), ("reserved0", u32), ("boot_time_realtime_ns", u64),
                ("node_name", C.c_char * 256), ("cpu_model", C.c_char * 128), ("zones", ZoneInfo * MAX_ZONES),
                ("first_sequence", u64), ("platform_meter_id", C.c_char * 64),
                ("gpu_device_capacity", u32), ("gpu_usage_capacity", u32), ("reserved1", u8 * 1136),
                ("state", u32), ("reserved2", u32), ("writer_cpu_time_ns", u64), ("writer_rss_bytes", u64),
                ("frames_truncated", u64), ("reserved3", u64 * 4),
                ("heartbeat_ns", u64), ("heartbeat_count", u64), ("heartbeat_realtime_ns", u64),
                ("reserved4", u64 * 5),
                ("futex_word", u32), ("reserved5", u32), ("latest_sequence", u64), ("reserved6", u64 * 6),
                ("reserved7", u64 * 8)]


class ReaderOpts(C.Structure):
    _fields_ = [("sz", C.c_size_t), ("heartbeat_timeout_ms", u32), ("no_reattach", u32), ("max_frame_mib", u32),
                ("owner_check", u32), ("owner_uid", u32), ("reserved", u32 * 1)]


class SegmentInfo(C.Structure):
    _fields_ = [("sz", C.c_size_t), ("header", C.c_void_p), ("generation", u64), ("segment_size", u64),
                ("abi_major", u32), ("abi_minor", u32), ("segment_kind", u32), ("slot_count", u32),
                ("process_capacity", u32), ("cpu_count", u32), ("zone_count", u32), ("is_recording", u32),
                ("metric_mask", u64), ("latest_sequence", u64), ("state", u32), ("reserved0", u32),
                ("heartbeat_age_ns", u64), ("writer_cpu_time_ns", u64), ("writer_rss_bytes", u64),
                ("node_name", C.c_char * 256), ("cpu_model", C.c_char * 128), ("reattach_count", u64),
                ("heartbeat_count", u64), ("heartbeat_realtime_ns", u64), ("heartbeat_timeout_ns", u64),
                ("heartbeat_advanced", u32), ("writer_stale", u32)]


class View(C.Structure):
    _fields_ = [("sz", C.c_size_t), ("sequence", u64), ("generation", u64), ("missed", u64),
                ("frame", C.c_void_p), ("interval_start_ns", u64), ("interval_end_ns", u64), ("flags", u32),
                ("source", u32), ("power_source", u32), ("section_count", u32),
                ("sections", Section * MAX_SECTIONS), ("base", C.c_void_p), ("frame_size", u64),
                ("in_place", u32), ("reserved0", u32), ("segment", C.c_void_p)]


class WriterOpts(C.Structure):
    _fields_ = [("sz", C.c_size_t), ("slot_count", u32), ("process_capacity", u32), ("workload_capacity", u32),
                ("zone_capacity", u32), ("cpu_capacity", u32), ("string_capacity", u32), ("segment_kind", u32),
                ("mode", u32), ("max_segment_bytes", u64), ("heartbeat_period_ns", u64), ("metric_mask", u64),
                ("node_name", C.c_char_p), ("cpu_model", C.c_char_p), ("cpu_count", u32), ("zone_count", u32),
                ("zones", C.POINTER(ZoneInfo)), ("writer_version", u32), ("replace_live", u32),
                ("gpu_device_capacity", u32), ("gpu_usage_capacity", u32)]


class Draft(C.Structure):
    _fields_ = [("sz", C.c_size_t), ("sequence", u64), ("frame", C.c_void_p),
                ("processes", C.c_void_p), ("process_capacity", u32), ("process_count", u32),
                ("workloads", C.c_void_p), ("workload_capacity", u32), ("workload_count", u32),
                ("zones", C.c_void_p), ("zone_capacity", u32), ("zone_count", u32),
                ("cpus", C.c_void_p), ("cpu_capacity", u32), ("cpu_count", u32),
                ("strings", C.c_void_p), ("string_capacity", u32), ("string_used", u32),
                ("unaccounted", C.c_void_p), ("processes_wanted", u32), ("reserved0", u32),
                ("estimates", C.c_void_p), ("estimate_capacity", u32), ("estimate_count", u32),
                ("gpu_devices", C.c_void_p), ("gpu_device_capacity", u32), ("gpu_device_count", u32),
                ("gpu_usage", C.c_void_p), ("gpu_usage_capacity", u32), ("gpu_usage_count", u32)]


class RecorderOpts(C.Structure):
    _fields_ = [("sz", C.c_size_t), ("max_bytes", u64), ("fsync_every", u32), ("reserved0", u32)]


# Record mirrors that the library describes (keplershm_record_size / keplershm_schema).
RECORD_MIRRORS = {
    RECORD_PROCESS: Process,
    RECORD_WORKLOAD: Workload,
    RECORD_ZONE_SAMPLE: ZoneSample,
    RECORD_CPU_SAMPLE: CpuSample,
    RECORD_UNACCOUNTED: Unaccounted,
    RECORD_FRAME: Frame,
    RECORD_ZONE_INFO: ZoneInfo,
    RECORD_ESTIMATE: Estimate,
    RECORD_SECTION: Section,
    RECORD_GPU_DEVICE: GpuDevice,
    RECORD_GPU_USAGE: GpuUsage,
}

_SCALAR_SIZE = {TYPE_U32: 4, TYPE_U64: 8, TYPE_F64: 8, TYPE_CHAR: 1}


def check_mirrors(record_size, schema, library_path, mirrors=None):
    """Raise LayoutMismatch unless every record mirror matches the library's sizes and schema.

    ``record_size(type)`` and ``schema`` (a list of :class:`keplershm.schema.FieldSpec`) come from the
    loaded library. Every mismatch is listed, so one message says everything that is wrong.
    """
    mirrors = RECORD_MIRRORS if mirrors is None else mirrors
    problems = []
    for record_type, mirror in mirrors.items():
        name = mirror.__name__
        size = record_size(record_type)
        if size != C.sizeof(mirror):
            problems.append("%s is %d bytes in the bindings but %d in the library" % (name, C.sizeof(mirror), size))
        ours = {f[0]: getattr(mirror, f[0]) for f in mirror._fields_ if not f[0].startswith("reserved")}
        theirs = [f for f in schema if f.record_type == record_type]
        for field in theirs:
            mine = ours.pop(field.name, None)
            if mine is None:
                problems.append("%s.%s exists in the library but not in the bindings" % (name, field.name))
            elif mine.offset != field.offset or mine.size != field.size:
                problems.append("%s.%s is at offset %d (%d bytes) in the bindings but at offset %d (%d bytes) in the "
                                "library" % (name, field.name, mine.offset, mine.size, field.offset, field.size))
            elif field.size != field.count * _SCALAR_SIZE.get(field.type, -1):
                problems.append("%s.%s: the library's schema gives an inconsistent type/count/size" % (name, field.name))
        for missing in ours:
            problems.append("%s.%s exists in the bindings but not in the library's schema" % (name, missing))
    if problems:
        raise LayoutMismatch(
            "keplershm Python bindings refuse to run: their struct layout does not match the library at %s:\n  - %s\n"
            "Install the bindings from the same keplershm release as the library (or point KEPLERSHM_LIBRARY at "
            "the matching libkeplershm.so.1)." % (library_path, "\n  - ".join(problems)))
