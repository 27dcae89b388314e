import json
import re
import zipfile

import numpy as np
import pytest
from sklearn.linear_model import LinearRegression

import riemlocal.io as rio
from riemlocal.fields import ConstantField, NearestLocalField, RBFLocalField, SmoothLocalField
from riemlocal.learners import BoostMetric, CCMLMetric, LDAMetric, LMNNMetric


def _local_inputs(seed=0, n_centers=4, dim=3):
    rng = np.random.default_rng(seed)
    factors = rng.normal(size=(n_centers, dim, dim))
    return rng.normal(size=(n_centers, dim)), factors @ np.swapaxes(factors, 1, 2) + 0.1 * np.eye(dim)


def _fields():
    centers, metrics = _local_inputs()
    return [
        ConstantField(metrics[0]),
        NearestLocalField(centers, metrics),
        NearestLocalField(centers, metrics, proximity=metrics[1]),
        RBFLocalField(centers, metrics, sigma=0.7, proximity=metrics[2]),
        SmoothLocalField(centers, metrics, rho=2.5),
    ]


@pytest.mark.parametrize("field", _fields(), ids=repr)
def test_field_round_trip_is_exact(field, tmp_path):
    path = tmp_path / "field.npz"
    rio.save(field, path)
    loaded = rio.load(path)
    assert type(loaded) is type(field)
    points = np.random.default_rng(1).normal(size=(50, field.dim)) * 2
    np.testing.assert_array_equal(loaded.metric_matrix(points), field.metric_matrix(points))
    for name in ("centers", "metrics", "proximity", "sigma", "rho", "metric"):
        if hasattr(field, name):
            np.testing.assert_array_equal(getattr(loaded, name), getattr(field, name))


def _classification_data():
    rng = np.random.default_rng(0)
    X = np.concatenate([rng.normal(loc, 1.0, size=(20, 3)) for loc in (-2.0, 0.0, 2.0)])
    X[:, 2] *= 5.0
    return X, np.repeat(["a", "b", "c"], 20)


@pytest.mark.parametrize("learner", [LDAMetric(), LMNNMetric(), BoostMetric(), CCMLMetric()], ids=repr)
def test_fitted_learner_transforms_identically_after_reload(learner, tmp_path):
    X, y = _classification_data()
    try:
        learner.fit(X, y)
    except NotImplementedError:
        pytest.skip(f"{type(learner).__name__} is not implemented yet")
    rio.save(learner, tmp_path / "learner.npz")
    loaded = rio.load(tmp_path / "learner.npz")
    assert loaded.get_params() == learner.get_params()
    np.testing.assert_array_equal(loaded.metric_, learner.metric_)
    np.testing.assert_array_equal(loaded.transform(X), learner.transform(X))


def test_unfitted_estimator_stays_unfitted(tmp_path):
    from sklearn.exceptions import NotFittedError

    rio.save(LinearRegression(fit_intercept=False), tmp_path / "e.npz")
    loaded = rio.load(tmp_path / "e.npz")
    assert loaded.fit_intercept is False
    with pytest.raises(NotFittedError):
        loaded.predict(np.zeros((1, 2)))


@pytest.mark.filterwarnings("ignore:X does not have valid feature names")
def test_fitted_sklearn_estimator_with_string_feature_names(tmp_path):
    X = np.random.default_rng(0).normal(size=(30, 3))
    model = LinearRegression().fit(X, X @ [1.0, -2.0, 0.5] + 3)
    model.feature_names_in_ = np.array(["u", "v", "w"], dtype=object)  # as set by a DataFrame fit
    rio.save(model, tmp_path / "m.npz")
    loaded = rio.load(tmp_path / "m.npz")
    np.testing.assert_array_equal(loaded.predict(X), model.predict(X))
    assert loaded.feature_names_in_.dtype == object and list(loaded.feature_names_in_) == ["u", "v", "w"]
    assert isinstance(loaded.intercept_, float) and loaded.intercept_ == model.intercept_


def test_file_holds_no_pickle_and_a_json_header(tmp_path):
    rio.save(_fields()[-1], tmp_path / "f.npz")
    with np.load(tmp_path / "f.npz", allow_pickle=False) as data:
        header = json.loads(str(data["__header__"][()]))
        assert all(data[key].dtype != object for key in data.files)
    assert header["format"] == "riemlocal" and header["version"] == rio.FORMAT_VERSION
    assert header["object"]["class"] == "riemlocal.fields.SmoothLocalField"


