r"""A new field plugs into the compiled solvers by declaring a capability: no solver is edited.

The toy field :math:`M(x) = \phi(x) A`, :math:`\phi = s\, e^{b \cdot x}`, registers its own
evaluators (closed forms derived here) for its own data type. Exp, Log and distances then
run compiled, through its evaluators (which count their calls), and agree with the numpy
path, which knows the field only by ``metric_matrix`` and ``metric_derivative``.
"""

import math
import subprocess
import sys
from collections import namedtuple

import numpy as np
import pytest
from numba import njit

from riemlocal import LearnedMetricManifold
from riemlocal.distances import pairwise_distances
from riemlocal.fields import MetricField
from riemlocal.numerics import CompiledCapability, EnergyLogSolver, compiled_data, integrate_geodesic, register_evaluators

Conformal = namedtuple("Conformal", ["metric", "slope", "inverse_slope", "scale", "calls"])


@njit
def _dot(a, b):
    total = 0.0
    for i in range(len(a)):
        total += a[i] * b[i]
    return total


@njit
def _quadratic(metric, u, w):
    """:math:`u^T A w`."""
    total = 0.0
    for i in range(len(u)):
        for j in range(len(w)):
            total += u[i] * metric[i, j] * w[j]
    return total


@njit
def _factor(data, x, shift):
    r""":math:`\phi(x + \text{shift})`."""
    total = 0.0
    for i in range(len(x)):
        total += data.slope[i] * (x[i] + shift[i])
    return data.scale * math.exp(total)


@njit
def _point_work(data):
    return np.zeros(len(data.slope))  # a zero shift


@njit
def _point_metric(data, x, metric, work):
    data.calls[0] += 1
    factor = _factor(data, x, work)
    for i in range(len(x)):
        for j in range(len(x)):
            metric[i, j] = factor * data.metric[i, j]
    return True


@njit
def _acceleration(data, x, v, out, work):
    r""":math:`c'' = -(b \cdot v) v + \tfrac12 (v^T A v) A^{-1} b` (the factor cancels)."""
    data.calls[1] += 1
    slope_v, q = _dot(data.slope, v), _quadratic(data.metric, v, v)
    for i in range(len(v)):
        out[i] = -slope_v * v[i] + 0.5 * q * data.inverse_slope[i]
    return True


@njit
def _acceleration_derivative(data, x, v, dx, dv, out, work):
    slope_v, slope_dv, cross = _dot(data.slope, v), _dot(data.slope, dv), _quadratic(data.metric, v, dv)
    for i in range(len(v)):
        out[i] = -slope_dv * v[i] - slope_v * dv[i] + cross * data.inverse_slope[i]
    return True


@njit
def _curve_work(data, n_segments):
    """Factors at the midpoints ``(N + 1,)`` and the steps ``(N + 1, dim)``."""
    return np.empty(n_segments + 1), np.empty((n_segments + 1, len(data.slope)))


@njit
def _curve_terms(data, curve, work, terms):
    r""":math:`M d = \phi A d` and :math:`\nabla_x f = \phi\, (d^T A d)\, b` at the midpoints (relative to the first node)."""
    data.calls[2] += 1
    factors, steps = work
    dim = curve.shape[1]
    for s in range(len(curve) - 1):
        exponent = 0.0
        for i in range(dim):
            steps[s, i] = curve[s + 1, i] - curve[s, i]
            exponent += data.slope[i] * 0.5 * ((curve[s + 1, i] - curve[0, i]) + (curve[s, i] - curve[0, i]))
        factors[s] = data.scale * math.exp(exponent)
        q = _quadratic(data.metric, steps[s], steps[s])
        for i in range(dim):
            total = 0.0
            for j in range(dim):
                total += data.metric[i, j] * steps[s, j]
            terms[0, i, s], terms[1, i, s] = factors[s] * total, factors[s] * q * data.slope[i]
    return True


