"""Frames from a remote ``kepler-feed`` (gRPC), as the same :class:`~keplershm.reader.Frame` objects the
local :class:`~keplershm.reader.Reader` yields: numpy structured arrays per section, with the dtypes the
producer's field schema describes, the frame header, the node's facts (``frame.segment``).

    from keplershm.remote import Subscriber
    with Subscriber("node-1:9106", sections=["processes", "zones"], token="...", tls="ca.pem") as feed:
        for frame in feed:
            print(frame.sequence, frame.processes["cpu_time_ns"].sum())

Differences from a local frame, all stated: a section selected with a subset of fields carries only those
fields (its dtype keeps their offsets and the record size); with a workload filter the workloads section
holds only matching workloads and ``workload_index`` points into it; the header's ``section_count`` and
``frame_size`` (bookkeeping of the local copy) are 0; ``frame.start_gap`` tells how much of a requested
``from_sequence`` the feed no longer held.

Estimates joined by the feed (``kepler-feed --estimates SEGMENT``, e.g. kepler-estimate's
``--publish-estimates PREFIX`` segments ``PREFIX-<model>``): with section ``estimates`` selected (or all
sections), ``frame.model_estimates`` is a dict, segment name → :class:`ModelEstimates`, holding each
source's answer to that very frame (matched on generation and sequence) or why it is missing.

The gRPC stubs are generated from ``kepler-feed/proto`` at build time (``<build>/kepler-feed/python``):
that directory must be on ``sys.path`` (PYTHONPATH) or named by ``$KEPLERSHM_FEED_STUBS``.
"""
import ipaddress
import os
import sys
import types

from . import _abi
from .errors import InvalidArgument, KeplershmError, NoSpace
from .reader import OK, SECTION_IDS, SECTIONS, ZONE_KINDS, Frame, Generation, Reader, Zone
from .recording_file import Recorder, RecordResult, stop_reason
from .schema import FieldSpec, Schema, check_fields, np

STUBS_ENV = "KEPLERSHM_FEED_STUBS"
MAX_MESSAGE_BYTES = 256 << 20
_HEADER_FIELDS = ("interval_start_ns", "interval_end_ns", "interval_start_realtime_ns", "interval_end_realtime_ns",
                  "process_read_time_ns", "metric_mask", "flags", "source", "power_source", "processes_seen",
                  "producer_sequence", "producer_generation")


class FeedError(KeplershmError):
    """The feed refused or ended a subscription. ``status`` names the gRPC status code: RESOURCE_EXHAUSTED
    (fell behind, or too many subscribers), INVALID_ARGUMENT, UNAUTHENTICATED, UNAVAILABLE ..."""

    def __init__(self, message, status):
        super().__init__(message)
        self.status = status


def stubs():
    """(grpc, feed_pb2, feed_pb2_grpc), or ImportError saying what to install or build."""
    try:
        import grpc
    except ImportError as e:
        raise ImportError("keplershm.remote needs gRPC for Python (Debian: python3-grpcio python3-protobuf)") from e
    extra = os.environ.get(STUBS_ENV)
    if extra and extra not in sys.path:
        sys.path.insert(0, extra)
    try:
        from keplershm_feed.v1 import feed_pb2, feed_pb2_grpc
    except ImportError as e:
        raise ImportError("the feed's generated stubs (keplershm_feed.v1.feed_pb2) are not importable: build "
                          "kepler-feed (it generates them into <build>/kepler-feed/python) and put that directory "
                          "on PYTHONPATH or in $%s" % STUBS_ENV) from e
    return grpc, feed_pb2, feed_pb2_grpc


def _read(path):
    with open(path, "rb") as f:
        return f.read()


