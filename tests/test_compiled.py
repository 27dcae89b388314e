"""The compiled evaluators (numba) of the RBF fields' capability against the numpy path: equal to 1e-12."""

import copy
import math
import re

from pathlib import Path

import numpy as np
import pytest
from numba import njit

from riemlocal import LearnedMetricManifold, RBFLocalField, SmoothLocalField
from riemlocal.fields import ConstantField
from riemlocal.fields.kernels import (
    rbf_acceleration,
    rbf_curve_trapezoid,
    rbf_curve_work,
    rbf_point_metric,
    rbf_relative_to,
    rbf_weights,
    rbf_work_space,
)
from riemlocal.fields.shared_kernels import SharedRBFKernel, shared_curve_trapezoid, shared_curve_work, shared_relative_scratch, shared_relative_to
from riemlocal.numerics import (
    COMPILED_MAX_WORK,
    CURVE_MAX_DIM,
    HIDDEN_WEIGHT,
    ODEExpSolver,
    compiled_data,
    integrate_geodesic,
    polyline_length,
    trapezoid_energy,
)
from riemlocal.numerics._capability import hidden_weight, point_work
from riemlocal.numerics._energy import segment_lengths
from riemlocal.utils.compiled import exp_nonpositive


def random_spd(rng, n, dim, condition=30.0):
    q, _ = np.linalg.qr(rng.normal(size=(n, dim, dim)))
    eigenvalues = np.exp(rng.uniform(0.0, np.log(condition), (n, 1, dim)))
    return (q * eigenvalues) @ q.transpose(0, 2, 1)


def rbf_fields(dim, seed=0):
    """A SmoothLocalField, an RBF field with each center's own proximity, one with a global proximity, and two whose
    centers share three metrics (a per-class field: the kernel stores each metric once), with own and global proximity."""
    rng = np.random.default_rng(seed)
    centers, metrics = rng.normal(size=(6, dim)), random_spd(rng, 6, dim)
    proximity, shared = random_spd(rng, 1, dim)[0], metrics[[1, 0, 1, 2, 0, 1]]
    fields = [
        SmoothLocalField(centers, metrics, rho=3.0 / dim),
        RBFLocalField(centers, metrics, sigma=0.7 * dim),
        RBFLocalField(centers, metrics, sigma=0.7 * dim, proximity=proximity),
        SmoothLocalField(centers, shared, rho=3.0 / dim),
        RBFLocalField(centers, shared, sigma=0.7 * dim, proximity=proximity),
    ]
    for k, field in enumerate(fields):
        kernel = field.capability.data
        assert isinstance(kernel, SharedRBFKernel) == (k >= 3) and np.array_equal(kernel.metrics[kernel.groups], field.metrics)
    return fields


def relative(a, b, floor=0.0):
    """The largest difference over the largest ``|b|`` (at least ``floor``: a quantity that vanishes, e.g. the
    acceleration where the nearby centers share one metric, is compared at its scale)."""
    return np.max(np.abs(a - b)) / max(np.max(np.abs(b)), floor)


@pytest.mark.parametrize("dim", [1, 2, 5])
def test_point_kernels_equal_numpy(dim):
    rng = np.random.default_rng(dim)
    for field in rbf_fields(dim):
        kernel = field.capability.data
        work = rbf_work_space(kernel)
        for x, v in rng.normal(size=(10, 2, dim)) * 1.5:
            weights, half_grad = np.empty(field.n_centers), np.empty((field.n_centers, dim))
            assert rbf_weights(kernel, x, weights, half_grad)
            assert relative(weights, field.weights(x)) < 1e-12
            metric = np.empty((dim, dim))
            assert rbf_point_metric(kernel, x, metric, work)
            assert relative(metric, field.metric_matrix(x)) < 1e-12
            out = np.empty(dim)
            assert rbf_acceleration(kernel, x, v, out, work)
            assert relative(out, field._acceleration(v[None], x[None])[0], floor=v @ v) < 1e-12


def test_exp_nonpositive_within_one_ulp_of_libm():
    """The vectorizable exp of the curve kernels' softmax weights, against libm's exp (1 ulp measured, 2 allowed)."""
    rng = np.random.default_rng(3)
    x = -np.concatenate([rng.uniform(0.0, 1.0, 5000), rng.uniform(0.0, 708.0, 5000), np.logspace(-300, 2.85, 500), [0.0, 0.5 * np.log(2.0)]])
    ours, libm = np.array([exp_nonpositive(value) for value in x]), np.array([math.exp(value) for value in x])
    assert np.max(np.abs(ours - libm) / libm) <= 2.0 * np.finfo(float).eps
    assert exp_nonpositive(-0.0) == 1.0 and exp_nonpositive(-708.5) == 0.0 and exp_nonpositive(-np.inf) == 0.0
    assert np.isnan(exp_nonpositive(np.nan))  # a NaN score is still caught


