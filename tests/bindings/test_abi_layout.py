"""The bindings' hand-written mirrors of the C layout agree with the C headers themselves.

test_abi.py checks the record mirrors against the *built library* (its schema and record sizes); that
cannot see the structs the library does not describe field by field (header, views, drafts, options)
nor the constants Python re-declares. This test reads the truth from the headers:

* field lists (names, order, array lengths, C types) from the header text: the record structs through
  libkeplershm/tools/gen_schema.py's own parser (the one that generates the published schema), every
  struct (reserved fields included) through a small declaration parser here, checked against it;
* offsets, sizes and constant values from the C compiler (a tiny program compiled at test time, since
  the compiler, not a parser, decides the ABI); without a C compiler the test skips and says so.

Every failure names the struct, field or constant and both values.
"""
import ctypes as C
import importlib.util
import os
import re
import shlex
import shutil
import struct
import subprocess
from collections import namedtuple

import pytest

from keplershm import _abi, dataset, estimates, features, reader, writer

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
INCLUDE = os.path.join(ROOT, "libkeplershm", "include")
HEADERS = ("keplershm_layout.h", "keplershm.h")  # the layout, and the C ABI's option/info structs
GEN_SCHEMA = os.path.join(ROOT, "libkeplershm", "tools", "gen_schema.py")

# ctypes mirror in _abi.py -> the C struct it mirrors.
MIRRORS = {
    "ZoneInfo": "keplershm_zone_info", "Process": "keplershm_process", "Workload": "keplershm_workload",
    "ZoneSample": "keplershm_zone_sample", "CpuSample": "keplershm_cpu_sample",
    "Unaccounted": "keplershm_unaccounted", "Section": "keplershm_section", "Frame": "keplershm_frame",
    "Estimate": "keplershm_estimate", "Field": "keplershm_field", "Header": "keplershm_header",
    "ReaderOpts": "keplershm_reader_opts", "SegmentInfo": "keplershm_segment_info", "View": "keplershm_view",
    "WriterOpts": "keplershm_writer_opts", "Draft": "keplershm_draft", "RecorderOpts": "keplershm_recorder_opts",
    "GpuDevice": "keplershm_gpu_device", "GpuUsage": "keplershm_gpu_usage",
}

# Scalar constants Python re-declares: (module, attribute, C name). Every module-level int of _abi.py is
# added below as KEPLERSHM_<its name> (RECORD_PROCESS -> KEPLERSHM_RECORD_PROCESS), so a new one there is
# checked without being listed; one named otherwise fails until it is mapped here.
CONSTANTS = [
    (reader, "OK", "KEPLERSHM_OK"),
    (reader, "E_NOT_YET", "KEPLERSHM_E_NOT_YET"),
    (reader, "E_LAPPED", "KEPLERSHM_E_LAPPED"),
    (reader, "E_TIMEOUT", "KEPLERSHM_E_TIMEOUT"),
    (reader, "E_WRITER_GONE", "KEPLERSHM_E_WRITER_GONE"),
    (reader, "E_END", "KEPLERSHM_E_END_OF_RECORDING"),
    (reader, "E_TRUNCATED", "KEPLERSHM_E_TRUNCATED"),
    (reader, "STATE_RETIRED", "KEPLERSHM_STATE_RETIRED"),
    (writer, "SEGMENT_FRAMES", "KEPLERSHM_SEGMENT_FRAMES"),
    (writer, "SEGMENT_ESTIMATES", "KEPLERSHM_SEGMENT_ESTIMATES"),
    (features, "ZONE_VALID", "KEPLERSHM_ZONE_VALID"),
    (estimates, "NO_INDEX", "KEPLERSHM_NO_WORKLOAD"),  # the header's "0xffffffff" for node/workload rows
] + [(features, name, "KEPLERSHM_METRIC_" + name) for name in
     ("CPU_TIME", "CYCLES", "INSTRUCTIONS", "CACHE_MISSES", "PAGE_CACHE", "SOFTIRQ", "NODE_CPU", "ENERGY")] + [
    (features, name, "KEPLERSHM_PROC_" + name) for name in
    ("CYCLES_VALID", "INSTRUCTIONS_VALID", "CACHE_MISSES_VALID", "PAGE_CACHE_VALID", "SOFTIRQ_VALID")]