@njit
def _curve_hessian(data, n_segments, work, blocks):
    r""":math:`C = \phi q\, b b^T`, :math:`K = 2 \phi\, b (A d)^T`, :math:`A = 2 \phi A` of the last :func:`_curve_terms`."""
    factors, steps = work
    dim = steps.shape[1]
    for s in range(n_segments):
        q = _quadratic(data.metric, steps[s], steps[s])
        for j in range(dim):
            metric_step = 0.0
            for k in range(dim):
                metric_step += data.metric[j, k] * steps[s, k]
            for i in range(dim):
                blocks[0, i, j, s] = factors[s] * q * data.slope[i] * data.slope[j]
                blocks[1, i, j, s] = 2.0 * factors[s] * data.slope[i] * metric_step
                blocks[2, i, j, s] = 2.0 * factors[s] * data.metric[i, j]


@njit
def _curve_trapezoid(data, curve, work):
    total, origin = 0.0, curve[0]
    for s in range(len(curve) - 1):
        ends = 0.0
        for node in (s, s + 1):
            exponent = 0.0
            for i in range(curve.shape[1]):
                exponent += data.slope[i] * (curve[node, i] - origin[i])
            ends += data.scale * math.exp(exponent)
        quadratic = 0.0
        for i in range(curve.shape[1]):
            for j in range(curve.shape[1]):
                quadratic += (curve[s + 1, i] - curve[s, i]) * data.metric[i, j] * (curve[s + 1, j] - curve[s, j])
        total += 0.5 * ends * quadratic
    return (len(curve) - 1) * total


@njit
def _curve_quadratics(data, points, vectors, n, work, out):
    for s in range(n):
        exponent = 0.0
        for i in range(points.shape[0]):
            exponent += data.slope[i] * points[i, s]
        out[s] = data.scale * math.exp(exponent) * _quadratic(data.metric, vectors[:, s], vectors[:, s])
    return True


@njit
def _hidden_weight(data, x0, x1, work):
    return 0.0  # a smooth conformal factor: nothing to hide between two points


@njit
def _relative_to(data, origin, scratch):
    return Conformal(data.metric, data.slope, data.inverse_slope, _factor(data, origin, scratch), data.calls)


register_evaluators(
    Conformal,
    point_work=_point_work,
    point_metric=_point_metric,
    acceleration=_acceleration,
    acceleration_derivative=_acceleration_derivative,
    curve_work=_curve_work,
    curve_terms=_curve_terms,
    curve_hessian=_curve_hessian,
    curve_trapezoid=_curve_trapezoid,
    curve_quadratics=_curve_quadratics,
    relative_scratch=_point_work,
    relative_to=_relative_to,
    hidden_weight=_hidden_weight,
)


class ConformalField(MetricField):
    r""":math:`M(x) = e^{b \cdot x} A`; with ``compiled`` it declares its capability."""

    def __init__(self, metric, slope, compiled=True):
        super().__init__(len(slope))
        self.metric, self.slope = np.asarray(metric, dtype=float), np.asarray(slope, dtype=float)
        self.calls = np.zeros(3, dtype=np.int64)  # point metrics, accelerations, curve terms
        data = Conformal(self.metric, self.slope, np.linalg.solve(self.metric, self.slope), 1.0, self.calls)
        self._capability = CompiledCapability(data, point_cost=self.dim**2) if compiled else None

    @property
    def capability(self):
        return self._capability

    def metric_matrix(self, base_point):
        x = self._check(base_point)
        return np.exp(x @ self.slope)[..., None, None] * self.metric

    def metric_derivative(self, base_point):
        return self.metric_matrix(base_point)[..., None] * self.slope


@pytest.fixture(scope="module")
def fields():
    rng = np.random.default_rng(3)
    a = rng.normal(size=(3, 3))
    metric, slope = a @ a.T + np.eye(3), np.array([0.4, -0.3, 0.2])
    return ConformalField(metric, slope), ConformalField(metric, slope, compiled=False)


def test_register_evaluators_needs_every_evaluator():
    with pytest.raises(ValueError, match="evaluators must be exactly"):
        register_evaluators(Conformal, point_work=_point_work)


