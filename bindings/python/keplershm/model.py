"""Power models as kepler-estimate serves them: XGBoost model directories (MODELS.md) and the built-in curve.

A model directory holds ``model.json`` (metadata: features in the booster's column order, one booster
file per target zone) and the boosters. Model files are untrusted input: the metadata is validated
the way kepler-estimate validates it (format, type, output, relative target files that stay inside
the directory), and a booster that does not load or has the wrong number of features is refused with
a message naming the file.
"""
import json
import os

from . import extrapolation
from .errors import InputError
from .features import FEATURES, TARGET_ZONES
from .schema import np

FORMAT = "keplershm-model/1"
MAX_METADATA_BYTES = 1 << 20
CURVE_IDLE_W, CURVE_MAX_W = 0.74, 3.5  # per vCPU, Cloud Carbon Footprint AWS averages (MODELS.md)


def _xgboost():
    try:
        import xgboost
    except ImportError as e:
        raise InputError("XGBoost models need python3-xgboost (apt-get install python3-xgboost): %s" % e) from e
    return xgboost


class XGBoostModel:
    """A loaded model directory: ``features``, ``targets`` (zone → Booster), ``output``, ``metadata``."""

    def __init__(self, name, path, metadata, boosters):
        self.name = name
        self.path = path
        self.metadata = metadata
        self.features = [f["name"] for f in metadata["features"]]
        self.output = metadata["output"]
        self.idle_w = metadata.get("idle_w", {})
        self.training_range = metadata.get("training_range", {})
        self.extrapolation = metadata.get("extrapolation", {})
        self.boosters = boosters

    @property
    def zones(self):
        return list(self.boosters)

    def predict(self, table):
        """zone → predicted watts per row of `table` (a :class:`keplershm.dataset.Table`)."""
        xgboost = _xgboost()
        X = select_columns(table, self.features, self.name)
        matrix = xgboost.DMatrix(X.astype(np.float32), missing=np.nan)
        out = {}
        # The excess beyond the training range from the values the boosters see (float32), as kepler-estimate.
        seen = X.astype(np.float32)
        for zone, booster in self.boosters.items():
            watts = booster.predict(matrix).astype(np.float64)
            watts = watts + extrapolation.excess_watts(seen, self.features, self.training_range,
                                                       self.extrapolation.get(zone, {}))
            if self.output == "dynamic":
                watts = watts + self._idle(zone, table)
            out[zone] = np.maximum(watts, 0.0)
        return out

    def _idle(self, zone, table):
        if zone in self.idle_w:
            return float(self.idle_w[zone])
        if zone != "package":
            return 0.0
        cpus = select_columns(table, ["cpu_count"], self.name)[:, 0] if "cpu_count" in table.feature_names else \
            np.full(len(table.X), float(table.cpu_count))
        return cpus * CURVE_IDLE_W


class CurveModel:
    """The built-in utilization curve: package watts = cpu_count × (idle_w + (max_w − idle_w) × u)."""

    output = "absolute"

    def __init__(self, name="curve", idle_w=CURVE_IDLE_W, max_w=CURVE_MAX_W):
        self.name, self.idle_w, self.max_w = name, idle_w, max_w
        self.features = ["node_cpu_busy_ms_per_s", "cpu_time_ms_per_s", "cpu_count"]
        self.path = None

    @property
    def zones(self):
        return ["package"]

    def predict(self, table):
        cols = {n: j for j, n in enumerate(table.feature_names)}
        if "cpu_count" not in cols or ("node_cpu_busy_ms_per_s" not in cols and "cpu_time_ms_per_s" not in cols):
            raise InputError("model %s (curve) needs cpu_count and node CPU time, which %s does not have" %
                             (self.name, table.source))
        cpus = table.X[:, cols["cpu_count"]]
        busy = table.X[:, cols["node_cpu_busy_ms_per_s"]] if "node_cpu_busy_ms_per_s" in cols else np.full(len(cpus), np.nan)
        if "cpu_time_ms_per_s" in cols:
            busy = np.where(np.isnan(busy), table.X[:, cols["cpu_time_ms_per_s"]], busy)
        with np.errstate(invalid="ignore", divide="ignore"):
            u = np.clip(busy / 1000.0 / cpus, 0.0, 1.0)
        return {"package": np.maximum(cpus * (self.idle_w + (self.max_w - self.idle_w) * u), 0.0)}


