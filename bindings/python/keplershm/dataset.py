"""Training/evaluation tables: one row per frame (or CSV row), node features and measured power per zone.

Two sources give the same :class:`Table`:

* a keplershm recording, with features per MODELS.md (:mod:`keplershm.features`);
* the Kepler model-db CSV form (``timestamp, bpf_cpu_time_us, cpu_cycles, ..., package_power,
  dram_power``), mapped onto the same feature names by :data:`CSV_FEATURES`; columns with no frame
  equivalent become ``csv:<column>`` features (a model using them cannot run in kepler-estimate,
  which says so when it refuses it).

Both are untrusted input: every problem is reported with the file, row and column at fault.
"""
import csv
import math
import os
from collections import namedtuple

from .errors import InputError, KeplershmError, RecordingTruncated
from .features import CSV_PREFIX, FEATURES, METRIC_NAMES, TARGET_ZONES, node_features, zone_power
from .schema import np

Table = namedtuple("Table", "source kind feature_names X targets time_s sequence cpu_model cpu_count unavailable notes")
Table.__doc__ = """Rows of one source.

X: float64 array rows × features (NaN = unavailable); targets: zone → float64 array of watts (NaN where
not measured); time_s: interval end in seconds (for ordering and plots); sequence: frame numbers (CSV:
row numbers from 1); unavailable: feature → reason;
notes: human-readable remarks about how the source was read."""

# Kepler model-db CSV column → (MODELS.md feature, factor turning the per-interval value into the
# feature's unit per interval). bpf_cpu_time_us is taken as MILLISECONDS of CPU time per interval despite
# its name: it reaches ~29,000 per 3 s at ~200 W (about 10 busy cores if ms, 1% of one core if µs).
CSV_FEATURES = {
    "bpf_cpu_time_us": ("cpu_time_ms_per_s", 1.0),
    "cpu_cycles": ("cycles_per_s", 1.0),
    "cpu_instructions": ("instructions_per_s", 1.0),
    "cache_miss": ("cache_misses_per_s", 1.0),
    "bpf_net_tx_irq": ("softirq_net_tx_per_s", 1.0),
    "bpf_net_rx_irq": ("softirq_net_rx_per_s", 1.0),
    "bpf_block_irq": ("softirq_block_per_s", 1.0),
}
CSV_TIME_UNIT_FACTORS = {"ms": 1.0, "us": 1e-3}  # bpf_cpu_time_us → ms
CSV_TARGETS = {"package_power": "package", "core_power": "core", "uncore_power": "uncore", "dram_power": "dram",
               "psys_power": "psys", "platform_power": "platform"}
CSV_IGNORED = {"timestamp", "node_type", "packge_ratio_package"}
MAX_CSV_BYTES = 1 << 30


def is_recording(path):
    """True when `path` starts with the recording magic "KEPLREC1"."""
    with open(path, "rb") as f:
        return f.read(8) == b"KEPLREC1"


def load(path, csv_cpu_time_unit="ms"):
    """A :class:`Table` from a recording or a Kepler CSV (chosen by content, not by file name)."""
    if not os.path.isfile(path):
        raise InputError("%s: no such file" % path)
    if is_recording(path):
        return load_recording(path)
    return load_kepler_csv(path, csv_cpu_time_unit)


def load_recording(path):
    """Features and measured zone power of every frame of a recording."""
    from .reader import Reader
    rows, times, targets, sequences = [], [], [], []
    notes = []
    try:
        with Reader.open_recording(path, sections=("processes", "zones", "cpus", "unaccounted")) as reader:
            info = reader.info
            for frame in reader.frames(allow_truncated=False):
                rows.append(list(node_features(frame).values()))
                times.append(frame.interval_end_ns / 1e9)
                sequences.append(frame.sequence)
                targets.append(zone_power(frame))
    except RecordingTruncated as e:
        notes.append(str(e))
    except KeplershmError as e:
        raise InputError("%s: cannot read the recording: %s" % (path, e)) from e
    except ValueError as e:
        raise InputError("%s: %s" % (path, e)) from e
    if not rows:
        raise InputError("%s: the recording holds no frames" % path)
    X = np.array(rows, dtype=np.float64)
    unavailable = {}
    for j, name in enumerate(FEATURES):
        if np.isnan(X[:, j]).all():
            unavailable[name] = "metric %s is missing from every frame's metric_mask" % METRIC_NAMES[FEATURES[name].metric]
        elif np.isnan(X[:, j]).any():
            unavailable[name] = "metric %s is missing from %d of %d frames" % (
                METRIC_NAMES[FEATURES[name].metric], int(np.isnan(X[:, j]).sum()), len(X))
    zone_arrays = {}
    for zone in TARGET_ZONES:
        column = np.array([t.get(zone, math.nan) for t in targets], dtype=np.float64)
        if not np.isnan(column).all():
            zone_arrays[zone] = column
    return Table(path, "recording", list(FEATURES), X, zone_arrays, np.array(times), np.array(sequences),
                 info.cpu_model, info.cpu_count, unavailable, notes)