@pytest.mark.parametrize("dim", [1, 2, 5])
def test_batched_kernels_equal_numpy(dim):
    """The public acceleration and its derivative run compiled; the numpy methods stay as the reference."""
    rng = np.random.default_rng(20 + dim)
    x, v, dx, dv = rng.normal(size=(4, 7, dim))
    for field in rbf_fields(dim, seed=dim):
        assert relative(field.geodesic_acceleration(v, x), field._acceleration(v, x)) < 1e-12
        compiled = field.acceleration_derivative(v, x, dx, dv)
        assert relative(compiled, field._acceleration_derivative(x, v, dx, dv)) < 1e-12


def test_refcount_free_falls_back_to_counted_njit(monkeypatch):
    """A numba without the ``_nrt`` option still compiles the kernels, with reference counting."""
    from numba import njit

    from riemlocal.utils import compiled

    def strict_njit(**options):
        if "_nrt" in options:
            raise KeyError(f"Unrecognized options: {set(options) - {'cache'}}")
        return njit(**options)

    monkeypatch.setattr(compiled, "njit", strict_njit)

    def total(a):
        return a.sum()

    assert compiled.refcount_free(total)(np.arange(4.0)) == 6.0


@pytest.mark.parametrize("dim", [1, 2, 5])
def test_compiled_segment_terms_equal_numpy(dim):
    """Segment terms of small batches run compiled (relative to each curve's first node; tests/test_translation.py
    checks them at offsets up to 1e8): equal to the numpy energy terms at the segments' midpoints and steps."""
    rng = np.random.default_rng(40 + dim)
    curves = np.cumsum(rng.normal(size=(3, 7, dim)) * 0.4, axis=1)
    steps, midpoints = np.diff(curves, axis=1), 0.5 * (curves[:, 1:] + curves[:, :-1])
    for field in rbf_fields(dim, seed=dim):
        assert compiled_data(field, curves.shape[0] * (curves.shape[1] - 1)) is not None
        terms = field.segment_energy_terms(curves, hessian=True)
        expected = field.energy_terms(steps, midpoints) + field.energy_hessian(steps, midpoints)
        for compiled, numpy_path in zip(terms, expected, strict=True):
            assert relative(compiled, numpy_path) < 1e-12
        assert len(field.segment_energy_terms(curves)) == 2


@pytest.mark.parametrize("dim", [1, 2, 5])
def test_compiled_trapezoid_energy_equals_numpy(dim):
    """The trapezoid check of the compiled Log (weights at the nodes, relative to the first node) against trapezoid_energy."""
    rng = np.random.default_rng(50 + dim)
    curve = 3.0 + np.cumsum(rng.normal(size=(9, dim)) * 0.4, axis=0)
    for field in rbf_fields(dim, seed=dim):
        kernel = field.capability.data
        if isinstance(kernel, SharedRBFKernel):
            kernel = shared_relative_to(kernel, curve[0], shared_relative_scratch(kernel))
            energy = shared_curve_trapezoid(kernel, curve, shared_curve_work(kernel, 8))
        else:
            kernel = rbf_relative_to(kernel, curve[0], np.empty_like(kernel.centers))
            energy = rbf_curve_trapezoid(kernel, curve, rbf_curve_work(kernel, 8))
        assert relative(energy, trapezoid_energy(field, curve)) < 1e-12


@pytest.mark.parametrize("dim", [1, 2, 4])
def test_compiled_exp_equals_numpy_path(dim):
    rng = np.random.default_rng(10 + dim)
    x, v = rng.normal(size=(2, 12, dim))
    times = (0.0, 0.3, 1.0, 2.5)
    for field in rbf_fields(dim, seed=dim):
        compiled = integrate_geodesic(field, v, x, times, 1e-8, 1e-10)
        numpy_path = integrate_geodesic(field, v, x, times, 1e-8, 1e-10, compiled=False)
        assert relative(compiled, numpy_path) < 1e-12
        np.testing.assert_array_equal(compiled[:, 0], x)