CONSTANTS += [(_abi, name, "KEPLERSHM_" + name) for name, value in sorted(vars(_abi).items())
              if name.isupper() and isinstance(value, int) and (_abi, name) not in [c[:2] for c in CONSTANTS]]

CField = namedtuple("CField", "name type pointer count")


# --- The header, read as text --------------------------------------------------------------------

def header_text(name):
    with open(os.path.join(INCLUDE, name), encoding="utf-8") as f:
        return f.read()


def _code(text):
    """`text` without comments: the parsers below must not see struct or enum words inside them."""
    return re.sub(r"//[^\n]*", "", re.sub(r"/\*.*?\*/", " ", text, flags=re.S))


DECLARATION = re.compile(r"(?:const\s+)?(struct\s+\w+|\w+)(?:\s+const)?\s*(\*?)\s*(\w+)\s*(?:\[\s*(\w+)\s*\])?")


def c_structs(text):
    """{struct name: [CField]} of every struct definition, reserved fields included, in order."""
    structs = {}
    for m in re.finditer(r"\bstruct\s+(\w+)\s*\{(.*?)\};", _code(text), re.S):
        fields = []
        for declaration in m.group(2).split(";"):
            declaration = " ".join(declaration.split())
            if not declaration:
                continue
            d = DECLARATION.fullmatch(declaration)
            assert d, "struct %s: cannot parse the declaration %r (extend DECLARATION)" % (m.group(1), declaration)
            ctype, pointer, name, count = d.groups()
            fields.append(CField(name, ctype, bool(pointer), count or "1"))
        structs[m.group(1)] = fields
    return structs


def c_enums(text):
    """{enum name: [constant names]} in order."""
    return {m.group(1): re.findall(r"\b(KEPLERSHM_\w+)\s*(?:=[^,}]*)?,", m.group(2) + ",")
            for m in re.finditer(r"\benum\s+(\w+)\s*\{(.*?)\};", _code(text), re.S)}


def c_defines(text):
    """Object-like #defines with a number as their value (not include guards, not function-like macros)."""
    return re.findall(r"^#define\s+(KEPLERSHM_\w+)\s+(?:0x[0-9a-fA-F]+|\d+)[uUlL]*\b", text, re.M)


@pytest.fixture(scope="module")
def headers():
    text = "\n".join(header_text(h) for h in HEADERS)
    structs, enums = c_structs(text), c_enums(text)
    constants = c_defines(text) + [c for members in enums.values() for c in members]
    return structs, enums, constants


def load_gen_schema():
    """libkeplershm/tools/gen_schema.py as a module (it is a script, not on any import path)."""
    spec = importlib.util.spec_from_file_location("gen_schema", GEN_SCHEMA)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# --- The compiler's view of the same header ------------------------------------------------------

def compile_probe(structs, constants, tmp):
    """{("sizeof", struct): n, ("field", struct, field): (offset, size), ("const", name): value} as `cc` lays
    out the headers on this machine."""
    candidates = [shlex.split(os.environ.get("CC", "")), ["cc"], ["gcc"], ["clang"]]
    cc = next((c for c in candidates if c and shutil.which(c[0])), None)
    if not cc:
        pytest.skip("no C compiler (cc, gcc or clang on PATH, or $CC): offsets, sizes and constant values "
                    "come from compiling keplershm.h")
    lines = ["#include <stdio.h>", '#include "keplershm.h"', "int main(void) {"]
    for s in sorted(structs):
        lines.append('printf("sizeof %s %%zu\\n", sizeof(struct %s));' % (s, s))
        for f in structs[s]:
            lines.append('printf("field %s %s %%zu %%zu\\n", offsetof(struct %s, %s), sizeof(((struct %s *)0)->%s));'
                         % (s, f.name, s, f.name, s, f.name))
    for c in constants:  # every value fits a long long (the magics are below 2^63, errors are negative)
        lines.append('printf("const %s %%lld\\n", (long long)(%s));' % (c, c))
    lines += ["return 0;", "}", ""]
    source, binary = os.path.join(tmp, "probe.c"), os.path.join(tmp, "probe")
    with open(source, "w", encoding="utf-8") as f:
        f.write("\n".join(lines))
    built = subprocess.run(cc + ["-std=c11", "-I", INCLUDE, source, "-o", binary], capture_output=True, text=True)
    assert built.returncode == 0, "%s could not compile the layout probe:\n%s" % (" ".join(cc), built.stderr)
    out = subprocess.run([binary], capture_output=True, text=True, check=True).stdout
    truth = {}
    for line in out.splitlines():
        kind, *rest = line.split()
        if kind == "sizeof":
            truth[("sizeof", rest[0])] = int(rest[1])
        elif kind == "field":
            truth[("field", rest[0], rest[1])] = (int(rest[2]), int(rest[3]))
        else:
            truth[("const", rest[0])] = int(rest[1])
    return truth


