"""Shared fixtures: unique segment names, synthetic publishers and recordings.

CTest sets KEPLERSHM_LIBRARY (the built libkeplershm.so.1) and PYTHONPATH (bindings/python); run by
hand the same way:
  KEPLERSHM_LIBRARY=build/lib/libkeplershm.so.1 PYTHONPATH=bindings/python /usr/bin/python3 -m pytest tests/bindings
"""
import itertools
import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
_counter = itertools.count()


@pytest.fixture
def shm_name():
    """A segment name no other test (or parallel CTest job) uses; the segment is removed afterwards."""
    name = "kpytest-%d-%d" % (os.getpid(), next(_counter))
    yield name
    try:
        os.unlink("/dev/shm/" + name)
    except FileNotFoundError:
        pass


@pytest.fixture
def recording(tmp_path, shm_name):
    """A 240-frame synthetic recording with measured package and dram power."""
    import synthetic
    path = str(tmp_path / "synthetic.kshm")
    synthetic.make_recording(shm_name, path, frames=240)
    return path
