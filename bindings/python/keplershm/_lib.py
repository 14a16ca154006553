"""Loading libkeplershm.so.1 and declaring the C ABI for ctypes.

Where the library comes from, in order:

1. ``$KEPLERSHM_LIBRARY``: a path to the .so file (what CTest and CI set);
2. next to this package: ``keplershm/libkeplershm.so.1`` (a wheel or a copy that bundles it);
3. the system search path (``ldconfig`` cache, ``LD_LIBRARY_PATH``).

At load the ABI major and the struct layout are checked (see :mod:`keplershm._abi`), so a mismatched
library fails at import with a message, never later with wrong numbers.
"""
import ctypes as C
import os

from . import _abi
from .errors import BY_CODE, KeplershmError, LayoutMismatch, LibraryNotFound

SONAME = "libkeplershm.so.1"
ENV_VAR = "KEPLERSHM_LIBRARY"

_P = C.c_void_p
_PROTOTYPES = {
    # name: (restype, argtypes)
    "keplershm_abi_version": (C.c_uint32, []),
    "keplershm_strerror": (C.c_char_p, [C.c_int]),
    "keplershm_last_error_detail": (C.c_char_p, []),
    "keplershm_record_size": (C.c_uint32, [C.c_uint32]),
    "keplershm_schema": (C.c_int, [C.POINTER(_abi.Field), C.c_uint32, C.POINTER(C.c_uint32)]),
    "keplershm_reader_open": (C.c_int, [C.c_char_p, C.POINTER(_abi.ReaderOpts), C.POINTER(_P)]),
    "keplershm_reader_open_recording": (C.c_int, [C.c_char_p, C.POINTER(_abi.ReaderOpts), C.POINTER(_P)]),
    "keplershm_reader_close": (None, [_P]),
    "keplershm_reader_info": (C.c_int, [_P, C.POINTER(_abi.SegmentInfo)]),
    "keplershm_reader_schema": (C.c_int, [_P, C.POINTER(_abi.Field), C.c_uint32, C.POINTER(C.c_uint32)]),
    "keplershm_reader_latest": (C.c_int, [_P, C.POINTER(C.c_uint64)]),
    "keplershm_reader_wait": (C.c_int, [_P, C.c_uint64, C.c_int32]),
    "keplershm_reader_acquire": (C.c_int, [_P, C.c_uint64, C.POINTER(_abi.View)]),
    "keplershm_reader_validate": (C.c_int, [_P, C.POINTER(_abi.View)]),
    "keplershm_reader_copy": (C.c_int, [_P, C.c_uint64, C.POINTER(_abi.View)]),
    "keplershm_reader_next": (C.c_int, [_P, C.c_int32, C.POINTER(_abi.View)]),
    "keplershm_reader_reattach": (C.c_int, [_P]),
    "keplershm_view_export": (C.c_int, [C.POINTER(_abi.View), _P, C.c_size_t, C.POINTER(C.c_size_t)]),
    "keplershm_view_section": (C.c_int, [C.POINTER(_abi.View), C.c_uint32, C.POINTER(_P), C.POINTER(C.c_uint32),
                                         C.POINTER(C.c_uint32)]),
    "keplershm_writer_create": (C.c_int, [C.c_char_p, C.POINTER(_abi.WriterOpts), C.POINTER(_P)]),
    "keplershm_writer_begin": (C.c_int, [_P, C.POINTER(_abi.Draft)]),
    "keplershm_writer_commit": (C.c_int, [_P, C.POINTER(_abi.Draft)]),
    "keplershm_writer_heartbeat": (C.c_int, [_P]),
    "keplershm_writer_set_overhead": (C.c_int, [_P, C.c_uint64, C.c_uint64]),
    "keplershm_writer_info": (C.c_int, [_P, C.POINTER(_abi.SegmentInfo)]),
    "keplershm_writer_close": (None, [_P, C.c_int]),
    "keplershm_recorder_open": (C.c_int, [C.c_char_p, C.POINTER(_abi.RecorderOpts), C.POINTER(_P)]),
    "keplershm_recorder_append": (C.c_int, [_P, _P, C.POINTER(_abi.View)]),
    "keplershm_recorder_follow": (C.c_int, [_P, _P, C.c_uint64, C.POINTER(C.c_uint64)]),
    "keplershm_recorder_close": (C.c_int, [_P]),
}


def _candidates():
    """(description, path-or-name) pairs, in search order."""
    env = os.environ.get(ENV_VAR)
    if env:
        return [("$%s" % ENV_VAR, env)]
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), SONAME)
    return [("next to the package", here), ("system library path", SONAME)]


def _open():
    tried = []
    for where, path in _candidates():
        if where == "next to the package" and not os.path.exists(path):
            tried.append("%s (%s): absent" % (where, path))
            continue
        try:
            return C.CDLL(path), path
        except OSError as e:
            tried.append("%s (%s): %s" % (where, path, e))
    raise LibraryNotFound("cannot load libkeplershm: tried\n  " + "\n  ".join(tried) +
                          "\nBuild it (cmake --build build --target keplershm) and set %s=/path/to/%s." % (ENV_VAR, SONAME))


def _declare(lib, path):
    for name, (restype, argtypes) in _PROTOTYPES.items():
        try:
            fn = getattr(lib, name)
        except AttributeError:
            raise LibraryNotFound("%s does not export %s: it is not a libkeplershm of ABI major %d" %
                                  (path, name, _abi.ABI_MAJOR)) from None
        fn.restype = restype
        fn.argtypes = argtypes


lib, path = _open()
_declare(lib, path)


def error_text(code):
    """The library's text for an error code."""
    return lib.keplershm_strerror(code).decode("utf-8", "replace")


def raise_for(code, context=""):
    """Raise the exception class of a negative keplershm error code, with the library's detail."""
    detail = (lib.keplershm_last_error_detail() or b"").decode("utf-8", "replace")
    message = error_text(code)
    if detail:
        message = "%s: %s" % (message, detail)
    if context:
        message = "%s: %s" % (context, message)
    raise BY_CODE.get(code, KeplershmError)(message, code, detail)


def check(code, context=""):
    """Return ``code`` if it is not negative, else raise."""
    if code < 0:
        raise_for(code, context)
    return code


def library_schema():
    """The field schema compiled into the loaded library (list of FieldSpec)."""
    from .schema import fields_from_ctypes
    count = C.c_uint32(0)
    check(lib.keplershm_schema(None, 0, C.byref(count)), "keplershm_schema")
    fields = (_abi.Field * max(count.value, 1))()
    check(lib.keplershm_schema(fields, count.value, C.byref(count)), "keplershm_schema")
    return fields_from_ctypes(fields, count.value)


def _check_abi():
    version = lib.keplershm_abi_version()
    major = version >> 16
    if major != _abi.ABI_MAJOR:
        raise LayoutMismatch("%s has ABI %d.%d; these bindings speak ABI major %d" %
                             (path, major, version & 0xFFFF, _abi.ABI_MAJOR))
    _abi.check_mirrors(lib.keplershm_record_size, library_schema(), path)


_check_abi()