def _rewrite_header(path, edit):
    with np.load(path, allow_pickle=False) as data:
        arrays = {key: data[key] for key in data.files}
    header = json.loads(str(arrays["__header__"][()]))
    edit(header)
    arrays["__header__"] = np.array(json.dumps(header))
    with open(path, "wb") as handle:
        np.savez(handle, **arrays)


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda h: h.update(version=99), "unsupported riemlocal file version 99"),
        (lambda h: h.update(version="1"), "unsupported riemlocal file version '1'"),
        (lambda h: h.update(format="other"), "not a riemlocal file"),
        (lambda h: h["object"].update({"class": "os.system"}), "'os.system' is not in riemlocal.io.ALLOWED_CLASSES"),
        (lambda h: h["object"].update({"class": "builtins.eval"}), "not in riemlocal.io.ALLOWED_CLASSES"),
        (lambda h: h["object"]["init"]["__dict__"][0].__setitem__(1, {"__array__": "zz"}), "array 'zz' is missing"),
        (lambda h: h["object"]["init"]["__dict__"][0].__setitem__(1, {"evil": 1}), "corrupted header"),
    ],
)
def test_tampered_header_raises_value_error(edit, message, tmp_path):
    path = tmp_path / "f.npz"
    rio.save(_fields()[1], path)
    _rewrite_header(path, edit)
    with pytest.raises(ValueError, match=re.escape(message)):
        rio.load(path)


def test_tampered_arrays_are_validated_by_the_constructor(tmp_path):
    path = tmp_path / "f.npz"
    rio.save(ConstantField(np.eye(2)), path)
    with np.load(path, allow_pickle=False) as data:
        arrays = {key: data[key] for key in data.files}
    arrays["a0"] = -np.eye(2)
    with open(path, "wb") as handle:
        np.savez(handle, **arrays)
    with pytest.raises(ValueError, match="invalid stored arguments for riemlocal.fields.ConstantField.*positive definite"):
        rio.load(path)