@pytest.mark.parametrize("dim", [1, 3])
@pytest.mark.parametrize("equation", ["jacobi", "transport"])
def test_compiled_riders_equal_numpy_path(dim, equation):
    """Jacobi fields and transported vectors ride the compiled geodesic with the numpy path's steps: equal to rounding."""
    rng = np.random.default_rng(20 + dim)
    x, v = rng.normal(size=(2, 3, dim))
    width = 2 * dim if equation == "jacobi" else dim
    riders = rng.normal(size=(3, 2 * width))
    riders[0, :width] = 0.0  # a zero rider (transport: Gamma(v, 0) = 0 exactly)
    for field in rbf_fields(dim, seed=dim):
        compiled = ODEExpSolver(field, rtol=1e-9).integrate_with(equation, v, x, riders, (0.5, 1.0))
        numpy_path = ODEExpSolver(field, rtol=1e-9, compiled=False).integrate_with(equation, v, x, riders, (0.5, 1.0))
        assert compiled.shape == (3, 2, 2 * width)
        assert relative(compiled, numpy_path) < 1e-11
        assert np.abs(compiled - riders[:, None]).max() > 1e-3  # they moved
    with pytest.raises(ValueError, match="equation must be one of"):
        ODEExpSolver(field).integrate_with("curvature", v, x, riders)
    for bad in [riders[:2]] + ([riders[:, :-1]] if width > 1 else []):  # a partial rider would be read past its end
        with pytest.raises(ValueError, match=r"riders must have shape \(batch, m \* "):
            ODEExpSolver(field).integrate_with(equation, v, x, bad)


@pytest.mark.parametrize("dim", [1, 4])
def test_compiled_polyline_length_equals_numpy(dim):
    """Curve lengths by the compiled quadrature (``polyline_quadratics``: ``curve_quadratics`` along each curve, relative to
    its first node, in blocks; once for consecutive curves from one node) and by numpy, away from the origin too, and the
    lengths of their segments (``segment_lengths``) against each segment measured alone: equal to 1e-12."""
    rng = np.random.default_rng(30 + dim)
    curves = np.cumsum(rng.normal(size=(7, 12, dim)) * 0.3, axis=1)  # 11 segments x 8 points: blocks of 32 and a rest
    curves[1:4] += curves[0, 0] - curves[1:4, :1]  # curves 0-3 from one node, 4 from another
    for field in rbf_fields(dim, seed=dim):
        numpy_field = copy.copy(field)
        numpy_field.capability = None
        numpy_path = polyline_length(numpy_field, curves, 2)
        segments = np.stack([curves[:, :-1], curves[:, 1:]], axis=2)  # every segment a curve of its own
        assert relative(segment_lengths(field, curves, 2), polyline_length(numpy_field, segments, 2)) < 1e-12
        for offset in (0.0, 1e3):  # the field and the curves moved together: the same lengths
            options = {"rho": field.rho} if isinstance(field, SmoothLocalField) else {"sigma": field.sigma, "proximity": field.proximity}
            moved = type(field)(field.centers + offset, field.metrics, **options)
            assert relative(polyline_length(moved, curves + offset, 2), numpy_path) < 1e-12