def channel(target, tls=None):
    """A gRPC channel. ``tls``: None/False plain text; True the system's CAs; a path to the CA (PEM) that
    signed the feed's certificate; or a dict with ``ca``, and ``cert`` + ``key`` for a client certificate."""
    grpc = stubs()[0]
    # gRPC refuses messages above 4 MB by default; a frame of 100,000 processes with every field is ~4.4 MB.
    options = [("grpc.max_receive_message_length", MAX_MESSAGE_BYTES)]
    if not tls:
        return grpc.insecure_channel(target, options)
    if tls is True:
        return grpc.secure_channel(target, grpc.ssl_channel_credentials(), options)
    if isinstance(tls, (str, os.PathLike)):
        tls = {"ca": tls}
    unknown = set(tls) - {"ca", "cert", "key"}
    if unknown:
        raise ValueError("unknown tls keys %s (known: ca, cert, key)" % ", ".join(sorted(unknown)))
    if bool(tls.get("cert")) != bool(tls.get("key")):
        raise ValueError("a client certificate needs both tls['cert'] and tls['key']")
    creds = grpc.ssl_channel_credentials(root_certificates=_read(tls["ca"]) if tls.get("ca") else None,
                                         private_key=_read(tls["key"]) if tls.get("key") else None,
                                         certificate_chain=_read(tls["cert"]) if tls.get("cert") else None)
    return grpc.secure_channel(target, creds, options)


def _hosts_of(target):
    """The host names or addresses a gRPC target names; None for a local socket (unix:, unix-abstract:)."""
    if target.startswith(("unix:", "unix-abstract:")):
        return None
    scheme, colon, rest = target.partition(":")
    if colon and scheme in ("ipv4", "ipv6"):
        return [_host_of(address) for address in rest.split(",")]
    if colon and scheme == "dns":
        # dns:[//authority/]host[:port]: the authority is the DNS server asked, not the peer.
        rest = rest[2:].partition("/")[2] if rest.startswith("//") else rest
        return [_host_of(rest)]
    return [_host_of(target)]


def _host_of(address):
    """host of "host:port", "[v6]:port", "host" or a bare IPv6 address."""
    if address.startswith("["):
        return address[1:].partition("]")[0]
    if address.count(":") > 1:
        return address  # a bare IPv6 address: its colons are not a port separator
    return address.partition(":")[0]


def _is_loopback(host):
    if host.lower().rstrip(".") == "localhost":
        return True
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return False  # a name other than localhost may resolve anywhere
    mapped = getattr(ip, "ipv4_mapped", None)
    return ip.is_loopback or bool(mapped and mapped.is_loopback)


def check_token_channel(target, token, tls, allow_plaintext_token=False):
    """Refuses to send a bearer token in plain text beyond this machine: anyone on the path could read it
    and then subscribe as this client. Loopback and unix-socket targets never leave the host."""
    if not token or tls or allow_plaintext_token:
        return
    hosts = _hosts_of(target)
    if hosts is None or (hosts and all(_is_loopback(h) for h in hosts)):
        return
    raise InvalidArgument("refusing to send the bearer token to kepler-feed at %s over plain text (no TLS): give "
                          "tls= the CA file that signed the feed's certificate (record: --tls-ca FILE), or accept "
                          "that the token can be read on the network with allow_plaintext_token=True "
                          "(record: --allow-plaintext-token)" % target)


def _zones(zones):
    return [Zone(z.index, z.name, ZONE_KINDS.get(z.kind, "unknown-%d" % z.kind), z.socket, z.power_source,
                 z.max_energy_range_uj) for z in zones]


class ModelEstimates:
    """One estimates source's answer to the frame that carries it (PROTOCOL.md §8, served by the feed).

    ``shm_name``: the source segment; ``model`` and ``version``: what its header says; ``zones``: the zones
    the rows' ``zone_index`` names; ``rows``: a numpy structured array with the local Reader's estimates
    dtype (``zone_index``, ``workload_index``, ``power_watts``, ``energy_joules`` ...), None when
    ``missing`` (then ``reason`` says why: no answer within the feed's wait, producer gone, refused);
    ``generation``/``sequence``: the estimates frame's own identity in its segment.
    """

    def __init__(self, message, rows):
        self.shm_name, self.model, self.version = message.shm_name, message.model, message.version
        self.missing, self.reason = message.missing, message.reason
        self.generation, self.sequence = message.generation, message.sequence
        self.zones = _zones(message.zones)
        self.rows = rows

    def __repr__(self):
        if self.missing:
            return "ModelEstimates(%r missing: %s)" % (self.shm_name, self.reason)
        return "ModelEstimates(%r model=%r, %d rows)" % (self.shm_name, self.model, len(self.rows))