@pytest.fixture(scope="module")
def compiled(headers, tmp_path_factory):
    structs, _, constants = headers
    return compile_probe(structs, constants, str(tmp_path_factory.mktemp("layout_probe")))


# --- Comparing -----------------------------------------------------------------------------------

def c_kind(field):
    """What a C field holds, in the words ctypes_kind uses."""
    if field.pointer:
        return "pointer"
    if field.type.startswith("struct "):
        return field.type
    return {"char": "char", "double": "float", "size_t": "uint"}.get(
        field.type, "uint" if re.fullmatch(r"uint\d+_t", field.type) else
        "int" if re.fullmatch(r"int\d+_t", field.type) else "unknown C type " + field.type)


def ctypes_kind(t):
    """(kind, array length) of a ctypes field type."""
    if issubclass(t, C.Array):
        return ctypes_kind(t._type_)[0], t._length_
    if issubclass(t, C.Structure):
        return "struct " + MIRRORS.get(t.__name__, "(unmirrored %s)" % t.__name__), 1
    if t in (C.c_void_p, C.c_char_p) or issubclass(t, C._Pointer):
        return "pointer", 1
    code = t._type_
    return {"c": "char", "d": "float"}.get(code, "uint" if code in "BHILQ" else "int" if code in "bhilq" else code), 1


def array_length(field, values):
    """A C array length: a number, or a #define that the compiler evaluated."""
    return int(field.count) if field.count.isdigit() else values[("const", field.count)]


def mirror_problems(mirror, c_struct, c_fields, truth):
    name = mirror.__name__
    problems = []
    ours = [f[0] for f in mirror._fields_]
    theirs = [f.name for f in c_fields]
    if ours != theirs:
        problems.append("%s: fields in _abi.py %s, in struct %s %s" % (name, ours, c_struct, theirs))
    size = truth[("sizeof", c_struct)]
    if C.sizeof(mirror) != size:
        problems.append("sizeof %s: %d in _abi.py, %d for struct %s" % (name, C.sizeof(mirror), size, c_struct))
    types = dict((f[0], f[1]) for f in mirror._fields_)
    for field in c_fields:
        if field.name not in types:
            continue  # already reported as a different field list
        where = "%s.%s" % (name, field.name)
        mine = getattr(mirror, field.name)
        offset, nbytes = truth[("field", c_struct, field.name)]
        if (mine.offset, mine.size) != (offset, nbytes):
            problems.append("%s: offset %d size %d in _abi.py, offset %d size %d in struct %s"
                            % (where, mine.offset, mine.size, offset, nbytes, c_struct))
        kind, length = ctypes_kind(types[field.name])
        if (kind, length) != (c_kind(field), array_length(field, truth)):
            problems.append("%s: %s[%d] in _abi.py, %s[%d] (%s) in struct %s" % (
                where, kind, length, c_kind(field), array_length(field, truth), field.type, c_struct))
    return problems


# --- The tests -----------------------------------------------------------------------------------

def test_every_ctypes_structure_is_checked():
    declared = {n for n, v in vars(_abi).items() if isinstance(v, type) and issubclass(v, C.Structure)}
    assert declared == set(MIRRORS), "ctypes Structures in _abi.py %s, mirrors this test knows %s" % (
        sorted(declared), sorted(MIRRORS))


