"""Save and load metric fields and fitted estimators as one ``.npz`` file, without pickle.

A file holds numeric arrays plus one JSON header (array ``__header__``)::

    {"format": "riemlocal", "version": 1, "riemlocal_version": "0.1.0",
     "object": {"class": "riemlocal.fields.SmoothLocalField",
                "init": {"centers": {"__array__": "a0"}, ...}}}

* a field (or any non-estimator class on the allow-list, such as the
  manifold) is stored by its constructor arguments, read back from the
  attributes of the same names (a ``**name`` argument from a dict attribute
  ``name``, when the object keeps one);
* an estimator is stored by ``get_params(deep=False)`` (under ``"init"``) and
  its fitted attributes (public names ending in ``_``, under ``"fitted"``).

Values nest: arrays, JSON scalars, lists, tuples, dicts and other objects on
the allow-list. Loading uses ``np.load(..., allow_pickle=False)``, builds only
classes named in :data:`ALLOWED_CLASSES` and never executes stored code; a
wrong, corrupted, hostile (e.g. deeply nested) or newer file raises
:class:`ValueError`. Constructor arguments are validated by the constructor,
fitted attributes on load: finite, of shapes consistent with each other and with
the parameters, label indices in range, metrics symmetric positive semidefinite.
"""

import importlib
import inspect
import json
import numbers
import os
import zipfile
import zlib

import numpy as np

__all__ = ["save", "load", "ALLOWED_CLASSES", "FORMAT_NAME", "FORMAT_VERSION"]

FORMAT_NAME = "riemlocal"
FORMAT_VERSION = 1
_HEADER_KEY = "__header__"

#: The only classes :func:`load` builds, by public import path.
ALLOWED_CLASSES = (
    "riemlocal.fields.ConstantField",
    "riemlocal.fields.NearestLocalField",
    "riemlocal.fields.RBFLocalField",
    "riemlocal.fields.SmoothLocalField",
    "riemlocal.fields.LazyField",
    "riemlocal.fields.GLMLField",
    "riemlocal.learners.LDAMetric",
    "riemlocal.learners.LMNNMetric",
    "riemlocal.learners.BoostMetric",
    "riemlocal.learners.CCMLMetric",
    "riemlocal.placement.LocalMetrics",
    "riemlocal.neighbors.LocalMetricKNN",
    "riemlocal.manifold.LearnedMetricManifold",
    "riemlocal.learning.FrechetMean",
    "riemlocal.learning.PrincipalGeodesicAnalysis",
    "riemlocal.learning.GeodesicRegression",
    "riemlocal.learning.TangentSpaceRegression",
    "sklearn.linear_model.LinearRegression",
    "sklearn.linear_model.Ridge",
)

_LEARNER = {"n_features_in_": "F", "classes_": ("C",), "components_": ("K", "F"), "metric_": ("F", "F")}
#: Shapes of fitted attributes, in symbols shared by all attributes of one object: ``F`` is
#: ``n_features_in_``, ``D`` the dimension of the object's ``space``, a string value a scalar attribute
#: that must equal the symbol. Every float attribute must also be finite (checked for every class).
_FITTED_SHAPES = {
    **dict.fromkeys(
        [f"riemlocal.learners.{name}" for name in ("LDAMetric", "LMNNMetric", "BoostMetric", "CCMLMetric")], _LEARNER
    ),
    "riemlocal.placement.LocalMetrics": {
        "n_features_in_": "F",
        "classes_": ("C",),
        "global_metric_": ("F", "F"),
        "class_metrics_": ("C", "F", "F"),
        "centers_": ("R", "F"),
        "metrics_": ("R", "F", "F"),
        "reference_indices_": ("R",),
    },
    "riemlocal.neighbors.LocalMetricKNN": {
        "n_features_in_": "F",
        "classes_": ("C",),
        "global_metric_": ("F", "F"),
        "fit_X_": ("N", "F"),
        "fit_y_": ("N",),
    },
    "riemlocal.learning.FrechetMean": {"n_features_in_": "D", "estimate_": ("D",)},
    "riemlocal.learning.PrincipalGeodesicAnalysis": {
        "n_features_in_": "D",
        "mean_": ("D",),
        "metric_matrix_": ("D", "D"),
        "components_": ("K", "D"),
        "n_components_": "K",
        "explained_variance_": ("K",),
        "explained_variance_ratio_": ("K",),
    },
    "riemlocal.learning.GeodesicRegression": {"n_features_in_": "F", "intercept_": ("D",), "coef_": ("D", "F")},
    "riemlocal.learning.TangentSpaceRegression": {"n_features_in_": "D", "mean_": ("D",)},
}
#: Fitted integer arrays that index ``classes_`` (each entry in ``[0, len(classes_))``) or other arrays (``>= 0``).
_INDEX_ATTRIBUTES = {"fit_y_": "classes_", "reference_indices_": None}
#: Fitted attributes that are symmetric positive semidefinite matrices (stacks).
_METRIC_ATTRIBUTES = ("metric_", "global_metric_", "class_metrics_", "metrics_", "metric_matrix_")