def test_solver_and_manifold_option():
    field = rbf_fields(2)[0]
    v, x = np.array([[1.0, -0.5]]), np.array([[0.2, 0.1]])
    assert relative(ODEExpSolver(field).exp(v, x), ODEExpSolver(field, compiled=False).exp(v, x)) < 1e-12
    assert LearnedMetricManifold(field, compiled=False).metric.exp_solver.compiled is False
    with pytest.raises(TypeError, match="compiled must be a bool"):
        ODEExpSolver(field, compiled="yes")
    assert ConstantField(np.eye(2)).capability is None  # fields without a capability take the numpy path
    work = field.capability.point_cost
    assert work == field.metrics.size  # R dim^2 per point
    assert compiled_data(field, COMPILED_MAX_WORK // work) is field.capability.data
    assert compiled_data(field, COMPILED_MAX_WORK // work + 1) is None  # large batches: numpy's BLAS
    assert compiled_data(field, COMPILED_MAX_WORK // work + 1, curves=True) is not None  # curve evaluators, dim <= 5
    wide = rbf_fields(CURVE_MAX_DIM + 1)[0]
    assert compiled_data(wide, COMPILED_MAX_WORK // wide.capability.point_cost + 1, curves=True) is None


def test_overflow_falls_back_to_the_numpy_path():
    """Where a proximity overflows, the kernel declines and the numpy path (scaled scores) takes over."""
    field = rbf_fields(2)[0]
    far = np.array([[1e200, -1e200]])
    weights, half_grad = np.empty(field.n_centers), np.empty((field.n_centers, 2))
    assert not rbf_weights(field.capability.data, far[0], weights, half_grad)
    end = integrate_geodesic(field, np.ones((1, 2)), far)
    assert np.all(np.isfinite(end))
    np.testing.assert_array_equal(end, integrate_geodesic(field, np.ones((1, 2)), far, compiled=False))


def test_compiled_kernels_cache_outside_the_package(tmp_path, monkeypatch):
    """numba's cache goes to a per-user directory, never beside the sources (a leftover ``__pycache__`` in
    site-packages shadows a later editable install); an unwritable directory means no disk cache."""
    import riemlocal
    from riemlocal.utils import compiled

    sources = Path(riemlocal.__file__).parent.rglob("*.py")
    assert [path.name for path in sources if re.search(r"\bnjit\(", path.read_text())] == ["compiled.py"]  # all use it
    monkeypatch.delenv("NUMBA_CACHE_DIR", raising=False)
    monkeypatch.setattr(compiled.numba.config, "CACHE_DIR", "")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert compiled.cache_dir() == tmp_path / "cache" / "riemlocal" / "numba"
    package = tmp_path / "package"  # a writable source folder, as site-packages is to its owner
    package.mkdir()
    (package / "kernel_module.py").write_text(
        "from riemlocal.utils.compiled import cached_njit\n\n\n@cached_njit\ndef twice(a):\n    return 2.0 * a\n"
    )
    monkeypatch.syspath_prepend(str(package))
    from kernel_module import twice

    assert twice(np.arange(3.0))[2] == 4.0
    assert list(compiled.cache_dir().rglob("*twice*.nbi")) and not list(package.rglob("*.nbi"))
    assert compiled.numba.config.CACHE_DIR == ""  # numba's setting is restored after decorating
    locked = tmp_path / "locked"
    locked.write_text("a file, not a directory")
    monkeypatch.setenv("XDG_CACHE_HOME", str(locked))

    def thrice(a):
        return 3.0 * a

    assert compiled.cached_njit(thrice)(np.arange(3.0))[2] == 6.0  # compiled, not cached


def test_pair_squared_distances_equal_numpy():
    from riemlocal.utils.arrays import pair_squared_distances

    rng = np.random.default_rng(7)
    points, first, second = rng.normal(size=(30, 35)), rng.integers(0, 30, 500), rng.integers(0, 30, 500)
    expected = np.einsum("pd,pd->p", points[first] - points[second], points[first] - points[second])
    np.testing.assert_allclose(pair_squared_distances(points, first, second), expected, rtol=1e-13)
    assert pair_squared_distances(points, first[:0], second[:0]).shape == (0,)


@njit
def _compiled_hidden_weights(data, start_points, end_points):
    work, out = point_work(data), np.empty(len(start_points))
    for i in range(len(start_points)):
        out[i] = hidden_weight(data, start_points[i], end_points[i], work)
    return out


@pytest.mark.parametrize("dim", [1, 2, 5])
def test_hidden_weight_equals_numpy_and_bounds_the_weights_on_the_chord(dim):
    """The chord bound of Exp's steps: compiled equals numpy, and it bounds every weight that is below HIDDEN_WEIGHT
    (relative to the leading center's) at both ends, sampled at 201 points of each chord."""
    rng = np.random.default_rng(dim)
    for field in rbf_fields(dim):
        x0, x1 = 2.0 * rng.normal(size=(2, 300, dim))
        bound = field.hidden_weight(x0, x1)
        assert relative(_compiled_hidden_weights(field.capability.data, x0, x1), bound, floor=1e-300) < 1e-12
        tau = np.linspace(0.0, 1.0, 201)
        weights = field.weights(x0[:, None] + tau[:, None] * (x1 - x0)[:, None])  # (n, 201, R)
        relative_weights = weights / weights.max(axis=2, keepdims=True)
        weak = (relative_weights[:, 0] < HIDDEN_WEIGHT) & (relative_weights[:, -1] < HIDDEN_WEIGHT)
        reached = np.where(weak[:, None, :], relative_weights, 0.0).max(axis=(1, 2))
        assert np.all(reached <= bound * (1 + 1e-9) + 1e-300)
        assert np.any(bound > HIDDEN_WEIGHT) and np.any(bound <= HIDDEN_WEIGHT)  # the test sees both kinds of chords
