"""Record layouts built from the field schema a segment or recording publishes.

Every segment carries a table of (record type, field name, type, offset, count, unit), generated from
keplershm_layout.h when the producer was built. Records are decoded with that table and the stride each
frame's section reports, never with offsets compiled into these bindings: a newer producer that
appended fields, or an older one with smaller records, is read correctly, and the extra fields of a
newer one simply appear.

The schema is untrusted input (it comes from another process or a file): it is validated here before
any dtype is built from it.
"""
import re
import struct
from collections import namedtuple

from . import _abi
from .errors import CorruptData

try:
    import numpy as np
except ImportError:  # plain-object mode: see records_to_dicts
    np = None

FieldSpec = namedtuple("FieldSpec", "name unit record_type type offset count size")

RECORD_NAMES = {
    _abi.RECORD_PROCESS: "process", _abi.RECORD_WORKLOAD: "workload", _abi.RECORD_ZONE_SAMPLE: "zone_sample",
    _abi.RECORD_CPU_SAMPLE: "cpu_sample", _abi.RECORD_UNACCOUNTED: "unaccounted", _abi.RECORD_FRAME: "frame",
    _abi.RECORD_ZONE_INFO: "zone_info", _abi.RECORD_ESTIMATE: "estimate", _abi.RECORD_SECTION: "section",
}
_NUMPY_TYPE = {_abi.TYPE_U32: "<u4", _abi.TYPE_U64: "<u8", _abi.TYPE_F64: "<f8"}
_STRUCT_TYPE = {_abi.TYPE_U32: "I", _abi.TYPE_U64: "Q", _abi.TYPE_F64: "d"}
_SCALAR_SIZE = {_abi.TYPE_U32: 4, _abi.TYPE_U64: 8, _abi.TYPE_F64: 8, _abi.TYPE_CHAR: 1}
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _text(raw):
    return bytes(raw).split(b"\0", 1)[0].decode("ascii", "replace")


def fields_from_ctypes(array, count):
    """FieldSpec list from ``struct keplershm_field`` entries, rejecting malformed ones."""
    return check_fields(FieldSpec(_text(f.name), _text(f.unit), f.record_type, f.type, f.offset, f.count, f.size)
                        for f in (array[i] for i in range(count)))


def check_fields(specs):
    """The FieldSpecs as a list, rejecting malformed ones (a schema from a segment, a file or the network)."""
    out = []
    seen = set()
    for i, spec in enumerate(specs):
        if not _NAME.match(spec.name):
            raise CorruptData("field schema entry %d has an invalid name %r" % (i, spec.name))
        if spec.type not in _SCALAR_SIZE:
            raise CorruptData("field schema entry %d (%s) has unknown type %d" % (i, spec.name, spec.type))
        if spec.count == 0 or spec.size != spec.count * _SCALAR_SIZE[spec.type]:
            raise CorruptData("field schema entry %d (%s): size %d does not match count %d of type %d" %
                              (i, spec.name, spec.size, spec.count, spec.type))
        if spec.offset > 1 << 20 or spec.size > 1 << 20:
            raise CorruptData("field schema entry %d (%s) has offset %d, size %d out of range" %
                              (i, spec.name, spec.offset, spec.size))
        key = (spec.record_type, spec.name)
        if key in seen:
            raise CorruptData("field schema lists %s.%s twice" % (RECORD_NAMES.get(spec.record_type, "?"), spec.name))
        seen.add(key)
        out.append(spec)
    return out


class Schema:
    """The field schema of one producer, with per-(record type, stride) dtypes built on demand."""

    def __init__(self, fields):
        self.fields = list(fields)
        self._by_type = {}
        for f in self.fields:
            self._by_type.setdefault(f.record_type, []).append(f)
        self._dtypes = {}

    def fields_of(self, record_type):
        return self._by_type.get(record_type, [])

    def has_field(self, record_type, name):
        return any(f.name == name for f in self.fields_of(record_type))

    def unit(self, record_type, name):
        for f in self.fields_of(record_type):
            if f.name == name:
                return f.unit
        return None

    def _usable(self, record_type, stride):
        """Fields of a record type that fit in records of `stride` bytes."""
        fields = self.fields_of(record_type)
        if not fields:
            raise CorruptData("the producer's field schema does not describe %s records" %
                              RECORD_NAMES.get(record_type, record_type))
        for f in fields:
            if f.offset + f.size > stride:
                raise CorruptData("schema field %s.%s ends at byte %d, past the %d-byte records of this frame" %
                                  (RECORD_NAMES.get(record_type, record_type), f.name, f.offset + f.size, stride))
        return fields

    def record_size(self, record_type):
        """Bytes of a record as the schema describes it (its last field's end, 8-byte aligned)."""
        end = max((f.offset + f.size for f in self.fields_of(record_type)), default=0)
        return (end + 7) // 8 * 8

    def dtype(self, record_type, stride, names=None):
        """numpy dtype of one record of `record_type` laid out `stride` bytes apart; `names`: only those fields."""
        key = (record_type, stride, None if names is None else tuple(names))
        if key not in self._dtypes:
            fields = self._usable(record_type, stride)
            if names is not None:
                fields = [f for f in fields if f.name in names]
            formats = []
            for f in fields:
                if f.type == _abi.TYPE_CHAR:
                    formats.append("S%d" % f.count)
                elif f.count == 1:
                    formats.append(_NUMPY_TYPE[f.type])
                else:
                    formats.append((_NUMPY_TYPE[f.type], (f.count,)))
            self._dtypes[key] = np.dtype({"names": [f.name for f in fields], "formats": formats,
                                          "offsets": [f.offset for f in fields], "itemsize": stride})
        return self._dtypes[key]

    def decode(self, record_type, stride, data, count):
        """Plain-Python records (list of dicts) from `count` records in the bytes `data` (no numpy)."""
        fields = self._usable(record_type, stride)
        out = []
        for i in range(count):
            base = i * stride
            record = {}
            for f in fields:
                at = base + f.offset
                if f.type == _abi.TYPE_CHAR:
                    record[f.name] = bytes(data[at:at + f.count]).split(b"\0", 1)[0].decode("utf-8", "replace")
                else:
                    values = struct.unpack_from("<%d%s" % (f.count, _STRUCT_TYPE[f.type]), data, at)
                    record[f.name] = values[0] if f.count == 1 else list(values)
            out.append(record)
        return out
