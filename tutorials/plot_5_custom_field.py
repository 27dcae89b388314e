"""
Using your own metric field
===========================

Any smooth field of SPD matrices is a Riemannian metric, and riemlocal's
geodesic machinery works on it as soon as it can evaluate :math:`M(x)`.
Here we write the Poincaré half-plane,

.. math::

    M(x) = \\frac{1}{x_2^2} I, \\qquad x_2 > 0,

whose distance has the closed form
:math:`d(x, y) = \\operatorname{arccosh}\\big(1 + \\|x - y\\|^2 / (2 x_2 y_2)\\big)`
and whose geodesics are half-circles centered on the horizontal axis.
Then a piecewise-constant field of our own, whose line integrals are exact sums.
"""

import time

import matplotlib.pyplot as plt
import numpy as np

from riemlocal.distances import distance
from riemlocal.fields import MetricField, SegmentCells
from riemlocal.manifold import LearnedMetricManifold
from riemlocal.plotting import plot_metric_ellipses

# %%
# The minimal field: only ``metric_matrix``
# -----------------------------------------
# Subclass :class:`~riemlocal.fields.MetricField` and implement
# ``metric_matrix(base_point)`` for points of shape ``(..., dim)``. The
# derivative :math:`\partial M_{ij}/\partial x_k` that the geodesic equation
# needs then comes from autodiff (if the method is written with
# ``autograd.numpy``) or from central differences. A field is smooth unless
# its class declares another ``structure`` (see the last section).


class HalfPlane(MetricField):
    """Poincaré half-plane metric, derivative by central differences."""

    def __init__(self):
        super().__init__(dim=2)

    def metric_matrix(self, base_point):
        x = self._check(base_point)  # validates shape (..., 2) and finiteness
        return np.eye(2) / x[..., 1, None, None] ** 2


# %%
# A faster field: the analytic derivative
# ---------------------------------------
# :math:`\partial_k M_{ij} = -2\,\delta_{ij}\,\delta_{k2} / x_2^3`. Overriding
# ``metric_derivative`` saves the finite differences.


class HalfPlaneAnalytic(HalfPlane):
    """Poincaré half-plane metric with its closed-form derivative."""

    def metric_derivative(self, base_point):
        x = self._check(base_point)
        derivative = np.zeros(x.shape[:-1] + (2, 2, 2))
        derivative[..., 0, 0, 1] = derivative[..., 1, 1, 1] = -2.0 / x[..., 1] ** 3
        return derivative


def closed_form(x, y):
    return np.arccosh(1.0 + np.sum((x - y) ** 2, axis=-1) / (2.0 * x[..., 1] * y[..., 1]))


# %%
# Distances against the closed form
# ---------------------------------

rng = np.random.default_rng(0)
x = np.column_stack([rng.uniform(-2, 2, 20), rng.uniform(0.5, 2.0, 20)])
y = np.column_stack([rng.uniform(-2, 2, 20), rng.uniform(0.5, 2.0, 20)])
exact = closed_form(x, y)
for field in (HalfPlane(), HalfPlaneAnalytic()):
    space = LearnedMetricManifold(field)
    start = time.perf_counter()
    dist = space.metric.dist(x, y)
    seconds = time.perf_counter() - start
    error = np.max(np.abs(dist - exact) / exact)
    print(f"{type(field).__name__:>18}: max relative error {error:.1e}, {seconds:.2f} s for 20 pairs")

# %%
# Exp inverts Log
# ---------------
# ``log(point, base_point)`` is the initial velocity of the geodesic from
# ``base_point`` that reaches ``point`` at :math:`t = 1`; shooting it with
# ``exp`` lands on ``point`` again.

space = LearnedMetricManifold(HalfPlaneAnalytic())
velocity = space.metric.log(y, x)
print("max |Exp_x(Log_x(y)) - y| =", np.abs(space.metric.exp(velocity, x) - y).max())
print("max | ||Log_x(y)||_x - d(x, y) | =", np.abs(space.metric.norm(velocity, x) - exact).max())

