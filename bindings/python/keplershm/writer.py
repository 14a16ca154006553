"""Publishing frames through the C ABI's writer (``keplershm_writer_*``).

For synthetic publishers (tests, demos) and for models written in Python that publish an estimates
segment. The bytes are written by libkeplershm itself: Python only fills records through numpy arrays
laid out by the library's own schema and record sizes, then commits.

A Writer is not thread-safe; a segment has exactly one writer.
"""
import ctypes as C

from . import _abi
from ._lib import check, lib, library_schema
from .schema import Schema, np

SEGMENT_FRAMES, SEGMENT_ESTIMATES = 1, 2
ZONE_KIND_IDS = {"package": 1, "core": 2, "uncore": 3, "dram": 4, "psys": 5, "platform": 6, "gpu": 7, "other": 8}


class Draft:
    """Frame n+1 being written: numpy arrays over the slot (capacity-long) plus the counts to publish.

    Fill ``header`` fields (interval_start_ns, interval_end_ns, metric_mask, flags, source, power_source ...),
    the first ``process_count`` rows of ``processes``, etc., ``unaccounted`` (one record), ``strings``
    (bytes area; set ``string_used``), then call :meth:`Writer.commit`.
    """

    def __init__(self, raw, schema):
        self.raw = raw
        self.sequence = raw.sequence

        def array(pointer, record_type, capacity):
            if not pointer or capacity == 0:
                return None
            stride = lib.keplershm_record_size(record_type)
            buf = (C.c_uint8 * (stride * capacity)).from_address(pointer)
            return np.frombuffer(buf, dtype=schema.dtype(record_type, stride), count=capacity)

        self.header = array(raw.frame, _abi.RECORD_FRAME, 1)[0]
        self.processes = array(raw.processes, _abi.RECORD_PROCESS, raw.process_capacity)
        self.workloads = array(raw.workloads, _abi.RECORD_WORKLOAD, raw.workload_capacity)
        self.zones = array(raw.zones, _abi.RECORD_ZONE_SAMPLE, raw.zone_capacity)
        self.cpus = array(raw.cpus, _abi.RECORD_CPU_SAMPLE, raw.cpu_capacity)
        self.estimates = array(raw.estimates, _abi.RECORD_ESTIMATE, raw.estimate_capacity)
        self.gpu_devices = array(raw.gpu_devices, _abi.RECORD_GPU_DEVICE, raw.gpu_device_capacity)
        self.gpu_usage = array(raw.gpu_usage, _abi.RECORD_GPU_USAGE, raw.gpu_usage_capacity)
        self.unaccounted = array(raw.unaccounted, _abi.RECORD_UNACCOUNTED, 1)[0]
        self.strings = (np.frombuffer((C.c_uint8 * raw.string_capacity).from_address(raw.strings), dtype=np.uint8)
                        if raw.strings and raw.string_capacity else None)
        self.process_count = self.workload_count = self.zone_count = self.cpu_count = 0
        self.estimate_count = self.string_used = self.processes_wanted = 0
        self.gpu_device_count = self.gpu_usage_count = 0


class Writer:
    """Creates the segment /dev/shm/<shm_name> and publishes frames into it.

    ``zones``: list of dicts with name, kind ('package', 'dram' ...), socket, power_source (1 RAPL,
    2 hwmon), max_energy_range_uj. ``replace_live`` takes the name even from a live writer (tests).
    """

    def __init__(self, shm_name, *, slot_count=8, process_capacity=256, workload_capacity=16, zone_capacity=8,
                 cpu_capacity=0, string_capacity=4096, metric_mask=0, node_name=None, cpu_model=None, cpu_count=0,
                 zones=(), segment_kind=SEGMENT_FRAMES, replace_live=False, heartbeat_period_s=1.0,
                 max_segment_bytes=0, mode=0o600, gpu_device_capacity=0, gpu_usage_capacity=0):
        if np is None:
            raise RuntimeError("the Python writer needs numpy (python3-numpy)")
        zone_array = (_abi.ZoneInfo * max(len(zones), 1))()
        for i, z in enumerate(zones):
            kind = z.get("kind", "package")
            zone_array[i] = _abi.ZoneInfo(z["name"].encode(), ZONE_KIND_IDS.get(kind, kind) if isinstance(kind, str)
                                          else kind, z.get("socket", 0), z.get("power_source", 1), 0,
                                          z.get("max_energy_range_uj", 0), 0)
        # None (not "") for an empty text: ctypes wants bytes or NULL.
        self._keep = (node_name.encode() if node_name else None, cpu_model.encode() if cpu_model else None, zone_array)
        opts = _abi.WriterOpts(
            sz=C.sizeof(_abi.WriterOpts), slot_count=slot_count, process_capacity=process_capacity,
            workload_capacity=workload_capacity, zone_capacity=zone_capacity, cpu_capacity=cpu_capacity,
            string_capacity=string_capacity, segment_kind=segment_kind, mode=mode, max_segment_bytes=max_segment_bytes,
            heartbeat_period_ns=int(heartbeat_period_s * 1e9), metric_mask=metric_mask, node_name=self._keep[0],
            cpu_model=self._keep[1], cpu_count=cpu_count, zone_count=len(zones),
            zones=C.cast(zone_array, C.POINTER(_abi.ZoneInfo)), writer_version=0, replace_live=1 if replace_live else 0,
            gpu_device_capacity=gpu_device_capacity, gpu_usage_capacity=gpu_usage_capacity)
        self.name = shm_name
        self._pointer = C.c_void_p()
        check(lib.keplershm_writer_create(shm_name.encode(), C.byref(opts), C.byref(self._pointer)),
              "cannot create segment '%s'" % shm_name)
        self._schema = Schema(library_schema())

    def _h(self):
        if not self._pointer:
            raise ValueError("writer of '%s' is closed" % self.name)
        return self._pointer

    def begin(self):
        """Start the next frame; returns a :class:`Draft` whose records are zeroed."""
        raw = _abi.Draft(C.sizeof(_abi.Draft))
        check(lib.keplershm_writer_begin(self._h(), C.byref(raw)), "begin frame on '%s'" % self.name)
        return Draft(raw, self._schema)

    def commit(self, draft):
        """Publish the draft with its counts; wakes waiting readers. Returns the frame number."""
        raw = draft.raw
        raw.process_count, raw.workload_count, raw.zone_count = draft.process_count, draft.workload_count, draft.zone_count
        raw.cpu_count, raw.string_used, raw.estimate_count = draft.cpu_count, draft.string_used, draft.estimate_count
        raw.processes_wanted = draft.processes_wanted
        raw.gpu_device_count, raw.gpu_usage_count = draft.gpu_device_count, draft.gpu_usage_count
        check(lib.keplershm_writer_commit(self._h(), C.byref(raw)), "commit frame on '%s'" % self.name)
        return draft.sequence

    def heartbeat(self):
        check(lib.keplershm_writer_heartbeat(self._h()), "heartbeat of '%s'" % self.name)

    def close(self, keep_name=False):
        """Retire the segment (readers see a clean stop) and remove its name unless ``keep_name``."""
        if getattr(self, "_pointer", None):  # a constructor that failed leaves no pointer
            lib.keplershm_writer_close(self._pointer, 1 if keep_name else 0)
            self._pointer = C.c_void_p()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        self.close()
