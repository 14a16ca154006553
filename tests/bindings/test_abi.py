"""The bindings' struct mirrors are checked against the loaded library; a mismatch refuses to run."""
import ctypes
import os
import subprocess
import sys

import pytest

import keplershm
from keplershm import _abi, _lib
from keplershm.errors import LayoutMismatch

PYTHON = os.environ.get("KEPLERSHM_TEST_PYTHON", sys.executable)


def test_mirrors_match_the_built_library():
    _abi.check_mirrors(_lib.lib.keplershm_record_size, _lib.library_schema(), _lib.path)
    assert keplershm.library_path == os.environ.get("KEPLERSHM_LIBRARY", keplershm.library_path)


def test_a_moved_field_is_named_in_the_error():
    class Process(ctypes.Structure):  # cpu_time_ns and comm swapped
        _fields_ = [f for f in _abi.Process._fields_ if f[0] not in ("comm", "cpu_time_ns")]
        _fields_.insert(6, ("cpu_time_ns", ctypes.c_uint64))
        _fields_.insert(7, ("comm", ctypes.c_char * 16))
    with pytest.raises(LayoutMismatch) as e:
        _abi.check_mirrors(_lib.lib.keplershm_record_size, _lib.library_schema(), "libtest",
                           {_abi.RECORD_PROCESS: Process})
    assert "Process.cpu_time_ns is at offset 32" in str(e.value)
    assert "refuse to run" in str(e.value)


def test_a_field_unknown_to_the_library_is_reported():
    class ZoneSample(ctypes.Structure):
        _fields_ = _abi.ZoneSample._fields_[:-1] + [("extra", ctypes.c_uint64)]
    with pytest.raises(LayoutMismatch, match="ZoneSample.extra exists in the bindings but not in the library"):
        _abi.check_mirrors(_lib.lib.keplershm_record_size, _lib.library_schema(), "libtest",
                           {_abi.RECORD_ZONE_SAMPLE: ZoneSample})


def _import_with(library, skew):
    env = dict(os.environ, KEPLERSHM_LIBRARY=library, KEPLERSHM_SKEW=skew)
    return subprocess.run([PYTHON, "-c", "import keplershm"], env=env, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("skew, expected", [
    ("size", "Process is 192 bytes in the bindings but 200 in the library"),
    ("offset", "Process.cpu_time_ns is at offset 48 (8 bytes) in the bindings but at offset 56"),
])
def test_import_refuses_a_library_with_another_layout(skew, expected):
    skewed = os.environ.get("KEPLERSHM_SKEWED_LIBRARY")
    if not skewed or not os.path.exists(skewed):
        pytest.skip("KEPLERSHM_SKEWED_LIBRARY not built (run through CTest)")
    assert _import_with(skewed, "").returncode == 0  # the stand-in itself is fine without a skew
    result = _import_with(skewed, skew)
    assert result.returncode != 0
    assert "LayoutMismatch" in result.stderr and expected in result.stderr, result.stderr


def test_import_names_the_places_it_looked_for_the_library(tmp_path):
    result = _import_with(str(tmp_path / "libkeplershm.so.1"), "")
    assert result.returncode != 0
    assert "cannot load libkeplershm" in result.stderr and "KEPLERSHM_LIBRARY" in result.stderr


def test_library_schema_describes_every_record():
    schema = _lib.library_schema()
    assert {f.record_type for f in schema} >= set(_abi.RECORD_MIRRORS)
