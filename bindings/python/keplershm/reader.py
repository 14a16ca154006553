"""Reading frames from a live segment or a recording.

A :class:`Reader` hands out frames in two forms:

* **owned copies** (default): the C library copies the frame under its seqlock (``keplershm_reader_next``
  / ``keplershm_reader_copy``) and the chosen sections are copied once more into arrays this process
  owns; they stay valid forever;
* **zero-copy views** (``with reader.view(n) as frame:``): read-only numpy arrays over the shared
  mapping. The writer may overwrite the slot at any time, so the ``with`` block asks the library on
  exit whether the frame is still intact (``keplershm_reader_validate``) and raises
  :class:`~keplershm.errors.FrameOverwritten` if it was not: whatever was computed from the view must
  then be thrown away.

Every blocking call waits in slices of at most 100 ms, so Ctrl-C interrupts it promptly (ctypes calls
cannot be interrupted mid-call; Python handles the signal when the slice returns).

A Reader is not thread-safe: use one per thread.
"""
import contextlib
import ctypes as C
import os
import time
from collections import namedtuple

from . import _abi
from ._lib import check, lib, raise_for
from .errors import EndOfRecording, FrameOverwritten, RecordingTruncated, Timeout, WriterGone
from .schema import Schema, fields_from_ctypes, np

SLICE_MS = 100  # longest single wait inside the C library (Ctrl-C latency)

# enum keplershm_error values that are outcomes of reading, not failures.
OK, E_NOT_YET, E_LAPPED, E_TIMEOUT, E_WRITER_GONE, E_END, E_TRUNCATED = 0, -7, -8, -9, -10, -15, -16

# enum keplershm_section_id → (attribute name, record type)
SECTIONS = {
    1: ("processes", _abi.RECORD_PROCESS),
    2: ("workloads", _abi.RECORD_WORKLOAD),
    3: ("zones", _abi.RECORD_ZONE_SAMPLE),
    4: ("cpus", _abi.RECORD_CPU_SAMPLE),
    5: ("strings", None),
    6: ("unaccounted", _abi.RECORD_UNACCOUNTED),
    7: ("estimates", _abi.RECORD_ESTIMATE),
    8: ("gpu_devices", _abi.RECORD_GPU_DEVICE),  # 1.4
    9: ("gpu_usage", _abi.RECORD_GPU_USAGE),     # 1.4
}
SECTION_IDS = {name: sid for sid, (name, _) in SECTIONS.items()}

ZONE_KINDS = {1: "package", 2: "core", 3: "uncore", 4: "dram", 5: "psys", 6: "platform", 7: "gpu", 8: "other"}
STATE_RETIRED = 2

Zone = namedtuple("Zone", "index name kind socket power_source max_energy_range_uj")
Zone.__doc__ = "An energy zone of the node (header.zones[index]); ``kind`` is a name such as 'package'."

SegmentInfo = namedtuple("SegmentInfo", "generation abi_major abi_minor segment_kind slot_count process_capacity "
                                        "cpu_count zone_count is_recording metric_mask latest_sequence state "
                                        "heartbeat_age_ns node_name cpu_model reattach_count zones "
                                        "heartbeat_count heartbeat_realtime_ns heartbeat_timeout_ns writer_stale")


def _text(raw):
    return bytes(raw).split(b"\0", 1)[0].decode("utf-8", "replace")


def _zones_of(header):
    count = min(header.zone_count, _abi.MAX_ZONES)
    return [Zone(i, _text(z.name), ZONE_KINDS.get(z.kind, "unknown-%d" % z.kind), z.socket, z.power_source,
                 z.max_energy_range_uj) for i, z in enumerate(header.zones[:count])]


class Generation:
    """What a frame's segment header says about the node: CPUs, zones, metrics (one per writer generation)."""

    def __init__(self, header):
        self.generation = header.generation
        self.node_name = _text(header.node_name)
        self.cpu_model = _text(header.cpu_model)
        self.cpu_count = header.cpu_count
        self.metric_mask = header.metric_mask
        self.frame_header_size = header.frame_header_size
        self.clock_ticks_per_second = header.clock_ticks_per_second
        self.boot_time_realtime_ns = header.boot_time_realtime_ns
        self.zones = _zones_of(header)