@pytest.mark.parametrize("mirror", sorted(MIRRORS))
def test_mirror_matches_the_c_struct(mirror, headers, compiled):
    structs = headers[0]
    c_struct = MIRRORS[mirror]
    assert c_struct in structs, "struct %s (mirrored by _abi.%s) is not in %s" % (c_struct, mirror, HEADERS)
    problems = mirror_problems(getattr(_abi, mirror), c_struct, structs[c_struct], compiled)
    assert not problems, "_abi.py drifted from the C headers:\n  " + "\n  ".join(problems)


def test_a_moved_field_is_named_with_both_offsets(headers, compiled):
    """The checker itself: a mirror with two fields swapped is reported by name, order and offsets."""
    class Process(C.Structure):  # comm and cpu_time_ns swapped
        _fields_ = [f for f in _abi.Process._fields_ if f[0] not in ("comm", "cpu_time_ns")]
        _fields_.insert(6, ("cpu_time_ns", C.c_uint64))
        _fields_.insert(7, ("comm", C.c_char * 16))
    problems = mirror_problems(Process, "keplershm_process", headers[0]["keplershm_process"], compiled)
    assert any(p.startswith("Process: fields in _abi.py [") for p in problems), problems
    assert "Process.cpu_time_ns: offset 32 size 8 in _abi.py, offset 48 size 8 in struct keplershm_process" in problems


def test_gen_schema_reads_the_records_as_this_test_does(headers):
    """gen_schema.py's parser (what the published schema comes from) and the one here agree on every
    record struct, and each mirrored field has the scalar type gen_schema.py publishes for it."""
    gen = load_gen_schema()
    try:
        records = gen.parse(header_text("keplershm_layout.h"))
    except SystemExit as e:  # gen_schema reports a header it cannot read by exiting
        pytest.fail("gen_schema.py cannot parse keplershm_layout.h: %s" % e)
    scalar = {"KEPLERSHM_TYPE_U32": ("uint", 4), "KEPLERSHM_TYPE_U64": ("uint", 8),
              "KEPLERSHM_TYPE_F64": ("float", 8), "KEPLERSHM_TYPE_CHAR": ("char", 1)}
    mirrors = {c: getattr(_abi, py) for py, c in MIRRORS.items()}
    problems = []
    for c_struct in gen.RECORDS:
        theirs = [(f[3], f[4]) for f in records if f[0] == c_struct]
        ours = [(f.name, int(f.count)) for f in headers[0][c_struct] if not f.name.startswith("reserved")]
        if ours != theirs:
            problems.append("struct %s: gen_schema.py reads %s, this test %s" % (c_struct, theirs, ours))
    for c_struct, _, ftype, name, count, _ in records:
        t = dict(mirrors[c_struct]._fields_).get(name)
        if t is None:
            continue  # a missing field is test_mirror_matches_the_c_struct's to report
        element = t._type_ if issubclass(t, C.Array) else t
        got = (ctypes_kind(element)[0], C.sizeof(element))
        if got != scalar[ftype]:
            problems.append("%s.%s: %s of %d bytes in _abi.py, %s in the schema" % (
                mirrors[c_struct].__name__, name, got[0], got[1], ftype))
    assert not problems, "\n  ".join(["the record structs disagree:"] + problems)


def test_record_mirrors_are_keyed_by_the_headers_record_types(compiled):
    gen = load_gen_schema()
    expected = {compiled[("const", record)]: c_struct for c_struct, record in gen.RECORDS.items()}
    actual = {t: MIRRORS.get(m.__name__, m.__name__) for t, m in _abi.RECORD_MIRRORS.items()}
    assert actual == expected, "_abi.RECORD_MIRRORS maps record types to %s, the header to %s" % (actual, expected)


@pytest.mark.parametrize("module, name, c_name", CONSTANTS,
                         ids=["%s.%s" % (m.__name__.split(".")[-1], n) for m, n, _ in CONSTANTS])
