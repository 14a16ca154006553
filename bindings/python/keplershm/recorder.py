"""Recording a live segment to a file through the C ABI's recorder (``keplershm_recorder_*``).

The file format is written by libkeplershm only (no second implementation here). The loop lives in
Python rather than in ``keplershm_recorder_follow`` so that it waits in 100 ms slices (Ctrl-C stops it
cleanly and the file is closed, flushed and readable) and can report progress.
"""
import sys
import time

from ._lib import raise_for
from .errors import NoSpace
from .reader import E_END, E_TIMEOUT, E_WRITER_GONE, OK, SLICE_MS, STATE_RETIRED, Reader
# Recorder, RecordResult and stop_reason are public here (keplershm.recorder.Recorder) as before the split.
from .recording_file import Recorder, RecordResult, stop_reason  # noqa: F401
# The daemons' grammar for --duration and --max-size (public here as before: keplershm.recorder.parse_size).
from .units import parse_duration, parse_size  # noqa: F401


def record(shm_name, out, duration_s=None, max_bytes=0, writer_grace_s=5.0, progress=None):
    """Record frames of segment `shm_name` into `out` until `duration_s`, `max_bytes`, the writer
    retiring for good, or Ctrl-C. Returns a :class:`RecordResult`; the file is always closed cleanly."""
    import os
    frames = missed = 0
    stopped = "duration reached"
    deadline = None if duration_s is None else time.monotonic() + duration_s
    with Reader.live(shm_name, writer_grace_s=writer_grace_s) as reader, Recorder(out, max_bytes) as recorder:
        gone_since = None
        try:
            while deadline is None or time.monotonic() < deadline:
                left_ms = SLICE_MS if deadline is None else max(1, min(SLICE_MS, int((deadline - time.monotonic()) * 1000)))
                try:
                    rc, lost = recorder.append_next(reader, left_ms)
                except NoSpace as e:
                    stopped = stop_reason(e, max_bytes)
                    break
                if rc == OK:
                    frames, missed, gone_since = frames + 1, missed + lost, None
                    if progress:
                        progress(frames, missed)
                elif rc == E_WRITER_GONE:
                    gone_since = gone_since or time.monotonic()
                    if time.monotonic() - gone_since >= writer_grace_s:
                        retired = reader.info.state == STATE_RETIRED
                        stopped = "writer retired" if retired else "writer gone (heartbeat stale or replaced)"
                        break
                elif rc not in (E_TIMEOUT, E_END):
                    raise_for(rc, "recording '%s'" % shm_name)
        except KeyboardInterrupt:
            stopped = "interrupted"
    size = os.path.getsize(out) if os.path.exists(out) else 0
    return RecordResult(frames, missed, size, stopped)


def _record_remote(args, duration, cap):
    from .remote import record_remote
    token = None
    if args.token_file:
        with open(args.token_file) as f:
            token = f.readline().strip()
    tls = {"ca": args.tls_ca, "cert": args.tls_cert, "key": args.tls_key} if args.tls_ca else None
    sections = args.sections.split(",") if args.sections else None
    print("recording kepler-feed %s into %s%s%s (Ctrl-C stops)" % (
        args.remote, args.out, " for %gs" % duration if duration else "",
        ", at most %d bytes" % cap if cap else ""), file=sys.stderr)
    return record_remote(args.remote, args.out, duration, cap, sections=sections, token=token, tls=tls,
                         allow_plaintext_token=args.allow_plaintext_token)


def main(args):
    """CLI: python3 -m keplershm record (--shm-name NAME | --remote HOST:PORT) --out FILE [--duration D]
    [--max-size SIZE]. Exit status 1 when the disk filled (the file keeps the frames before), else 0."""
    duration = parse_duration(args.duration) if args.duration else None
    cap = parse_size(args.max_size) if args.max_size else 0
    if getattr(args, "remote", None):
        return _report(_record_remote(args, duration, cap))
    print("recording segment '%s' into %s%s%s (Ctrl-C stops)" % (
        args.shm_name, args.out, " for %gs" % duration if duration else "",
        ", at most %d bytes" % cap if cap else ""), file=sys.stderr)
    return _report(record(args.shm_name, args.out, duration, cap))


def _report(result):
    print("%d frames (%d missed), %d bytes: stopped because %s" % (result.frames, result.missed, result.bytes,
                                                                  result.stopped_because), file=sys.stderr)
    return 1 if result.stopped_because.startswith("disk full") else 0