def _generation(segment):
    """A reader.Generation (the node's facts) from the feed's Segment message; the message is kept as ``.remote``."""
    gen = Generation.__new__(Generation)
    gen.generation = segment.generation
    gen.node_name = segment.node_name
    gen.cpu_model = segment.cpu_model
    gen.cpu_count = segment.cpu_count
    gen.metric_mask = segment.metric_mask
    gen.frame_header_size = segment.frame_header_size
    gen.clock_ticks_per_second = segment.clock_ticks_per_second
    gen.boot_time_realtime_ns = segment.boot_time_realtime_ns
    gen.zones = _zones(segment.zones)
    gen.remote = segment
    return gen


def _schema(segment):
    return Schema(check_fields(FieldSpec(f.name, f.unit, f.record_type, f.type, f.offset, f.count, f.size)
                               for f in segment.schema))


def _values(column, spec):
    if spec.type == _abi.TYPE_CHAR:
        return np.array(list(column.text), dtype="S%d" % spec.count)
    values = {_abi.TYPE_U32: column.u32, _abi.TYPE_U64: column.u64, _abi.TYPE_F64: column.f64}[spec.type]
    return np.array(values, dtype={_abi.TYPE_U32: "<u4", _abi.TYPE_U64: "<u8", _abi.TYPE_F64: "<f8"}[spec.type])


def _records(schema, record_type, section):
    """A numpy structured array from a columnar Section: the producer's dtype, limited to the fields sent."""
    columns = {c.name: c for c in section.columns}
    specs = [f for f in schema.fields_of(record_type) if f.name in columns]
    # The producer's record size (the schema leaves out reserved fields): the same itemsize as a local frame's.
    stride = max(section.stride, schema.record_size(record_type))
    every = len(specs) == len(schema.fields_of(record_type))
    array = np.zeros(section.rows, dtype=schema.dtype(record_type, stride, None if every else [f.name for f in specs]))
    for spec in specs:
        values = _values(columns[spec.name], spec)
        width = 1 if spec.type == _abi.TYPE_CHAR else spec.count
        if values.size != section.rows * width:
            raise KeplershmError("column %s has %d values for %d rows of width %d" %
                                 (spec.name, values.size, section.rows, width))
        array[spec.name] = values.reshape((section.rows, width)) if width > 1 else values
    return array