def select_columns(table, names, model_name):
    """Columns of `table` in the order `names`; refuses a feature the table does not provide."""
    cols = {n: j for j, n in enumerate(table.feature_names)}
    missing = [n for n in names if n not in cols or n in table.unavailable]
    if missing:
        reasons = ["%s (%s)" % (n, table.unavailable.get(n, "not in this source")) for n in missing]
        raise InputError("model %s needs feature(s) that %s does not provide: %s" %
                         (model_name, table.source, "; ".join(reasons)))
    return table.X[:, [cols[n] for n in names]]


def _fail(origin, text):
    raise InputError("%s: %s" % (origin, text))


def _finite(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool) and abs(value) < float("inf")


def _validate_extrapolation(doc, origin):
    """training_range: {feature: [lowest, highest]}; extrapolation: {target zone: {feature with a range:
    watts per unit >= 0}} (MODELS.md, "Extrapolation")."""
    features = [f["name"] for f in doc["features"]]
    ranges = doc.get("training_range", {})
    if not isinstance(ranges, dict):
        _fail(origin, "training_range is not an object")
    for name, bounds in ranges.items():
        if name not in features:
            _fail(origin, "training_range names \"%s\", which is not among the features" % name)
        if not (isinstance(bounds, list) and len(bounds) == 2 and all(_finite(b) for b in bounds)
                and bounds[0] <= bounds[1]):
            _fail(origin, "training_range[\"%s\"] must be [lowest, highest], finite, lowest <= highest" % name)
    slopes = doc.get("extrapolation", {})
    if not isinstance(slopes, dict):
        _fail(origin, "extrapolation is not an object")
    zones = [t["zone"] for t in doc["targets"]]
    for zone, by_feature in slopes.items():
        if zone not in zones or not isinstance(by_feature, dict):
            _fail(origin, "extrapolation[\"%s\"] must be a target zone's {feature: watts per unit}" % zone)
        for name, slope in by_feature.items():
            if name not in features:
                _fail(origin, "extrapolation names \"%s\", which is not among the features" % name)
            if not _finite(slope) or slope < 0:
                _fail(origin, "extrapolation[\"%s\"][\"%s\"] must be watts per unit >= 0" % (zone, name))
            if name not in ranges:
                _fail(origin, "extrapolation[\"%s\"] has a slope for %s, which has no training_range" % (zone, name))