def test_constant_matches_the_header(module, name, c_name, compiled):
    key = ("const", c_name)
    if key not in compiled:
        pytest.fail("%s.%s mirrors %s, which the headers do not define" % (module.__name__, name, c_name))
    ours, theirs = getattr(module, name), compiled[key]
    assert ours == theirs, "%s.%s = %d (%#x), but %s = %d (%#x) in the headers" % (
        module.__name__, name, ours, ours, c_name, theirs, theirs)


def _enum_names(enums, compiled, enum, prefix):
    """{lower-case name without the prefix: value} of one enum of the header."""
    return {c[len(prefix):].lower(): compiled[("const", c)] for c in enums[enum]}


# Python tables of names for an enum's values: (where, {name: value} as Python has it, enum, its prefix).
TABLES = [
    ("reader.ZONE_KINDS", lambda: {v: k for k, v in reader.ZONE_KINDS.items()}, "keplershm_zone_kind",
     "KEPLERSHM_ZONE_"),
    ("writer.ZONE_KIND_IDS", lambda: writer.ZONE_KIND_IDS, "keplershm_zone_kind", "KEPLERSHM_ZONE_"),
    ("reader.SECTIONS", lambda: reader.SECTION_IDS, "keplershm_section_id", "KEPLERSHM_SECTION_"),
    ("features.METRIC_NAMES", lambda: {v.lower(): k for k, v in features.METRIC_NAMES.items()}, "keplershm_metric",
     "KEPLERSHM_METRIC_"),
]


@pytest.mark.parametrize("where, python, enum, prefix", TABLES, ids=[t[0] for t in TABLES])
def test_named_table_matches_the_header_enum(where, python, enum, prefix, headers, compiled):
    """Python tables of names for an enum's values: every name has the header's value, none is missing."""
    ours, theirs = python(), _enum_names(headers[1], compiled, enum, prefix)
    problems = ["%s: %r is %s in Python, %s in enum %s" % (where, n, ours.get(n, "missing"), theirs.get(n, "missing"),
                                                            enum)
                for n in sorted(set(ours) | set(theirs)) if ours.get(n) != theirs.get(n)]
    assert not problems, "\n  ".join(problems)


def test_section_record_types_follow_the_header():
    """reader.SECTIONS pairs each section with the record type its records have."""
    record_of = {"processes": _abi.RECORD_PROCESS, "workloads": _abi.RECORD_WORKLOAD, "zones": _abi.RECORD_ZONE_SAMPLE,
                 "cpus": _abi.RECORD_CPU_SAMPLE, "strings": None, "unaccounted": _abi.RECORD_UNACCOUNTED,
                 "estimates": _abi.RECORD_ESTIMATE, "gpu_devices": _abi.RECORD_GPU_DEVICE,
                 "gpu_usage": _abi.RECORD_GPU_USAGE}
    assert {name: record for name, record in reader.SECTIONS.values()} == record_of


def test_softirq_vectors_match_the_header(compiled):
    """features.NET_TX/NET_RX/BLOCK index keplershm_process.softirq, whose vectors the header lists in order."""
    m = re.search(r"softirq\[(\w+)\];\s*/\*.*?per vector:\s*([A-Z_ ]+?)\s*\*/", header_text("keplershm_layout.h"))
    assert m, "keplershm_process.softirq no longer lists its vectors ('per vector: HI TIMER ...')"
    vectors = m.group(2).split()
    assert len(vectors) == compiled[("const", "KEPLERSHM_SOFTIRQ_VECTORS")], vectors
    for name in ("NET_TX", "NET_RX", "BLOCK"):
        assert getattr(features, name) == vectors.index(name), "features.%s = %d, but the header lists %s at %d" % (
            name, getattr(features, name), name, vectors.index(name))


def test_recording_magic_is_recognized(compiled, tmp_path):
    """dataset.is_recording compares the first bytes with "KEPLREC1": the header's magic as little-endian bytes."""
    path = tmp_path / "magic.kshm"
    magic = compiled[("const", "KEPLERSHM_RECORDING_MAGIC")]
    path.write_bytes(struct.pack("<Q", magic) + bytes(56))
    assert dataset.is_recording(str(path)), "dataset.is_recording does not know KEPLERSHM_RECORDING_MAGIC %#x (%r)" % (
        magic, struct.pack("<Q", magic))