def _resolve(path):
    """The class at an allowed ``path``, or ``None`` when its module is not importable."""
    module, _, name = path.rpartition(".")
    try:
        return getattr(importlib.import_module(module), name, None)
    except ImportError:
        return None


def _class_path(obj):
    for path in ALLOWED_CLASSES:
        if type(obj) is _resolve(path):
            return path
    return None


class _Encoder:
    """Turns a value into JSON, moving arrays into ``self.arrays``."""

    def __init__(self):
        self.arrays = {}

    def array(self, value):
        key = f"a{len(self.arrays)}"
        entry = {"__array__": key}
        if value.dtype == object:
            if not all(isinstance(item, str) for item in value.flat):
                raise TypeError("cannot save an object array that does not hold only strings")
            value, entry["object"] = value.astype(str), True
        elif value.dtype.kind not in "biufcUS":
            raise TypeError(f"cannot save an array of dtype {value.dtype}")
        self.arrays[key] = value
        return entry

    def value(self, value):
        if value is None or isinstance(value, (bool, str)):
            return value
        if isinstance(value, np.generic) and value.dtype.kind in "biuf":
            return value.item()
        if isinstance(value, (int, float)):
            return value
        if isinstance(value, np.ndarray):
            return self.array(value)
        if isinstance(value, list):
            return [self.value(item) for item in value]
        if isinstance(value, tuple):
            return {"__tuple__": [self.value(item) for item in value]}
        if isinstance(value, dict):
            return {"__dict__": [[self.value(k), self.value(v)] for k, v in value.items()]}
        if _class_path(value) is not None:
            return {"__object__": self.obj(value)}
        raise TypeError(
            f"cannot save a value of type {type(value).__module__}.{type(value).__qualname__}; "
            f"riemlocal.io stores arrays, numbers, strings, lists, dicts and the classes in ALLOWED_CLASSES"
        )

    def obj(self, obj):
        path = _class_path(obj)
        if path is None:
            raise TypeError(f"cannot save {type(obj).__qualname__}: not one of riemlocal.io.ALLOWED_CLASSES")
        if hasattr(obj, "get_params"):
            fitted = {k: v for k, v in vars(obj).items() if k.endswith("_") and not k.startswith("_")}
            return {"class": path, "init": self.value(obj.get_params(deep=False)), "fitted": self.value(fitted)}
        init = {}
        for param in list(inspect.signature(type(obj).__init__).parameters.values())[1:]:
            if param.kind == param.VAR_KEYWORD:  # e.g. **solver_options, kept as a dict of the same name
                init.update(getattr(obj, param.name, None) or {})
            elif param.kind != param.VAR_POSITIONAL:
                if not hasattr(obj, param.name):
                    raise TypeError(f"cannot save {type(obj).__qualname__}: it does not store its argument {param.name!r}")
                init[param.name] = getattr(obj, param.name)
        return {"class": path, "init": self.value(init)}


