"""Kepler 0.7's published models (its model DB: SGDRegressorTrainer_N.json weights, XgboostFitTrainer_N.zip)
evaluated in Python exactly as kepler-estimate's `--model NAME=kepler:FILE` does, for `python3 -m keplershm
kepler-model PATH --predict name=value,...`.

The zip's scaler.pkl is read by a restricted interpreter of the pickle opcodes a joblib MaxAbsScaler
uses; pickle.load is never called (a pickle is a program, and these files come from the network)."""
import json
import math
import os
import struct
import zipfile

from ..errors import InputError

_MAX_ENTRIES = 64
_MAX_ENTRY_BYTES = 64 << 20
_MAX_TOTAL_BYTES = 256 << 20
_ALLOWED_GLOBALS = {
    "sklearn.preprocessing._data.MaxAbsScaler": "scaler",
    "joblib.numpy_pickle.NumpyArrayWrapper": "wrapper",
    "numpy.ndarray": "ndarray",
    "numpy.dtype": "dtype",
}


# A MaxAbsScaler nests four deep (object, state dict, array wrapper, its shape tuple). A chain of TUPLE1
# opcodes builds any depth at one byte per level, and a deep value is a deep recursion wherever it is
# walked (repr, comparison): refused past this, as the C++ reader does.
_MAX_DEPTH = 32


class _Tuple(tuple):
    """A tuple that knows how deep it nests (1 + its deepest item)."""

    depth = 1


class _Dict(dict):
    """A dict that knows how deep it nests, and whether another value holds it (then it no longer changes)."""

    depth = 1
    contained = False


class _Dtype(list):
    """numpy.dtype(descr, ...) as ["dtype", descr, byteorder]; BUILD sets the byte order."""

    depth = 1
    contained = False


class _Obj:
    """An instance of an allowed class: its kind and the state BUILD gave it."""

    contained = False

    def __init__(self, kind):
        self.kind = kind
        self.state = None
        self.depth = 1