def _number(text, path, row, column):
    try:
        value = float(text)
    except (TypeError, ValueError):
        raise InputError("%s: row %d, column %s: %r is not a number" % (path, row, column, text)) from None
    if not math.isfinite(value):
        raise InputError("%s: row %d, column %s: %r is not a finite number" % (path, row, column, text))
    return value


def load_kepler_csv(path, cpu_time_unit="ms"):
    """The Kepler model-db CSV form → Table (per-interval values divided by the timestamp step)."""
    if cpu_time_unit not in CSV_TIME_UNIT_FACTORS:
        raise InputError("unit for bpf_cpu_time_us must be one of %s" % ", ".join(CSV_TIME_UNIT_FACTORS))
    if os.path.getsize(path) > MAX_CSV_BYTES:
        raise InputError("%s: larger than %d bytes" % (path, MAX_CSV_BYTES))
    with open(path, newline="", encoding="utf-8", errors="replace") as f:
        head = f.read(4096)
        if "\0" in head:
            raise InputError("%s: neither a keplershm recording (no KEPLREC1 magic) nor a CSV text file" % path)
        f.seek(0)
        reader = csv.reader(f)
        header = next(reader, None)
        if not header or "timestamp" not in header:
            raise InputError("%s: not a keplershm recording (no KEPLREC1 magic) and not a Kepler CSV (no 'timestamp' "
                             "column in the header line)" % path)
        if len(set(header)) != len(header):
            raise InputError("%s: duplicate column names in the header" % path)
        raw = []
        for i, line in enumerate(reader, start=2):
            if not line:
                continue
            if len(line) != len(header):
                raise InputError("%s: row %d has %d fields, the header has %d" % (path, i, len(line), len(header)))
            raw.append([_number(v, path, i, c) for v, c in zip(line, header)])
    if len(raw) < 2:
        raise InputError("%s: fewer than 2 data rows" % path)
    data = np.array(raw, dtype=np.float64)
    col = {name: j for j, name in enumerate(header)}
    times = data[:, col["timestamp"]]
    steps = np.diff(times)
    if (steps <= 0).any():
        bad = int(np.argmax(steps <= 0)) + 3
        raise InputError("%s: timestamps do not increase at row %d" % (path, bad))
    # Row i covers (t[i-1], t[i]]; the first row is taken to cover the same step as the second.
    dt = np.concatenate([[steps[0]], steps])

    targets = {}
    for column, zone in CSV_TARGETS.items():
        if column in col:
            values = data[:, col[column]]
            if (values != 0).any():  # all-zero columns: zone not measured on that machine (e.g. nx12 core)
                targets[zone] = values
    if not targets:
        raise InputError("%s has no measured power: none of the columns %s is present with non-zero values; train "
                         "needs power measured on the node (RAPL or a power meter)" % (path, ", ".join(CSV_TARGETS)))

    names, columns, notes = [], [], []
    for column in header:
        if column in CSV_IGNORED or column in CSV_TARGETS:
            continue
        values = data[:, col[column]]
        if column in CSV_FEATURES:
            feature, factor = CSV_FEATURES[column]
            if column == "bpf_cpu_time_us":
                factor *= CSV_TIME_UNIT_FACTORS[cpu_time_unit]
            names.append(feature)
            columns.append(values * factor / dt)
        else:
            names.append(CSV_PREFIX + column)
            columns.append(values)
    if not names:
        raise InputError("%s: no feature columns besides timestamp and power" % path)
    if "bpf_cpu_time_us" in col:
        notes.append("bpf_cpu_time_us read as %s of CPU time per interval" % cpu_time_unit)
    return Table(path, "kepler-csv", names, np.stack(columns, axis=1), targets, times, np.arange(1, len(times) + 1),
                 "", 0, {}, notes)