class _Decoder:
    """Inverse of :class:`_Encoder`; ``where`` names the file in error messages."""

    def __init__(self, arrays, where):
        self.arrays, self.where = arrays, where

    def fail(self, message):
        raise ValueError(f"{self.where}: {message}")

    def value(self, value):
        if value is None or isinstance(value, (bool, int, float, str)):
            return value
        if isinstance(value, list):
            return [self.value(item) for item in value]
        if not isinstance(value, dict) or len(value) == 0:
            self.fail(f"corrupted header: unexpected entry {value!r}")
        if "__array__" in value:
            key = value["__array__"]
            if key not in self.arrays:
                self.fail(f"corrupted file: array {key!r} is missing")
            array = self.arrays[key]
            return array.astype(object) if value.get("object") else array
        if "__tuple__" in value:
            return tuple(self.value(item) for item in value["__tuple__"])
        if "__dict__" in value:
            try:
                return {self.value(k): self.value(v) for k, v in value["__dict__"]}
            except (TypeError, ValueError) as exc:
                self.fail(f"corrupted header: bad dict entry ({exc})")
        if "__object__" in value:
            return self.obj(value["__object__"])
        self.fail(f"corrupted header: unexpected entry {value!r}")

    def obj(self, entry):
        path = entry.get("class") if isinstance(entry, dict) else None
        if path not in ALLOWED_CLASSES:
            self.fail(f"class {path!r} is not in riemlocal.io.ALLOWED_CLASSES; refusing to load it")
        cls = _resolve(path)
        if cls is None:
            self.fail(f"class {path!r} is not available in this installation of riemlocal")
        init = self.value(entry["init"]) if "init" in entry else {}
        fitted = self.value(entry["fitted"]) if "fitted" in entry else {}
        if not isinstance(init, dict) or not isinstance(fitted, dict):
            self.fail(f"corrupted header: arguments of {path} are not a mapping")
        try:
            obj = cls(**init)
        except (TypeError, ValueError) as exc:
            self.fail(f"invalid stored arguments for {path}: {exc}")
        for name, attr in fitted.items():
            if not (isinstance(name, str) and name.endswith("_") and not name.startswith("_")):
                self.fail(f"corrupted header: {name!r} is not a fitted attribute name")
            setattr(obj, name, attr)
        if fitted:
            self.check_fitted(path, obj, fitted)
        return obj

    def check_fitted(self, path, obj, fitted):
        """Fitted attributes finite, of shapes consistent with each other and with the parameters."""
        for name, value in fitted.items():
            array = np.asarray(value) if isinstance(value, (np.ndarray, float, int)) else None
            if array is not None and array.dtype.kind in "fc" and not np.all(np.isfinite(array)):
                self.fail(f"fitted attribute {name} of {path} contains NaN or infinite values")
        symbols = {"D": obj.space.dim} if hasattr(getattr(obj, "space", None), "dim") else {}
        for name, spec in _FITTED_SHAPES.get(path, {}).items():
            if name not in fitted:
                continue
            value = fitted[name]
            shape = np.shape(value) if isinstance(spec, tuple) else (value,)
            spec = spec if isinstance(spec, tuple) else (spec,)
            if isinstance(value, bool) or len(shape) != len(spec) or not all(isinstance(n, numbers.Integral) for n in shape):
                self.fail(f"fitted attribute {name} of {path} must have shape {spec}, got {np.shape(value)}")
            for symbol, size in zip(spec, shape):
                if symbols.setdefault(symbol, size) != size:
                    self.fail(
                        f"fitted attribute {name} of {path}: {symbol} = {size} does not match {symbol} = "
                        f"{symbols[symbol]} of the other attributes or parameters"
                    )
        for name, classes in _INDEX_ATTRIBUTES.items():
            if name in fitted:
                self.check_indices(name, fitted[name], len(fitted.get(classes, ())) if classes else None)
        for name in _METRIC_ATTRIBUTES:
            if name in fitted and np.asarray(fitted[name]).dtype.kind == "f":
                self.check_metric(name, np.asarray(fitted[name]))
        if "metric_" in fitted and "components_" in fitted and path in _FITTED_SHAPES and _FITTED_SHAPES[path] is _LEARNER:
            product = fitted["components_"].T @ fitted["components_"]
            if not np.allclose(fitted["metric_"], product, rtol=1e-10, atol=1e-12 * np.abs(product).max(initial=0.0)):
                self.fail(f"fitted metric_ of {path} is not components_.T @ components_")

    def check_indices(self, name, value, bound):
        array = np.asarray(value)
        if array.dtype.kind not in "iu" or np.any(array < 0) or (bound is not None and np.any(array >= bound)):
            self.fail(f"fitted attribute {name} must hold integer indices in [0, {bound if bound is not None else 'n'})")

    def check_metric(self, name, matrices):
        if np.abs(matrices - np.swapaxes(matrices, -1, -2)).max(initial=0.0) > 1e-8 * np.abs(matrices).max(initial=0.0):
            self.fail(f"fitted attribute {name} must hold symmetric matrices")
        eigenvalues = np.linalg.eigvalsh(matrices)
        if np.any(eigenvalues[..., 0] < -1e-8 * np.abs(eigenvalues).max(initial=0.0)):
            self.fail(f"fitted attribute {name} must hold positive semidefinite matrices")