class Subscriber:
    """A subscription to a kepler-feed at ``target`` ("host:port"); iterate it for frames.

    ``sections``: names (processes, workloads, zones, cpus, strings, unaccounted, estimates, gpu_devices,
    gpu_usage), or a dict of name → list of fields; default every section with every field. ``containers``, ``pods``,
    ``namespaces``: keep only processes of those workloads; ``top_n``: the N busiest processes.
    ``from_sequence``: start at that frame while the feed holds it (0: the newest). ``token``: the
    feed's bearer token; ``tls``: see :func:`channel`. A token is sent in plain text (no ``tls``) only to a
    loopback target (localhost, 127.0.0.0/8, [::1]) or a ``unix:`` socket, unless
    ``allow_plaintext_token=True`` says that is meant; otherwise the constructor raises InvalidArgument (a
    ValueError). ``timeout``: seconds the whole subscription may last.
    """

    def __init__(self, target, sections=None, *, containers=(), pods=(), namespaces=(), top_n=0, from_sequence=0,
                 token=None, tls=None, timeout=None, allow_plaintext_token=False):
        check_token_channel(target, token, tls, allow_plaintext_token)
        if np is None:
            raise RuntimeError("keplershm.remote needs numpy (python3-numpy)")
        self._grpc, self._pb, pb_grpc = stubs()
        self.target = target
        self.timeout = timeout
        self._channel = channel(target, tls)
        self._stub = pb_grpc.FeedStub(self._channel)
        self._metadata = (("authorization", "Bearer " + token),) if token else ()
        self._request, self._wanted = self._make_request(sections, containers, pods, namespaces, top_n, from_sequence)
        self._call = None
        self._closed = False
        self._schema = None
        self._segment = None
        self.last_sequence = 0

    def _make_request(self, sections, containers, pods, namespaces, top_n, from_sequence):
        request = self._pb.SubscribeRequest(from_sequence=from_sequence)
        request.filter.containers.extend(containers)
        request.filter.pods.extend(pods)
        request.filter.namespaces.extend(namespaces)
        request.filter.top_n_by_cpu = top_n
        if sections is None:
            return request, [name for name, _ in SECTIONS.values()]
        items = sections.items() if isinstance(sections, dict) else ((name, ()) for name in sections)
        wanted = []
        for name, fields in items:
            request.sections.add(name=name, fields=list(fields or ()))
            wanted.append(name)
        return request, wanted

    def describe(self, timeout=30):
        """The feed's Description message (node facts, schema, limits, counters)."""
        try:
            return self._stub.Describe(self._pb.DescribeRequest(), metadata=self._metadata, timeout=timeout)
        except self._grpc.RpcError as e:
            raise FeedError("kepler-feed at %s: %s: %s" % (self.target, e.code().name, e.details()), e.code().name) from None

    def frames(self):
        """Yields frames until the feed ends the subscription (FeedError says why) or :meth:`close`."""
        self._call = self._stub.Subscribe(self._request, metadata=self._metadata, timeout=self.timeout)
        try:
            for message in self._call:
                frame = self.frame_of(message)
                self.last_sequence = frame.sequence
                yield frame
        except self._grpc.RpcError as e:
            if self._closed and e.code() == self._grpc.StatusCode.CANCELLED:
                return
            raise FeedError("kepler-feed at %s ended the subscription: %s: %s" %
                            (self.target, e.code().name, e.details()), e.code().name) from None

    __iter__ = frames

    def frame_of(self, message):
        """A Frame from one Frame message of this subscription."""
        if message.HasField("segment"):
            self._segment = _generation(message.segment)
            self._schema = _schema(message.segment)
        if self._schema is None:
            raise KeplershmError("frame %d arrived before the segment that describes it" % message.sequence)
        view = types.SimpleNamespace(sequence=message.sequence, generation=message.generation, missed=message.missed)
        header = np.zeros(1, dtype=self._schema.dtype(_abi.RECORD_FRAME, self._segment.frame_header_size))[0]
        header["sequence"], header["generation"] = message.sequence, message.generation
        for name in _HEADER_FIELDS:
            header[name] = getattr(message.header, name)
        sections = dict.fromkeys(self._wanted)
        for section in message.sections:
            record_type = SECTIONS.get(section.id, (None, None))[1]
            if section.name not in SECTION_IDS:
                continue  # a section newer than these bindings
            sections[section.name] = (bytes(section.data) if record_type is None
                                      else _records(self._schema, record_type, section))
        frame = Frame(view, header, self._segment, sections, in_place=False)
        frame.start_gap = message.start_gap
        frame.model_estimates = {e.shm_name: ModelEstimates(e, None if e.missing else
                                                            _records(self._schema, _abi.RECORD_ESTIMATE, e.rows))
                                 for e in message.estimates}
        return frame

    def close(self):
        self._closed = True
        if self._call is not None:
            self._call.cancel()
        self._channel.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


# -- recording a remote feed ------------------------------------------------------------------------------
# The recording format is written by libkeplershm only (nothing here re-implements it), and its recorder
# appends frames that a reader read. So remote frames are republished, through the C ABI's writer, into a
# private relay segment that only this process reads, and recorded from there: the file is the usual
# format, read by Reader, replay and training like any local recording. The relay writer numbers frames
# itself (1, 2, ...) under its own generation; the feed's missed frames are counted in the result.

def _relay_writer(name, frame, old):
    """A Writer for the relay segment with the remote node's facts and room for `frame` twice over, and
    the capacities it got (a frame that outgrows them gets a new writer: growth inside the writer would
    truncate the frame that asked for it)."""
    from .writer import Writer
    if old is not None:
        old.close(keep_name=True)  # the successor takes the name; the reader follows it
    gen = frame.segment

    def rows(name, floor):
        records = getattr(frame, name)
        return max(floor, 2 * (0 if records is None else len(records)))
    zones = [{"name": z.name, "kind": z.kind if z.kind in ZONE_KINDS.values() else "other", "socket": z.socket,
              "power_source": z.power_source, "max_energy_range_uj": z.max_energy_range_uj} for z in gen.zones]
    caps = {"processes": rows("processes", 1024), "workloads": rows("workloads", 64), "cpus": rows("cpus", 64),
            "zones": max(len(zones), rows("zones", 1)), "strings": max(65536, 2 * len(frame.strings or b"")),
            "gpu_devices": rows("gpu_devices", 0), "gpu_usage": rows("gpu_usage", 0)}
    writer = Writer(name, slot_count=16, process_capacity=caps["processes"], workload_capacity=caps["workloads"],
                    zone_capacity=caps["zones"], cpu_capacity=caps["cpus"], string_capacity=caps["strings"],
                    metric_mask=gen.metric_mask, node_name=gen.node_name or None, cpu_model=gen.cpu_model or None,
                    cpu_count=gen.cpu_count, zones=zones, replace_live=True, gpu_device_capacity=caps["gpu_devices"],
                    gpu_usage_capacity=caps["gpu_usage"])
    return writer, caps