class _Unpickler:
    """The C++ reader's twin (kepler-estimate/model/pickle_scaler.cpp): same opcodes, same refusals."""

    def __init__(self, data):
        self.data, self.pos, self.stack, self.marks, self.memo = data, 0, [], [], {}

    def fail(self, why):
        raise InputError("scaler.pkl: %s (at byte %d)" % (why, self.pos))

    def take(self, n):
        if n > len(self.data) - self.pos:
            self.fail("truncated: %d more bytes expected" % n)
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out

    def little(self, n):
        return int.from_bytes(self.take(n), "little")

    def pop(self):
        floor = self.marks[-1] if self.marks else 0
        if len(self.stack) <= floor:
            self.fail("stack underflow")
        return self.stack.pop()

    def pop_mark(self):
        if not self.marks:
            self.fail("no mark on the stack")
        mark = self.marks.pop()
        items = self.stack[mark:]
        del self.stack[mark:]  # in place: callers hold self.stack.append already bound
        return items

    def hold(self, container, part):
        """Records that `container` now holds `part`. A held value is never changed afterwards (see
        `changeable`), so depths stay exact and no value can come to hold itself."""
        depth = getattr(part, "depth", 1)
        if depth >= _MAX_DEPTH:
            self.fail("values nest deeper than %d levels" % _MAX_DEPTH)
        container.depth = max(container.depth, depth + 1)
        if hasattr(part, "contained"):
            part.contained = True

    def changeable(self):
        if not self.stack:
            self.fail("nothing on the stack to change")
        if getattr(self.stack[-1], "contained", False):
            self.fail("changes a value that is already inside another")
        return self.stack[-1]

    def tuple_of(self, items):
        out = _Tuple(items)
        for item in items:
            self.hold(out, item)
        self.stack.append(out)

    def text(self, n):
        if n > 256:
            self.fail("string of %d bytes is longer than allowed" % n)
        return self.take(n).decode("utf-8")

    def run(self):
        while True:
            op = self.take(1)[0]
            if op == ord("."):
                break
            self.step(op)
            if len(self.stack) > 1024 or len(self.memo) > 4096:
                self.fail("pickle too deep")
        if len(self.stack) != 1 or self.marks:
            self.fail("the pickle does not end with exactly one value")
        return self.stack[0]

    def step(self, op):
        simple = {0x88: True, 0x89: False, ord("N"): None}
        if op in simple:
            self.stack.append(simple[op])
        elif op == 0x80:
            if not 2 <= self.take(1)[0] <= 5:
                self.fail("pickle protocol is not 2 to 5")
        elif op == 0x95:
            self.take(8)
        elif op == 0x8C:
            self.stack.append(self.text(self.take(1)[0]))
        elif op == ord("X"):
            self.stack.append(self.text(self.little(4)))
        elif op in (0x94, ord("q"), ord("r")):
            index = len(self.memo) if op == 0x94 else self.little(1 if op == ord("q") else 4)
            if not self.stack:
                self.fail("memo store with an empty stack")
            self.memo[index] = self.stack[-1]
        elif op in (ord("h"), ord("j")):
            index = self.little(1 if op == ord("h") else 4)
            if index not in self.memo:
                self.fail("memo index %d was never stored" % index)
            self.stack.append(self.memo[index])
        else:
            self.step_structure(op)

    def step_structure(self, op):
        if op == ord(")"):
            self.stack.append(())
        elif op == ord("}"):
            self.stack.append(_Dict())
        elif op == ord("("):
            self.marks.append(len(self.stack))
        elif op == ord("K"):
            self.stack.append(self.little(1))
        elif op == ord("M"):
            self.stack.append(self.little(2))
        elif op == ord("J"):
            self.stack.append(struct.unpack("<i", self.take(4))[0])
        elif op == ord("G"):
            self.stack.append(struct.unpack(">d", self.take(8))[0])
        elif op in (0x85, 0x86, 0x87):
            n = op - 0x84
            self.tuple_of([self.pop() for _ in range(n)][::-1])
        elif op == ord("t"):
            self.tuple_of(self.pop_mark())
        elif op == 0x93:
            name, module = self.pop(), self.pop()
            if not isinstance(module, str) or not isinstance(name, str):
                self.fail("STACK_GLOBAL of something other than two strings")  # never formatted: may nest deep
            full = "%s.%s" % (module, name)
            if full not in _ALLOWED_GLOBALS:
                self.fail("global %s is not allowed (only MaxAbsScaler and numpy arrays are)" % full)
            self.stack.append(("global", _ALLOWED_GLOBALS[full]))
        else:
            self.step_objects(op)

    def step_objects(self, op):
        if op == 0x81:
            args, cls = self.pop(), self.pop()
            if args != () or cls not in (("global", "scaler"), ("global", "wrapper")):
                self.fail("NEWOBJ of something other than MaxAbsScaler() or NumpyArrayWrapper()")
            self.stack.append(_Obj(cls[1]))
        elif op == ord("R"):
            args, fn = self.pop(), self.pop()
            if fn != ("global", "dtype") or not isinstance(args, tuple) or len(args) != 3 or not isinstance(args[0], str):
                self.fail("REDUCE other than numpy.dtype(descr, align, copy)")
            self.stack.append(_Dtype(["dtype", args[0], "="]))
        elif op in (ord("u"), ord("s")):
            items = self.pop_mark() if op == ord("u") else [self.pop(), self.pop()][::-1]
            target = self.changeable()
            if len(items) % 2 or not isinstance(target, _Dict):
                self.fail("SETITEMS on something other than a dict")
            for k, v in zip(items[::2], items[1::2]):
                if not isinstance(k, str):
                    self.fail("dict key is not a string")
                self.hold(target, v)
                target[k] = v
        elif op == ord("b"):
            self.build()
        else:
            self.fail("opcode 0x%02x is not allowed in a scaler pickle" % op)

    def build(self):
        state = self.pop()
        target = self.changeable()
        if isinstance(target, _Dtype):
            if not isinstance(state, tuple) or len(state) < 2 or not isinstance(state[1], str):
                self.fail("dtype state is not (version, byteorder, ...)")
            target[2] = state[1]
            return
        if not isinstance(target, _Obj) or not isinstance(state, _Dict):
            self.fail("BUILD of something other than an object with a dict")
        self.hold(target, state)
        target.state = state
        if target.kind == "wrapper":
            self.stack[-1] = self.inline_array(state)

    def inline_array(self, state):
        # joblib writes the array bytes right after the wrapper's BUILD, after an alignment pad.
        shape, dtype = state.get("shape"), state.get("dtype")
        if state.get("subclass") != ("global", "ndarray") or state.get("order") not in ("C", "F"):
            self.fail("array is not a C/F-ordered numpy.ndarray")
        if dtype != ["dtype", "f8", "<"]:
            self.fail("array dtype is not little-endian float64")
        if not isinstance(shape, tuple) or len(shape) != 1 or not isinstance(shape[0], int) or not 0 <= shape[0] <= 4096:
            self.fail("array is not one-dimensional with at most 4096 elements")
        if "numpy_array_alignment_bytes" in state:
            pad = self.take(1)[0]
            if pad > 16:
                self.fail("alignment pad of %d bytes" % pad)
            self.take(pad)
        return list(struct.unpack("<%dd" % shape[0], self.take(8 * shape[0])))