# %%
# Geodesics are half-circles
# --------------------------
# A geodesic from :math:`(-1.5, 0.5)` to :math:`(1.5, 0.5)` is the arc of the
# circle through both points centered on the axis :math:`x_2 = 0`, here the
# circle of radius :math:`\sqrt{1.5^2 + 0.5^2}` around the origin.

a, b = np.array([-1.5, 0.5]), np.array([1.5, 0.5])
curve = space.metric.geodesic(a, end_point=b)(np.linspace(0, 1, 80))
radius = np.hypot(*a)
print("max | |c(t)| - radius | =", np.abs(np.linalg.norm(curve, axis=-1) - radius).max())

fig, ax = plt.subplots(figsize=(7, 4))
plot_metric_ellipses(space.field, (-2.0, 2.0, 0.3, 2.0), n_grid=9, ax=ax, edgecolors="0.6", scale=0.08)
angle = np.linspace(0, np.pi, 200)
ax.plot(radius * np.cos(angle), radius * np.sin(angle), "k:", label="half-circle")
ax.plot(*curve.T, "tab:red", label="riemlocal geodesic")
ax.plot(*np.array([a, b]).T, "tab:orange", label="straight line")
ax.set_ylim(0, 2.1)
ax.legend(loc="upper right")
ax.set_title("Poincaré half-plane")

# %%
# A piecewise-constant field: list the cells a segment crosses
# ------------------------------------------------------------
# A field that is constant on regions (per-class metrics, Voronoi cells, the
# leaves of a tree) is not smooth, so it has no geodesics. Its line rules are
# exact finite sums, though, once the field says which cells a segment
# :math:`x \\to y` crosses: declare ``structure = "piecewise_constant"`` and
# implement ``segment_cells``, returning for every piece its segment
# (``pair``), its length in :math:`\\lambda` (``span``) and its metric (an
# index ``cell`` into a table ``metrics``). Here: vertical stripes of width 1
# whose metric alternates between two matrices.


class Stripes(MetricField):
    """Metric ``metrics[0]`` where floor(x_1) is even, ``metrics[1]`` where it is odd."""

    structure = "piecewise_constant"

    def __init__(self, even, odd):
        super().__init__(dim=2)
        self.metrics = np.array([even, odd], dtype=float)

    def metric_matrix(self, base_point):
        x = self._check(base_point)
        return self.metrics[np.floor(x[..., 0]).astype(int) % 2]

    def segment_cells(self, start_point, end_point):
        start, end = (p.reshape(-1, 2) for p in np.broadcast_arrays(start_point, end_point))
        pair, span, cell = [], [], []
        for index, (a, b) in enumerate(zip(start[:, 0], end[:, 0])):
            walls = np.arange(np.floor(min(a, b)) + 1, np.ceil(max(a, b)))  # integers strictly between
            breaks = np.unique(np.r_[0.0, (walls - a) / (b - a) if walls.size else [], 1.0])
            middle = a + 0.5 * (breaks[1:] + breaks[:-1]) * (b - a)
            pair += [index] * len(middle)
            span += list(np.diff(breaks))
            cell += list(np.floor(middle).astype(int) % 2)
        return SegmentCells(np.array(pair), np.array(span), np.array(cell), self.metrics)


stripes = Stripes(np.eye(2), np.diag([9.0, 1.0]))
a, b = np.array([-2.3, 0.0]), np.array([3.1, 1.0])
start = time.perf_counter()
energy = distance(stripes, a, b, rule="line", squared=True)
length = distance(stripes, a, b, rule="line_length")
seconds = time.perf_counter() - start
lam = (np.arange(100_000) + 0.5) / 100_000
speed2 = np.einsum("i,nij,j->n", b - a, stripes.metric_matrix(a + lam[:, None] * (b - a)), b - a)
print(f"exact:    energy {energy:.6f}, length {length:.6f} ({seconds * 1e3:.1f} ms)")
print(f"midpoint: energy {speed2.mean():.6f}, length {np.sqrt(speed2).mean():.6f} (100,000 metric evaluations)")
try:
    distance(stripes, a, b, rule="geodesic")
except ValueError as error:
    print("geodesic:", error)