def validate_metadata(doc, origin):
    """Checks a parsed model.json against MODELS.md; returns it."""
    if not isinstance(doc, dict):
        _fail(origin, "top level is not a JSON object")
    for field, kind in (("format", str), ("type", str), ("output", str), ("features", list), ("targets", list)):
        if not isinstance(doc.get(field), kind):
            _fail(origin, "missing or mistyped field \"%s\" (%s expected)" % (field, kind.__name__))
    if doc["format"] != FORMAT:
        _fail(origin, "unknown format \"%s\" (expected %s)" % (doc["format"], FORMAT))
    if doc["type"] != "xgboost":
        _fail(origin, "type \"%s\" is not \"xgboost\"" % doc["type"])
    if doc["output"] not in ("absolute", "dynamic"):
        _fail(origin, "output \"%s\" is neither \"absolute\" nor \"dynamic\"" % doc["output"])
    if not 1 <= len(doc["features"]) <= 256:
        _fail(origin, "%d features (1 to 256 allowed)" % len(doc["features"]))
    for f in doc["features"]:
        if not isinstance(f, dict) or not isinstance(f.get("name"), str):
            _fail(origin, "every feature must be an object with a \"name\"")
    if not 1 <= len(doc["targets"]) <= 16:
        _fail(origin, "%d targets (1 to 16 allowed)" % len(doc["targets"]))
    seen = set()
    for t in doc["targets"]:
        if not isinstance(t, dict) or not isinstance(t.get("zone"), str) or not isinstance(t.get("file"), str):
            _fail(origin, "every target must be an object with \"zone\" and \"file\"")
        if t["zone"] not in TARGET_ZONES + ("gpu", "other"):
            _fail(origin, "unknown target zone \"%s\"" % t["zone"])
        if t["zone"] in seen:
            _fail(origin, "zone \"%s\" has two targets" % t["zone"])
        seen.add(t["zone"])
        if not t["file"] or os.path.isabs(t["file"]) or ".." in t["file"].replace("\\", "/").split("/"):
            _fail(origin, "target file \"%s\" must be a relative name inside the model directory" % t["file"])
    _validate_extrapolation(doc, origin)
    for field in ("idle_w", "expected_error_w"):
        watts = doc.get(field, {})
        if not isinstance(watts, dict) or any(not isinstance(v, (int, float)) or not 0 <= v < float("inf")
                                              for v in watts.values()):
            _fail(origin, "%s must map zones to watts >= 0" % field)
    return doc


def load_model(spec):
    """A model from ``DIR``, ``NAME=DIR``, ``path/model.json``, ``curve`` or ``NAME=curve:idle_w=..,max_w=..``."""
    name, _, target = spec.rpartition("=") if "=" in spec.split(":", 1)[0] else ("", "", spec)
    if target == "curve" or target.startswith("curve:"):
        params = {}
        for item in filter(None, target[len("curve:"):].split(",")):
            key, _, value = item.partition("=")
            if key not in ("idle_w", "max_w"):
                raise InputError("curve parameter %r unknown (idle_w, max_w)" % key)
            try:
                params[key] = float(value)
            except ValueError:
                raise InputError("curve parameter %s=%r is not a number" % (key, value)) from None
        return CurveModel(name or "curve", **params)
    path = target
    meta = path if path.endswith(".json") and os.path.isfile(path) else os.path.join(path, "model.json")
    if not os.path.isfile(meta):
        raise InputError("%s: no model here (expected a directory holding model.json)" % path)
    if os.path.getsize(meta) > MAX_METADATA_BYTES:
        _fail(meta, "larger than %d bytes" % MAX_METADATA_BYTES)
    try:
        with open(meta, encoding="utf-8") as f:
            doc = json.load(f)
    except (ValueError, UnicodeDecodeError) as e:
        _fail(meta, "not JSON (%s)" % e)
    validate_metadata(doc, meta)
    xgboost = _xgboost()
    directory = os.path.dirname(os.path.abspath(meta))
    boosters = {}
    for t in doc["targets"]:
        file = os.path.join(directory, t["file"])
        if not os.path.isfile(file):
            _fail(meta, "target file %s for zone %s is missing" % (file, t["zone"]))
        booster = xgboost.Booster(params={"nthread": 1})
        try:
            booster.load_model(file)
        except xgboost.core.XGBoostError as e:
            _fail(file, "not an XGBoost model (%s)" % str(e).splitlines()[0])
        if booster.num_features() != len(doc["features"]):
            _fail(file, "booster takes %d features but model.json lists %d" % (booster.num_features(),
                                                                              len(doc["features"])))
        boosters[t["zone"]] = booster
    return XGBoostModel(name or doc.get("name") or os.path.basename(directory), directory, doc, boosters)


def feature_units(names):
    """[{'name', 'unit'}] for metadata (CSV-only features get unit 'csv')."""
    return [{"name": n, "unit": FEATURES[n].unit if n in FEATURES else "csv"} for n in names]