def test_corrupted_and_foreign_files_raise_value_error(tmp_path):
    path = tmp_path / "f.npz"
    rio.save(_fields()[-1], path)
    raw = bytearray(path.read_bytes())
    for name, content in {
        "truncated.npz": bytes(raw[: len(raw) // 2]),
        "text.npz": b"hello, not a zip file",
        "empty.npz": b"",
    }.items():
        (tmp_path / name).write_bytes(content)
        with pytest.raises(ValueError, match="not a readable riemlocal .npz file"):
            rio.load(tmp_path / name)
    np.savez(tmp_path / "plain.npz", x=np.ones(3))
    with pytest.raises(ValueError, match="not a riemlocal file"):
        rio.load(tmp_path / "plain.npz")
    with zipfile.ZipFile(path) as archive:  # flip bytes inside a stored array: the CRC check fails
        info = archive.getinfo("a0.npy")
    offset = info.header_offset
    name_length, extra_length = int.from_bytes(raw[offset + 26 : offset + 28], "little"), int.from_bytes(
        raw[offset + 28 : offset + 30], "little"
    )
    start = offset + 30 + name_length + extra_length + info.compress_size // 2
    flipped = bytearray(raw)
    flipped[start : start + 4] = bytes(b ^ 0xFF for b in flipped[start : start + 4])
    (tmp_path / "flipped.npz").write_bytes(bytes(flipped))
    with pytest.raises(ValueError, match="not a readable riemlocal .npz file"):
        rio.load(tmp_path / "flipped.npz")
    with pytest.raises(FileNotFoundError):
        rio.load(tmp_path / "missing.npz")


def test_object_arrays_in_a_file_are_refused(tmp_path):
    path = tmp_path / "f.npz"
    rio.save(ConstantField(np.eye(2)), path)
    with np.load(path, allow_pickle=False) as data:
        arrays = {key: data[key] for key in data.files}
    arrays["a0"] = np.array([object(), object()], dtype=object)
    with open(path, "wb") as handle:
        np.savez(handle, **arrays)  # written with pickle inside
    with pytest.raises(ValueError, match="not a readable riemlocal .npz file"):
        rio.load(path)


def test_unsupported_objects_raise_type_error(tmp_path):
    with pytest.raises(TypeError, match="not one of riemlocal.io.ALLOWED_CLASSES"):
        rio.save(object(), tmp_path / "x.npz")
    with pytest.raises(TypeError, match="cannot save a value of type"):
        rio.save(LinearRegression(fit_intercept=print), tmp_path / "x.npz")
    assert not (tmp_path / "x.npz").exists()  # encoding fails before the file is opened


def _wine(n_features=4):
    from sklearn.datasets import load_wine
    from sklearn.preprocessing import StandardScaler

    X, y = load_wine(return_X_y=True)
    return StandardScaler().fit_transform(X)[:, :n_features], y


@pytest.mark.parametrize("where", ["class", "reference"])
def test_fitted_placement_builds_the_same_fields_after_reload(where, tmp_path):
    from riemlocal.placement import LocalMetrics

    X, y = _wine()
    placement = LocalMetrics(LDAMetric(), where=where, n_references=5, random_state=0).fit(X, y)
    rio.save(placement, tmp_path / "p.npz")
    loaded = rio.load(tmp_path / "p.npz")
    assert isinstance(loaded.learner, LDAMetric) and loaded.get_params()["where"] == where
    points = X[:7] + 0.1
    for build in ("nearest_field", "rbf_field", "smooth_field"):
        fields = [getattr(p, build)() for p in (placement, loaded)]
        np.testing.assert_array_equal(fields[1].metric_matrix(points), fields[0].metric_matrix(points))


def test_lazy_field_round_trip_stores_its_learner_and_data(tmp_path):
    from riemlocal.fields import LazyField

    X, y = _wine()
    field = LazyField(LDAMetric(), X, y, n_local=20)
    rio.save(field, tmp_path / "lazy.npz")
    loaded = rio.load(tmp_path / "lazy.npz")
    points = X[:4] + 0.05
    np.testing.assert_allclose(loaded.metric_matrix(points), field.metric_matrix(points), rtol=1e-12)


def test_statistics_on_a_saved_manifold_transform_identically(tmp_path):
    from riemlocal.learning import PrincipalGeodesicAnalysis
    from riemlocal.manifold import LearnedMetricManifold

    centers, metrics = _local_inputs(n_centers=3, dim=3)
    X = np.random.default_rng(2).normal(size=(15, 3))
    pga = PrincipalGeodesicAnalysis(LearnedMetricManifold(SmoothLocalField(centers, metrics)), n_components=2).fit(X)
    rio.save(pga, tmp_path / "pga.npz")
    loaded = rio.load(tmp_path / "pga.npz")
    assert type(loaded.space).__name__ == "LearnedMetricManifold"
    np.testing.assert_array_equal(loaded.mean_, pga.mean_)
    np.testing.assert_allclose(loaded.transform(X[:4]), pga.transform(X[:4]), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("params", [dict(where="class", rule="line"), dict(where="reference", decision="ccknn")])
def test_fitted_classifier_predicts_identically_after_reload(params, tmp_path):
    from riemlocal.neighbors import LocalMetricKNN

    X, y = _wine()
    clf = LocalMetricKNN(LDAMetric(), n_references=5, random_state=0, **params).fit(X, y)
    rio.save(clf, tmp_path / "knn.npz")
    loaded = rio.load(tmp_path / "knn.npz")
    np.testing.assert_array_equal(loaded.predict(X[::3] + 0.05), clf.predict(X[::3] + 0.05))


def test_manifold_keeps_its_solver_options(tmp_path):
    from riemlocal.manifold import LearnedMetricManifold

    centers, metrics = _local_inputs(n_centers=2, dim=2)
    rio.save(LearnedMetricManifold(SmoothLocalField(centers, metrics), n_segments=12, tol=1e-9), tmp_path / "m.npz")
    loaded = rio.load(tmp_path / "m.npz")
    assert (loaded.metric.log_solver.n_segments, loaded.metric.log_solver.tol) == (12, 1e-9)


def test_every_single_flipped_byte_gives_a_value_error(tmp_path):
    # before: a flipped byte in a zip header (the compression method) raised NotImplementedError
    path = tmp_path / "m.npz"
    rio.save(LDAMetric().fit(*_classification_data()), path)
    raw = path.read_bytes()
    for position in range(len(raw)):
        flipped = bytearray(raw)
        flipped[position] ^= 0xFF
        (tmp_path / "f.npz").write_bytes(bytes(flipped))
        try:
            rio.load(tmp_path / "f.npz")
        except ValueError:
            pass


@pytest.mark.parametrize(
    "header",
    [
        '{"format": "riemlocal", "version": 1, "object": ' + "[" * 100_000 + "]" * 100_000 + "}",  # RecursionError before
        '{"format": "riemlocal", "version": 1, "object": {"class": "riemlocal.fields.ConstantField", "init": '
        + '{"__tuple__": ' * 5000 + "1" + "}" * 5001 + "}",
        '{"format": "riemlocal", "version": 1, "object": {"class": "riemlocal.fields.ConstantField", "init": '
        '{"__dict__": [[{"__array__": ["a0"]}, 1]]}}}',
        '{"format": "riemlocal", "version": 1, "object": {"class": "riemlocal.fields.ConstantField", "init": {"__tuple__": 3}}}',
        '{"format": "riemlocal", "version": 1, "object": {"class": "riemlocal.fields.ConstantField", "init": [1, 2]}}',
    ],
    ids=["deep-json", "deep-tuples", "unhashable-array-key", "tuple-of-a-number", "init-not-a-mapping"],
)
def test_hostile_headers_give_a_value_error(header, tmp_path):
    np.savez(tmp_path / "h.npz", __header__=np.array(header), a0=np.eye(2))
    with pytest.raises(ValueError, match="h.npz: "):
        rio.load(tmp_path / "h.npz")


def _tamper_fitted(tmp_path, estimator, name, value):
    path = tmp_path / "t.npz"
    setattr(estimator, name, value)
    rio.save(estimator, path)
    return path


@pytest.mark.parametrize(
    "name, value, message",
    [
        ("components_", lambda c: np.where(np.arange(c.size).reshape(c.shape) == 0, np.nan, c), "components_ of riemlocal.learners.LDAMetric contains NaN"),
        ("components_", lambda c: c[:, :2], "components_ of riemlocal.learners.LDAMetric: F = 2 does not match F = 3"),
        ("metric_", lambda m: 2.0 * m, "metric_ of riemlocal.learners.LDAMetric is not components_.T @ components_"),
        ("classes_", lambda c: c[:, None], "classes_ of riemlocal.learners.LDAMetric must have shape ('C',)"),
        ("n_features_in_", lambda n: 4, "components_ of riemlocal.learners.LDAMetric: F = 3 does not match F = 4"),
    ],
)
def test_fitted_attributes_are_validated_on_load(name, value, message, tmp_path):
    # before: a NaN components_ loaded silently and transformed every point to NaN
    learner = LDAMetric().fit(*_classification_data())
    path = _tamper_fitted(tmp_path, learner, name, value(getattr(learner, name)))
    with pytest.raises(ValueError, match=re.escape(message)):
        rio.load(path)


def test_classifier_labels_and_metrics_are_validated_on_load(tmp_path):
    from riemlocal.neighbors import LocalMetricKNN
    from riemlocal.placement import LocalMetrics

    X, y = _wine()
    clf = LocalMetricKNN(LDAMetric(), where="class").fit(X, y)
    with pytest.raises(ValueError, match=re.escape("fit_y_ must hold integer indices in [0, 3)")):
        rio.load(_tamper_fitted(tmp_path, clf, "fit_y_", clf.fit_y_ + 1))
    placement = LocalMetrics(LDAMetric(), where="class").fit(X, y)
    with pytest.raises(ValueError, match="metrics_ must hold positive semidefinite matrices"):
        rio.load(_tamper_fitted(tmp_path, LocalMetrics(LDAMetric(), where="class").fit(X, y), "metrics_", -placement.metrics_))
    with pytest.raises(ValueError, match="metrics_ of riemlocal.placement.LocalMetrics: R = 178 does not match R = 5"):
        rio.load(_tamper_fitted(tmp_path, placement, "centers_", X[:5]))