def _fits(caps, frame):
    return all(getattr(frame, name) is None or len(getattr(frame, name)) <= cap for name, cap in caps.items())


def _copy_records(target, source):
    for name in source.dtype.names:
        if name in target.dtype.names:
            target[name] = source[name]


_COUNT_OF = {"processes": "process_count", "workloads": "workload_count", "zones": "zone_count", "cpus": "cpu_count",
             "estimates": "estimate_count", "gpu_devices": "gpu_device_count", "gpu_usage": "gpu_usage_count"}


def _publish(writer, frame):
    """Republishes a remote frame; the writer sets sequence and generation."""
    draft = writer.begin()
    for name in _HEADER_FIELDS:
        draft.header[name] = frame.header[name]
    for name in ("processes", "workloads", "zones", "cpus", "estimates", "gpu_devices", "gpu_usage"):
        records = getattr(frame, name)
        if records is None or getattr(draft, name) is None:
            continue
        _copy_records(getattr(draft, name)[:len(records)], records)
        setattr(draft, _COUNT_OF[name], len(records))
    draft.processes_wanted = draft.process_count
    if frame.unaccounted is not None:
        for name in frame.unaccounted.dtype.names:
            draft.unaccounted[name] = frame.unaccounted[name]
    if frame.strings:
        draft.strings[:len(frame.strings)] = np.frombuffer(frame.strings, dtype=np.uint8)
        draft.string_used = len(frame.strings)
    return writer.commit(draft)


def record_remote(target, out, duration_s=None, max_bytes=0, sections=None, token=None, tls=None, progress=None,
                  allow_plaintext_token=False):
    """Records frames of the kepler-feed at `target` into `out` (the usual recording format) until
    `duration_s`, `max_bytes`, the feed ending the subscription, or Ctrl-C. Returns a RecordResult.
    `token`, `tls` and `allow_plaintext_token` as for :class:`Subscriber`."""
    import secrets
    import time
    relay = "keplershm-relay-%d-%s" % (os.getpid(), secrets.token_hex(4))
    frames = missed = 0
    stopped = "duration reached"
    deadline = None if duration_s is None else time.monotonic() + duration_s
    writer = reader = generation = None
    caps = {}
    subscriber = Subscriber(target, sections=sections, token=token, tls=tls, timeout=duration_s,
                            allow_plaintext_token=allow_plaintext_token)
    try:
        with Recorder(out, max_bytes) as recorder:
            for frame in subscriber:
                if writer is None or frame.generation != generation or not _fits(caps, frame):
                    (writer, caps), generation = _relay_writer(relay, frame, writer), frame.generation
                _publish(writer, frame)
                if reader is None:
                    reader = Reader.live(relay)
                rc, _ = recorder.append_next(reader, 10000)
                if rc != OK:
                    raise KeplershmError("relay segment '%s' did not deliver the frame it was given (%d)" % (relay, rc))
                frames, missed = frames + 1, missed + frame.missed
                if progress:
                    progress(frames, missed)
                if deadline is not None and time.monotonic() >= deadline:
                    break
    except NoSpace as e:
        stopped = stop_reason(e, max_bytes)
    except FeedError as e:
        if e.status == "DEADLINE_EXCEEDED":
            stopped = "duration reached"
        else:
            stopped = "the feed ended the subscription (%s)" % e
    except KeyboardInterrupt:
        stopped = "interrupted"
    finally:
        subscriber.close()
        if reader is not None:
            reader.close()
        if writer is not None:
            writer.close()
    size = os.path.getsize(out) if os.path.exists(out) else 0
    return RecordResult(frames, missed, size, stopped)