class _Handle:
    """Owns a keplershm_reader*; closed when the Reader and every view array over it are gone."""

    def __init__(self, pointer):
        self.pointer = pointer

    def close(self):
        if self.pointer:
            lib.keplershm_reader_close(self.pointer)
            self.pointer = None

    def __del__(self):
        self.close()


class Frame:
    """One frame: interval, flags and the chosen sections as numpy structured arrays.

    Attributes: ``sequence`` (the producer's frame number), ``generation``, ``missed`` (frames lost
    just before this one), ``in_place`` (True for a zero-copy view), ``header`` (the frame header record,
    fields as in keplershm.h: ``interval_start_ns``, ``metric_mask``, ``flags`` ...), ``segment`` (a
    :class:`Generation`: cpu_count, cpu_model, zones), and the sections ``processes``, ``workloads``,
    ``zones``, ``cpus``, ``unaccounted`` (one record or None), ``estimates`` and ``strings`` (bytes).
    A section the frame does not carry, or that the reader was not asked for, is None.
    Without numpy, records are lists of dicts.
    """

    def __init__(self, view, header, segment, sections, in_place):
        self.sequence = view.sequence
        self.generation = view.generation
        self.missed = view.missed
        self.in_place = in_place
        self.header = header
        self.segment = segment
        self._sections = sections
        self._closed = False

    def _section(self, name):
        if self._closed:
            raise RuntimeError("frame %d is a zero-copy view used after its `with` block; copy what you need "
                               "inside the block (np.array(frame.processes)) or use Reader.next()" % self.sequence)
        return self._sections.get(name)

    processes = property(lambda self: self._section("processes"))
    workloads = property(lambda self: self._section("workloads"))
    zones = property(lambda self: self._section("zones"))
    cpus = property(lambda self: self._section("cpus"))
    estimates = property(lambda self: self._section("estimates"))
    gpu_devices = property(lambda self: self._section("gpu_devices"))  # 1.4: None from older writers
    gpu_usage = property(lambda self: self._section("gpu_usage"))
    strings = property(lambda self: self._section("strings"))

    @property
    def unaccounted(self):
        records = self._section("unaccounted")
        return records[0] if records is not None and len(records) else None

    def _h(self, name):
        return int(self.header[name])

    interval_start_ns = property(lambda self: self._h("interval_start_ns"))
    interval_end_ns = property(lambda self: self._h("interval_end_ns"))
    interval_start_realtime_ns = property(lambda self: self._h("interval_start_realtime_ns"))
    interval_end_realtime_ns = property(lambda self: self._h("interval_end_realtime_ns"))
    metric_mask = property(lambda self: self._h("metric_mask"))
    flags = property(lambda self: self._h("flags"))
    source = property(lambda self: self._h("source"))
    power_source = property(lambda self: self._h("power_source"))

    @property
    def dt(self):
        """Interval length in seconds."""
        return (self.interval_end_ns - self.interval_start_ns) / 1e9

    def string(self, offset, length):
        """Text from the frame's STRINGS section (e.g. a workload's cgroup path); '' if out of range."""
        data = self.strings
        if data is None or offset + length > len(data):
            return ""
        return bytes(data[offset:offset + length]).decode("utf-8", "replace")

    def to_pandas(self, section="processes"):
        """A pandas DataFrame of one section (text fields decoded). Needs pandas (python3-pandas)."""
        from .tables import section_to_pandas
        return section_to_pandas(self, section)

    def __repr__(self):
        kept = ", ".join("%s=%d" % (k, len(v)) for k, v in self._sections.items() if v is not None)
        return "<Frame %d gen %#x dt=%.3fs %s%s>" % (self.sequence, self.generation, self.dt, kept,
                                                    " in-place" if self.in_place else "")


