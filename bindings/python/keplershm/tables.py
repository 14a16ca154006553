"""pandas helpers (optional: pandas is not a dependency; without it these raise a clear ImportError).

Text fields (comm, container_id, ...) are decoded to str; array fields (softirq) become one column
per element (softirq_0 .. softirq_9), since pandas columns hold scalars.
"""


def _pandas():
    try:
        import pandas
    except ImportError:
        raise ImportError("this helper needs pandas (apt-get install python3-pandas); numpy structured arrays "
                          "(frame.processes) work without it") from None
    return pandas


def records_to_columns(records):
    """dict column → list/array from a numpy structured array (bytes decoded, arrays split)."""
    columns = {}
    for name in records.dtype.names:
        values = records[name]
        if values.dtype.kind == "S":
            columns[name] = [v.decode("utf-8", "replace") for v in values]
        elif values.ndim > 1:
            for i in range(values.shape[1]):
                columns["%s_%d" % (name, i)] = values[:, i]
        else:
            columns[name] = values
    return columns


def section_to_pandas(frame, section="processes"):
    """One section of a frame as a DataFrame, with the frame's sequence as a column."""
    pandas = _pandas()
    records = getattr(frame, section)
    if records is None:
        raise ValueError("frame %d has no %s section (or the reader was not asked for it)" % (frame.sequence, section))
    columns = records_to_columns(records)
    columns["sequence"] = [frame.sequence] * len(records)
    return pandas.DataFrame(columns)


def table_to_pandas(table):
    """A training :class:`keplershm.dataset.Table` as a DataFrame: time, features, measured watts per zone."""
    pandas = _pandas()
    columns = {"time_s": table.time_s}
    for j, name in enumerate(table.feature_names):
        columns[name] = table.X[:, j]
    for zone, watts in table.targets.items():
        columns["%s_w" % zone] = watts
    return pandas.DataFrame(columns)