def _check_path(path):
    """Return ``path`` after checking it is a file name (``str``, ``bytes`` or path-like)."""
    if not isinstance(path, (str, bytes, os.PathLike)):
        raise TypeError(f"path must be a str or path-like file name, got {type(path).__name__}")
    return path


def save(obj, path):
    """Save a metric field or a (fitted) estimator to ``path`` as a ``.npz`` file.

    Parameters
    ----------
    obj : object
        An instance of one of :data:`ALLOWED_CLASSES`, e.g. a
        :class:`~riemlocal.fields.SmoothLocalField` or a fitted
        :class:`~riemlocal.learners.LMNNMetric`.
    path : str or path-like
        Destination; written as given (no extension is added).

    Raises
    ------
    TypeError
        If ``path`` is not a file name, or ``obj`` or one of its parameters / fitted attributes is of a type
        the format cannot hold (callables, random generators, foreign classes).

    Examples
    --------
    >>> import numpy as np, riemlocal.io
    >>> from riemlocal.fields import ConstantField
    >>> riemlocal.io.save(ConstantField(2 * np.eye(2)), "field.npz")  # doctest: +SKIP
    """
    _check_path(path)
    encoder = _Encoder()
    header = {
        "format": FORMAT_NAME,
        "version": FORMAT_VERSION,
        "riemlocal_version": importlib.import_module("riemlocal").__version__,
        "object": encoder.obj(obj),
    }
    arrays = dict(encoder.arrays)
    arrays[_HEADER_KEY] = np.array(json.dumps(header))
    with open(path, "wb") as handle:
        np.savez_compressed(handle, **arrays)


def load(path):
    """Load an object written by :func:`save`.

    Only arrays and a JSON header are read (``allow_pickle=False``) and only
    classes listed in :data:`ALLOWED_CLASSES` are built.

    Parameters
    ----------
    path : str or path-like

    Returns
    -------
    obj : object
        A field equal to the saved one, or an estimator with the same
        parameters and fitted attributes (it predicts / transforms identically).

    Raises
    ------
    TypeError
        If ``path`` is not a file name.
    FileNotFoundError
        If ``path`` does not exist.
    ValueError
        If the file is not a riemlocal file, is corrupted, was written by a
        newer format version, or names a class outside the allow-list.
    """
    where = str(_check_path(path))
    try:
        with np.load(path, allow_pickle=False) as data:
            arrays = {key: data[key] for key in data.files}
    except (FileNotFoundError, PermissionError, IsADirectoryError):
        raise
    except (OSError, ValueError, EOFError, zipfile.BadZipFile, zlib.error, KeyError, NotImplementedError) as exc:
        # NotImplementedError: a flipped byte in a zip header names an unknown compression method
        raise ValueError(f"{where}: not a readable riemlocal .npz file ({type(exc).__name__}: {exc})") from exc
    if _HEADER_KEY not in arrays:
        raise ValueError(f"{where}: not a riemlocal file (no {_HEADER_KEY} entry)")
    try:
        header = json.loads(str(arrays.pop(_HEADER_KEY)[()]))
    except (ValueError, IndexError, RecursionError) as exc:
        raise ValueError(f"{where}: corrupted header ({type(exc).__name__}: {exc})") from exc
    if not isinstance(header, dict) or header.get("format") != FORMAT_NAME:
        raise ValueError(f"{where}: not a riemlocal file (format {header.get('format') if isinstance(header, dict) else None!r})")
    version = header.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or not 1 <= version <= FORMAT_VERSION:
        raise ValueError(
            f"{where}: unsupported riemlocal file version {version!r}; this installation reads versions 1..{FORMAT_VERSION}"
        )
    try:
        return _Decoder(arrays, where).obj(header.get("object"))
    except (TypeError, KeyError, AttributeError, RecursionError) as exc:  # a header of the wrong structure
        raise ValueError(f"{where}: corrupted header ({type(exc).__name__}: {exc})") from exc