class Reader:
    """Reads frames from a live segment (``Reader("kepler")``) or a recording (``Reader("run.kshm")``).

    ``source`` is taken as a recording when it names an existing file or contains a '/', else as a
    shared-memory name; use ``shm_name=`` or ``recording=`` to say which explicitly. ``sections``
    limits what frames carry (names: processes, workloads, zones, cpus, strings, unaccounted,
    estimates); default all. ``writer_grace_s``: how long a live reader keeps waiting for a new writer
    after the old one went away (collector restarts are followed automatically).
    """

    def __init__(self, source=None, *, shm_name=None, recording=None, sections=None, writer_grace_s=2.0,
                 heartbeat_timeout_ms=0, follow_writer=True):
        if sum(x is not None for x in (source, shm_name, recording)) != 1:
            raise ValueError("give exactly one of source, shm_name= or recording=")
        if source is not None:
            source = os.fspath(source)
            if os.path.isfile(source) or "/" in source:
                recording = source
            else:
                shm_name = source
        self.name = shm_name if shm_name is not None else os.fspath(recording)
        self.is_recording = recording is not None
        self.writer_grace_s = writer_grace_s
        self.sections = self._section_ids(sections)
        opts = _abi.ReaderOpts(C.sizeof(_abi.ReaderOpts), heartbeat_timeout_ms, 0 if follow_writer else 1)
        pointer = C.c_void_p()
        opener = lib.keplershm_reader_open_recording if self.is_recording else lib.keplershm_reader_open
        what = "recording '%s'" % self.name if self.is_recording else "segment '%s'" % self.name
        check(opener(self.name.encode(), C.byref(opts), C.byref(pointer)), "cannot open %s" % what)
        self._handle = _Handle(pointer)
        self._what = what
        self._generations = {}
        self._schema = None

    @classmethod
    def live(cls, shm_name, **kwargs):
        """Reader of the live segment /dev/shm/<shm_name>."""
        return cls(shm_name=shm_name, **kwargs)

    @classmethod
    def open_recording(cls, path, **kwargs):
        """Reader of a recording file."""
        return cls(recording=path, **kwargs)

    @staticmethod
    def _section_ids(sections):
        if sections is None:
            return dict(SECTIONS)
        unknown = [s for s in sections if s not in SECTION_IDS]
        if unknown:
            raise ValueError("unknown section(s) %s; known: %s" % (", ".join(unknown), ", ".join(SECTION_IDS)))
        return {SECTION_IDS[s]: SECTIONS[SECTION_IDS[s]] for s in sections}

    # -- lifetime ------------------------------------------------------------------------------------
    def close(self):
        """Release the reader. Zero-copy arrays still referenced keep the mapping until they are freed."""
        self._handle = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    @property
    def _h(self):
        if self._handle is None:
            raise ValueError("reader of %s is closed" % self._what)
        return self._handle.pointer

    # -- description ---------------------------------------------------------------------------------
    @property
    def info(self):
        """A :class:`SegmentInfo` snapshot (node, CPU, zones, latest frame, writer state)."""
        raw = _abi.SegmentInfo(C.sizeof(_abi.SegmentInfo))
        check(lib.keplershm_reader_info(self._h, C.byref(raw)), self._what)
        zones = _zones_of(_abi.Header.from_address(raw.header)) if raw.header else []
        return SegmentInfo(raw.generation, raw.abi_major, raw.abi_minor, raw.segment_kind, raw.slot_count,
                           raw.process_capacity, raw.cpu_count, raw.zone_count, bool(raw.is_recording),
                           raw.metric_mask, raw.latest_sequence, raw.state, raw.heartbeat_age_ns,
                           _text(raw.node_name), _text(raw.cpu_model), raw.reattach_count, zones,
                           raw.heartbeat_count, raw.heartbeat_realtime_ns, raw.heartbeat_timeout_ns,
                           bool(raw.writer_stale))

    @property
    def schema(self):
        """The field :class:`~keplershm.schema.Schema` the segment (or the recording's first generation) publishes."""
        if self._schema is None:
            count = C.c_uint32(0)
            check(lib.keplershm_reader_schema(self._h, None, 0, C.byref(count)), self._what)
            fields = (_abi.Field * max(count.value, 1))()
            check(lib.keplershm_reader_schema(self._h, fields, count.value, C.byref(count)), self._what)
            self._schema = Schema(fields_from_ctypes(fields, min(count.value, len(fields))))
        return self._schema

    def latest(self):
        """Number of the newest published frame (a recording: its frame count); 0 if none."""
        n = C.c_uint64(0)
        check(lib.keplershm_reader_latest(self._h, C.byref(n)), self._what)
        return n.value

    # -- waiting -------------------------------------------------------------------------------------
    def _slices(self, timeout):
        """Yields slice lengths (ms) until `timeout` seconds (None: forever) are used up."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            if deadline is None:
                yield SLICE_MS
                continue
            left = deadline - time.monotonic()
            if left <= 0:
                return
            yield max(1, min(SLICE_MS, int(left * 1000)))

    def _gone(self, since):
        """Raise WriterGone once the grace period after the writer vanished is over."""
        if since is not None and time.monotonic() - since >= self.writer_grace_s:
            state = self.info.state
            how = "retired (clean stop)" if state == STATE_RETIRED else "gone (replaced, or heartbeat stale: crashed?)"
            raise WriterGone("the writer of %s is %s and no new writer appeared within %.1f s" %
                             (self._what, how, self.writer_grace_s), E_WRITER_GONE)

    def _outcome(self, rc, gone_since, context):
        """Shared handling of wait/next return codes; returns the updated writer-gone time."""
        if rc == E_TIMEOUT:
            return None
        if rc == E_WRITER_GONE:
            since = gone_since if gone_since is not None else time.monotonic()
            self._gone(since)
            return since
        if rc == E_END:
            raise EndOfRecording("end of recording '%s' (%d frames)" % (self.name, self.latest()), rc)
        if rc == E_TRUNCATED:
            raise RecordingTruncated("recording '%s' ends in the middle of a record after frame %d (was the "
                                     "recorder killed?); the frames before the cut were read" %
                                     (self.name, self.latest()), rc)
        raise_for(rc, context)

    def wait(self, after, timeout=None):
        """Block until a frame newer than `after` exists. Raises Timeout, WriterGone or EndOfRecording."""
        gone_since = None
        for ms in self._slices(timeout):
            rc = lib.keplershm_reader_wait(self._h, after, ms)
            if rc == OK:
                return
            gone_since = self._outcome(rc, gone_since, "waiting on %s" % self._what)
        raise Timeout("no frame after %d on %s within %s s" % (after, self._what, timeout), E_TIMEOUT)

    # -- frames --------------------------------------------------------------------------------------
    def next(self, timeout=None):
        """The next frame as an owned copy (a live stream starts at the newest frame, a recording at
        its first). ``frame.missed`` counts frames lost in between (lapped or writer restart)."""
        gone_since = None
        view = _abi.View(C.sizeof(_abi.View))
        for ms in self._slices(timeout):
            rc = lib.keplershm_reader_next(self._h, ms, C.byref(view))
            if rc == OK:
                return self._frame(view, in_place=False)
            gone_since = self._outcome(rc, gone_since, "reading %s" % self._what)
        raise Timeout("no new frame on %s within %s s" % (self._what, timeout), E_TIMEOUT)

    def frames(self, timeout=None, allow_truncated=False):
        """Iterates owned frames until the recording ends or the writer retires for good.

        A live writer that crashed (stale heartbeat) raises WriterGone; `timeout` bounds each wait.
        A truncated recording raises RecordingTruncated after its last whole frame unless
        ``allow_truncated``.
        """
        while True:
            try:
                yield self.next(timeout)
            except EndOfRecording:
                return
            except RecordingTruncated:
                if allow_truncated:
                    return
                raise
            except WriterGone:
                if self.info.state == STATE_RETIRED:
                    return
                raise

    __iter__ = frames

    def copy(self, sequence):
        """Frame `sequence` (a recording: 1-based position) as an owned copy; raises NotYet or FrameOverwritten."""
        view = _abi.View(C.sizeof(_abi.View))
        check(lib.keplershm_reader_copy(self._h, sequence, C.byref(view)), "frame %d of %s" % (sequence, self._what))
        return self._frame(view, in_place=False)

    def latest_frame(self):
        """The newest frame as an owned copy."""
        n = self.latest()
        if n == 0:
            raise_for(E_NOT_YET, "%s has no frame yet" % self._what)
        return self.copy(n)

    @contextlib.contextmanager
    def view(self, sequence=None):
        """Zero-copy, read-only access to frame `sequence` (default: the newest) inside a ``with`` block.

        On leaving the block the frame is validated; if the writer overwrote it meanwhile,
        FrameOverwritten is raised and everything read from it must be discarded. Call
        ``frame_ok = reader.validate(frame)`` inside the block to check earlier.
        """
        if np is None:
            raise RuntimeError("zero-copy views need numpy (python3-numpy); use Reader.next() for plain records")
        sequence = self.latest() if sequence is None else sequence
        view = _abi.View(C.sizeof(_abi.View))
        check(lib.keplershm_reader_acquire(self._h, sequence, C.byref(view)), "frame %d of %s" % (sequence, self._what))
        frame = self._frame(view, in_place=True)
        frame._view = view
        failed = False
        try:
            yield frame
        except BaseException:
            failed = True
            raise
        finally:
            intact = self.validate(frame)
            frame._closed = True
            if not intact and not failed:
                raise _overwritten(sequence, self)

    def validate(self, frame):
        """True while a zero-copy frame is still intact (always True for copies)."""
        view = getattr(frame, "_view", None)
        if view is None:
            return True
        rc = lib.keplershm_reader_validate(self._h, C.byref(view))
        if rc == E_LAPPED:
            return False
        check(rc, "validating frame %d of %s" % (frame.sequence, self._what))
        return True

    # -- building Frame objects ----------------------------------------------------------------------
    def _generation(self, view):
        key = (view.segment, view.generation)
        gen = self._generations.get(key)
        if gen is None:
            gen = Generation(_abi.Header.from_address(view.segment))
            self._generations[key] = gen
        return gen

    def _memory(self, address, size, in_place):
        """Bytes at `address`: a read-only view over them (in place) or an owned copy."""
        if in_place:
            raw = (C.c_uint8 * size).from_address(address)
            raw.keep_reader_alive = self._handle  # the mapping must outlive every array over it
            return raw
        out = bytearray(size)
        if size:
            C.memmove((C.c_uint8 * size).from_buffer(out), address, size)
        return out

    def _records(self, data, record_type, count, stride, in_place):
        if np is None:
            return self.schema.decode(record_type, stride, data, count)
        array = np.frombuffer(data, dtype=self.schema.dtype(record_type, stride), count=count)
        if in_place:
            array.flags.writeable = False
        return array

    def _frame(self, view, in_place):
        gen = self._generation(view)
        header_bytes = self._memory(view.frame, gen.frame_header_size, False)
        header = self._records(header_bytes, _abi.RECORD_FRAME, 1, gen.frame_header_size, False)[0]
        sections = {}
        for sid, (name, record_type) in self.sections.items():
            records, count, stride = C.c_void_p(), C.c_uint32(), C.c_uint32()
            check(lib.keplershm_view_section(C.byref(view), sid, C.byref(records), C.byref(count), C.byref(stride)),
                  "frame %d section %s" % (view.sequence, name))
            if not records.value:
                sections[name] = None
                continue
            size = count.value * stride.value
            data = self._memory(records.value, size, in_place)
            if record_type is None:  # strings: stride 1, raw bytes
                sections[name] = memoryview(data).toreadonly() if in_place else bytes(data)
            else:
                sections[name] = self._records(data, record_type, count.value, stride.value, in_place)
        return Frame(view, header, gen, sections, in_place)



def _overwritten(sequence, reader):
    """The exception for a view that the writer overwrote while it was held (the text says what to do)."""
    return FrameOverwritten(
        "frame %d of %s was overwritten by the writer while the zero-copy view was held: discard every value "
        "read from it. Hold views for less than (slots - 1) frame intervals, or copy with Reader.next()/copy()."
        % (sequence, reader._what), E_LAPPED)
