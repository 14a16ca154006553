"""An open recording file: the C ABI's recorder (``keplershm_recorder_*``) and what a recording run reports.

Shared by the two ways of recording, a live segment (:mod:`keplershm.recorder`) and a remote kepler-feed
(:mod:`keplershm.remote`); both import it, neither imports the other for it. The public names are
re-exported by :mod:`keplershm.recorder` (and :class:`Recorder` by the package).
"""
import ctypes as C
from collections import namedtuple

from . import _abi
from ._lib import check, lib
from .errors import DiskFull, NoSpace, SizeCapReached
from .reader import OK

RecordResult = namedtuple("RecordResult", "frames missed bytes stopped_because")


# The C recorder's NO_SPACE covers both its own cap and the filesystem's ENOSPC/EFBIG; its detail text
# for the cap (libkeplershm/src/recorder.cpp) tells them apart.
_CAP_DETAIL = "reached its cap"


class Recorder:
    """An open recording file; frames are appended with :meth:`append_next` from a live Reader.

    Every call raises :class:`~keplershm.errors.SizeCapReached` at ``max_bytes`` and
    :class:`~keplershm.errors.DiskFull` when the filesystem has no room (both are ``NoSpace``)."""

    def __init__(self, path, max_bytes=0, fsync_every=0):
        opts = _abi.RecorderOpts(C.sizeof(_abi.RecorderOpts), max_bytes, fsync_every, 0)
        self.path = str(path)
        self.max_bytes = max_bytes
        self._pointer = C.c_void_p()
        self._check(lib.keplershm_recorder_open(self.path.encode(), C.byref(opts), C.byref(self._pointer)),
                    "cannot create recording '%s'" % self.path)

    def _check(self, code, context):
        try:
            return check(code, context)
        except NoSpace as e:
            if self.max_bytes and _CAP_DETAIL in e.detail:
                raise SizeCapReached("recording '%s' reached its size cap of %d bytes" % (self.path, self.max_bytes),
                                     e.code, e.detail) from None
            why = e.detail.rpartition(": ")[2] or str(e)  # the detail ends with strerror: ENOSPC or EFBIG
            raise DiskFull("disk full: no room left for recording '%s' on its filesystem (%s)" % (self.path, why),
                           e.code, e.detail) from None

    def append_next(self, reader, timeout_ms):
        """Copy the reader's next frame into the file. Returns (rc, missed): rc OK, or a wait outcome."""
        view = _abi.View(C.sizeof(_abi.View))
        rc = lib.keplershm_reader_next(reader._h, timeout_ms, C.byref(view))
        if rc != OK:
            return rc, 0
        self._check(lib.keplershm_recorder_append(self._pointer, reader._h, C.byref(view)),
                    "appending to '%s'" % self.path)
        return OK, view.missed

    def close(self):
        """Flush and close; raises if the data could not be written to disk."""
        if self._pointer:
            pointer, self._pointer = self._pointer, C.c_void_p()
            self._check(lib.keplershm_recorder_close(pointer), "closing recording '%s'" % self.path)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def stop_reason(no_space, max_bytes):
    """RecordResult.stopped_because for the NoSpace that ended a recording: the cap, or "disk full: ..."."""
    if isinstance(no_space, SizeCapReached):
        return "size cap of %d bytes reached" % max_bytes
    return str(no_space)