def test_a_new_field_runs_compiled_through_its_own_evaluators(fields):
    compiled, plain = fields
    rng = np.random.default_rng(4)
    x, v = rng.normal(size=(2, 6, 3))
    assert compiled_data(compiled, 6) is compiled.capability.data and compiled_data(plain, 6) is None

    before = compiled.calls.copy()
    ends = integrate_geodesic(compiled, v, x, (0.5, 1.0))
    assert compiled.calls[1] > before[1]  # Exp called the field's compiled acceleration
    np.testing.assert_allclose(ends, integrate_geodesic(plain, v, x, (0.5, 1.0)), rtol=1e-9, atol=1e-12)

    before = compiled.calls.copy()
    result = EnergyLogSolver(compiled, method="newton").solve(x[1:], x[:-1])
    assert compiled.calls[0] > before[0] and compiled.calls[2] > before[2]  # Log: point metrics and curve terms
    reference = EnergyLogSolver(plain, method="newton").solve(x[1:], x[:-1])
    assert np.all(result.converged) and np.all(reference.converged)
    np.testing.assert_allclose(result.length, reference.length, rtol=1e-6)
    np.testing.assert_allclose(result.initial_velocity, reference.initial_velocity, rtol=1e-5, atol=1e-8)

    space = LearnedMetricManifold(compiled)  # the manifold and the distance rules reach the same evaluators
    before = compiled.calls.copy()
    distances = pairwise_distances(space, x[:3], rule="geodesic")
    assert compiled.calls[2] > before[2]
    np.testing.assert_allclose(distances, pairwise_distances(LearnedMetricManifold(plain), x[:3], rule="geodesic"), rtol=1e-6, atol=1e-12)
    np.testing.assert_allclose(space.metric.exp(space.metric.log(x[1], x[0]), x[0]), x[1], atol=1e-5)


def test_a_foreign_field_type_stays_out_of_the_disk_cache(fields, tmp_path):
    """The generic solvers compiled for this module's Conformal type are not cached on disk: a later process
    that cannot import this module (run from elsewhere) still loads the solvers' cache and runs."""
    compiled, _ = fields
    integrate_geodesic(compiled, np.ones((1, 3)), np.zeros((1, 3)))
    EnergyLogSolver(compiled).solve(np.ones(3), np.zeros(3))
    script = (
        "import numpy as np; from riemlocal import SmoothLocalField, LearnedMetricManifold; "
        "f = SmoothLocalField([[0.0, 0.0], [1.0, 1.0]], [np.eye(2), 2 * np.eye(2)]); m = LearnedMetricManifold(f); "
        "x, y = np.zeros(2), np.ones(2); print(abs(m.metric.exp(m.metric.log(y, x), x) - y).max() < 1e-6)"
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0 and done.stdout.strip() == "True", done.stderr[-2000:]


def test_compiled_solvers_keep_the_heap_intact(tmp_path):
    """Log, Exp and segment terms on a new field each time, in a fresh process: the reference counts of the
    capability's arrays stay balanced (a wrapper compiled without them once freed a field's arrays in use,
    and the next field's solve aborted with a corrupted heap)."""
    script = (
        "import gc, numpy as np; from riemlocal import SmoothLocalField; "
        "from riemlocal.numerics import EnergyLogSolver, integrate_geodesic; rng = np.random.default_rng(0)\n"
        "for k in range(20):\n"
        "    f = SmoothLocalField(np.eye(3), np.stack([np.diag([1.0, 2.0, 3.0])] * 3))\n"
        "    EnergyLogSolver(f).solve(rng.normal(size=(3, 3)), rng.normal(size=(3, 3)))\n"
        "    integrate_geodesic(f, rng.normal(size=(2, 3)), rng.normal(size=(2, 3)))\n"
        "    f.segment_energy_terms(rng.normal(size=(2, 9, 3)), hessian=True); del f; gc.collect()\n"
        "print('done')"
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0 and done.stdout.strip() == "done", done.stderr[-2000:]
