"""Durations and sizes read by keplershm.units exactly as the daemons read them on their command lines
(CLI11 behind the same grammar): both are held to tests/data/units_cases.json."""
import json
import os

import pytest

from keplershm import recorder
from keplershm.units import parse_duration, parse_size

CASES = json.load(open(os.path.join(os.environ.get("KEPLERSHM_DATA_DIR", os.path.join(os.path.dirname(__file__), "..", "data")),
                                    "units_cases.json")))


@pytest.mark.parametrize("table, bare_unit_s", [("durations_in_seconds", 1.0), ("durations_in_milliseconds", 1e-3)])
def test_durations_read_as_the_daemons_read_them(table, bare_unit_s):
    for text, expected in CASES[table]:
        if expected is None:
            with pytest.raises(ValueError, match="expected a duration like 500ms"):
                parse_duration(text, bare_unit_s)
        else:
            assert parse_duration(text, bare_unit_s) == pytest.approx(expected, rel=1e-12), text


def test_sizes_read_as_the_daemons_read_them():
    for text, expected in CASES["sizes_in_bytes"]:
        if expected is None:
            with pytest.raises(ValueError, match="expected a size like 4096"):
                parse_size(text)
        else:
            assert parse_size(text) == expected, text


def test_the_recorder_keeps_its_names():
    assert recorder.parse_duration is parse_duration and recorder.parse_size is parse_size