def read_max_abs_scaler(data):
    """scale_ of a joblib-pickled MaxAbsScaler, without executing the pickle."""
    if len(data) > (1 << 20):
        raise InputError("scaler.pkl: too large for a scaler")
    top = _Unpickler(bytes(data)).run()
    if not isinstance(top, _Obj) or top.kind != "scaler" or not isinstance(top.state, dict):
        raise InputError("scaler.pkl: the pickle is not a MaxAbsScaler")
    scale = top.state.get("scale_")
    if not isinstance(scale, list) or not scale or any(not isinstance(s, float) or not math.isfinite(s) or s <= 0
                                                       for s in scale):
        raise InputError("scaler.pkl: MaxAbsScaler has no valid fitted scale_")
    return scale


def _read_zip(path):
    try:
        archive = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError) as e:
        raise InputError("%s: not a readable zip archive (%s)" % (path, e))
    with archive:
        infos = archive.infolist()
        if len(infos) > _MAX_ENTRIES:
            raise InputError("%s: %d entries (at most %d)" % (path, len(infos), _MAX_ENTRIES))
        entries, total = {}, 0
        for info in infos:
            name = info.filename
            if not name or "/" in name or "\\" in name or name in (".", "..") or name in entries:
                raise InputError("%s: entry name %r is not a plain, unique file name" % (path, name))
            limit = min(_MAX_ENTRY_BYTES, _MAX_TOTAL_BYTES - total)
            with archive.open(info) as f:
                data = f.read(limit + 1)  # the inflated bytes are counted, not the declared size
            if len(data) > limit:
                raise InputError("%s: entry %s inflates beyond %d bytes" % (path, name, limit))
            total += len(data)
            entries[name] = data
        return entries


class KeplerModel:
    """One Kepler model file; predict({feature: per-interval value}) -> {zone: watts}."""

    ZONES = ("package", "core", "uncore", "dram", "platform")

    def __init__(self, path):
        self.path = path
        if path.endswith(".json"):
            self._load_weights(path)
        elif path.endswith(".zip"):
            self._load_zip(path)
        else:
            raise InputError("%s: a Kepler model is a weights .json or an XGBoost .zip" % path)

    def _load_weights(self, path):
        try:
            with open(path) as f:
                doc = json.load(f)
        except (OSError, ValueError) as e:
            raise InputError("%s: %s" % (path, e))
        self.kind, self.dynamic = "weights", "DynPower" in path.split(os.sep)
        self.weights = {z: body["All_Weights"] for z, body in doc.items() if z in self.ZONES and isinstance(body, dict)}
        if not self.weights:
            raise InputError("%s: no zone weights" % path)
        self.features = sorted({f for w in self.weights.values() for f in w.get("Numerical_Variables", {})})

    def _load_zip(self, path):
        import xgboost as xgb

        entries = _read_zip(path)
        try:
            meta = json.loads(entries["metadata.json"])
            zones = json.loads(entries[meta["model_file"]])
            self.features = list(meta["features"])
            self.dynamic = meta["output_type"] == "DynPower"
            self.scale = read_max_abs_scaler(entries["scaler.pkl"])
            self.boosters = {}
            for zone, body in zones.items():
                booster = xgb.Booster(params={"nthread": 1})
                booster.load_model(bytearray(entries[body["model_file"]]))
                self.boosters[zone] = booster
        except (KeyError, ValueError, TypeError) as e:
            raise InputError("%s: malformed Kepler XGBoost archive (%s)" % (path, e))
        if len(self.scale) != len(self.features):
            raise InputError("%s: scaler and metadata disagree on the feature count" % path)
        self.kind = "xgboost"

    def predict(self, values):
        missing = [f for f in self.features if f not in values]
        if missing:
            raise InputError("model needs %s (missing: %s)" % (", ".join(self.features), ", ".join(missing)))
        if self.kind == "weights":
            return {zone: self._linear(w, values) for zone, w in self.weights.items()}
        import numpy as np
        import xgboost as xgb

        row = np.array([[values[f] / s for f, s in zip(self.features, self.scale)]], dtype=np.float64)
        return {zone: float(b.predict(xgb.DMatrix(row))[0]) for zone, b in self.boosters.items()}

    @staticmethod
    def _linear(weights, values):
        # Kepler 0.7's Go formula: Bias_Weight + sum(weight * value / scale), zero weights/scales skipped.
        power = weights.get("Bias_Weight", 0.0)
        for name, coeff in weights.get("Numerical_Variables", {}).items():
            if coeff.get("weight", 0.0) and coeff.get("scale", 0.0):
                power += coeff["weight"] * (values[name] / coeff["scale"])
        return power


def parse_values(text):
    """`name=value,...` to a dict of floats."""
    values = {}
    for item in filter(None, text.split(",")):
        name, eq, value = item.partition("=")
        try:
            values[name.strip()] = float(value)
        except ValueError:
            eq = ""
        if not eq or not name.strip():
            raise InputError("--predict item %r is not NAME=NUMBER" % item)
    return values


def main(args):
    model = KeplerModel(args.path)
    print(json.dumps(model.predict(parse_values(args.predict)), sort_keys=True))
    return 0
