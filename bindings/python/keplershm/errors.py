"""Exceptions of the keplershm bindings.

Every failure of the C library arrives as a :class:`KeplershmError` subclass chosen by its error code,
with the library's own text (``keplershm_strerror``) and its detail (``keplershm_last_error_detail``:
the file, field or value at fault), so a researcher sees *why* a segment or recording was refused.
Outcomes that are part of normal reading (not yet published, overwritten, writer gone, end of a
recording) have their own classes so callers can catch exactly those.
"""


class KeplershmError(Exception):
    """A libkeplershm call failed. ``code`` is the negative keplershm_error code (0 if none)."""

    def __init__(self, message, code=0, detail=""):
        super().__init__(message)
        self.code = code
        self.detail = detail


class LibraryNotFound(KeplershmError, ImportError):
    """libkeplershm.so.1 could not be loaded from any of the places the bindings look."""


class LayoutMismatch(KeplershmError, ImportError):
    """The bindings' ctypes mirrors disagree with the layout the loaded library reports.

    Raised at import: reading frames with a wrong layout would give silently wrong numbers, so the
    bindings refuse to run instead.
    """


class InvalidArgument(KeplershmError, ValueError):
    pass


class NotFound(KeplershmError, FileNotFoundError):
    pass


class PermissionDenied(KeplershmError, PermissionError):
    pass


class BadMagic(KeplershmError):
    """The file or segment is not a keplershm segment or recording."""


class UnsupportedMajor(KeplershmError):
    pass


class CorruptData(KeplershmError):
    """A size, count or offset in a segment, frame or recording is out of bounds."""


class NotYet(KeplershmError):
    """The frame asked for has not been published yet."""


class FrameOverwritten(KeplershmError):
    """The writer lapped the reader: the frame was overwritten before or while it was read.

    For a zero-copy view this means the numbers read from it may be torn and must be discarded.
    """


class Timeout(KeplershmError, TimeoutError):
    pass


class WriterGone(KeplershmError):
    """The writer retired, was replaced, or its heartbeat went stale, and no successor appeared."""


class Exists(KeplershmError):
    pass


class NoSpace(KeplershmError):
    """A size cap (recording --max-size, segment byte cap) or the filesystem's free space was hit.
    The recorder says which: :class:`SizeCapReached` or :class:`DiskFull`."""


class SizeCapReached(NoSpace):
    """A recording reached the ``max_bytes`` its caller set: an expected end, the file is whole."""


class DiskFull(NoSpace):
    """The filesystem had no room for a recording's next bytes (ENOSPC, or EFBIG past the file size limit):
    the recording ends with the frames written before it."""


class CapacityExceeded(KeplershmError):
    pass


class IOFailure(KeplershmError, OSError):
    pass


class EndOfRecording(KeplershmError):
    pass


class RecordingTruncated(KeplershmError):
    """The recording ends in the middle of a record (a recorder that was killed)."""


class BadState(KeplershmError):
    pass


class UnknownOption(KeplershmError):
    pass


class NoMemory(KeplershmError, MemoryError):
    pass


class InputError(ValueError):
    """Untrusted input (CSV, model directory, estimates file) is unusable; the text says why."""


# keplershm_error codes (keplershm.h) → exception class.
BY_CODE = {
    -1: InvalidArgument,
    -2: NotFound,
    -3: PermissionDenied,
    -4: BadMagic,
    -5: UnsupportedMajor,
    -6: CorruptData,
    -7: NotYet,
    -8: FrameOverwritten,
    -9: Timeout,
    -10: WriterGone,
    -11: Exists,
    -12: NoSpace,
    -13: CapacityExceeded,
    -14: IOFailure,
    -15: EndOfRecording,
    -16: RecordingTruncated,
    -17: BadState,
    -18: NoMemory,
    -19: UnknownOption,
    -20: KeplershmError,
}
