"""Durations and sizes as the daemons read them on their command lines (CLI11's unit transforms behind one
grammar, ``support/cli/units.hpp``), so that ``--duration`` or ``--max-size`` mean the same here as there.
tests/data/units_cases.json holds both to the same answers.

- duration: NUMBER [UNIT]: a decimal number (``2``, ``2.5``, ``.5``, ``1e3``) then optionally ``ns``, ``us``,
  ``ms``, ``s``, ``m`` or ``min``, ``h``, in any case, a space allowed before it. A bare number is in the
  option's own unit (seconds here). With a unit, the value keeps six significant digits, as CLI11 hands it on.
- size: WHOLE [UNIT]: ``b``, ``k``, ``kb``, ``ki``, ``kib``, ``m``…, up to ``e``, any case, all powers of 1024.
"""
import re

_DURATION = re.compile(r"\s*((?:\d+(?:\.\d*)?|\.\d+)(?:e[+-]?\d+)?)\s*(ns|us|ms|s|min|m|h)?\s*", re.I)
_SIZE = re.compile(r"\s*(0|[1-9]\d*)\s*(b|[kmgtpe]i?b?)?\s*", re.I)
_SECONDS = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0}
_POWERS = "kmgtpe"


def parse_duration(text, bare_unit_s=1.0):
    """'500ms', '2.5s', '5m', '2h', '30' → that many bare units (seconds unless `bare_unit_s` says otherwise).
    Raises ValueError with examples otherwise."""
    m = _DURATION.fullmatch(str(text))
    if not m:
        raise ValueError("expected a duration like 500ms, 2s or 5m (a bare number is seconds), got %r" % text)
    number = float(m.group(1))
    if m.group(2) is None:
        return number
    return float("%g" % (number * _SECONDS[m.group(2).lower()] / bare_unit_s))


def parse_size(text):
    """'4096', '64Ki', '256Mi', '2G' → bytes (every k, m, g… is a power of 1024). Raises ValueError otherwise."""
    m = _SIZE.fullmatch(str(text))
    value = None
    if m:
        unit = (m.group(2) or "b").lower()
        value = int(m.group(1)) * (1 if unit == "b" else 1024 ** (_POWERS.index(unit[0]) + 1))
    if value is None or value >= 1 << 64:
        raise ValueError("expected a size like 4096, 64Ki or 256Mi (powers of 1024), got %r" % text)
    return value
