"""keplershm: Python research clients for the keplershm shared-memory protocol.

Reads the frames that ``kepler-collect`` publishes (live, from /dev/shm, or from a recording) as numpy
structured arrays, records them, trains XGBoost power models that ``kepler-estimate`` serves, and
compares models offline; a model written in Python answers live frames through the estimates channel
(:func:`publish_estimates`), which kepler-estimate imports as a named model. Pure ctypes over
``libkeplershm.so.1`` (see :mod:`keplershm._lib` for where the library is looked for); importing checks
that the library's struct layout matches these bindings.

    import keplershm
    with keplershm.Reader("kepler") as reader:
        for frame in reader:
            print(frame.sequence, frame.processes["cpu_time_ns"].sum())
"""
from . import errors
from ._lib import path as library_path
from .errors import (EndOfRecording, FrameOverwritten, KeplershmError, LayoutMismatch, NotYet, RecordingTruncated,
                     Timeout, WriterGone)
from .estimates import EstimatesWriter, publish_estimates
from .reader import Frame, Reader, SegmentInfo, Zone
from .recorder import Recorder, record

__version__ = "0.1.0"
__all__ = ["Reader", "Frame", "SegmentInfo", "Zone", "Recorder", "record", "errors", "KeplershmError",
           "LayoutMismatch", "NotYet", "FrameOverwritten", "Timeout", "WriterGone", "EndOfRecording",
           "RecordingTruncated", "library_path", "EstimatesWriter", "publish_estimates"]
