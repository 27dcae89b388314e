"""
Metric fields in 2-D: ellipses, straight lines and geodesics
============================================================

A local metric learner gives one matrix :math:`M_r` per region of feature
space. riemlocal treats these as samples of a *metric tensor field*
:math:`M(x)`. This tutorial draws such a field and compares the straight line
between two points with the shortest curve (the geodesic), on the two-metric
example of Hauberg, Freifeld & Black (2012, sec. 2):
:math:`M_1 = 2I` placed at :math:`(2, 2)` and :math:`M_2 = I` at :math:`(4, 4)`.
"""

import matplotlib.pyplot as plt
import numpy as np

from riemlocal.distances import distance
from riemlocal.fields import NearestLocalField, SmoothLocalField
from riemlocal.manifold import LearnedMetricManifold
from riemlocal.plotting import plot_metric_ellipses, plot_volume

centers = np.array([[2.0, 2.0], [4.0, 4.0]])
metrics = np.array([2.0 * np.eye(2), np.eye(2)])

# %%
# Two ways to fill the space between the centers
# -----------------------------------------------
# The *nearest* field uses the metric of the closest center (closeness measured
# in each center's own metric), so it is piecewise constant with a jump on the
# cell boundary. The *smooth* field blends the metrics with softmax weights
# :math:`w_r(x) \propto \exp(-\tfrac{\rho}{2}\|x - x_r\|^2_{M_r})`; it is a
# Riemannian metric, so geodesics exist.
#
# Each ellipse is the set of points at metric distance :math:`s` from its
# center: where the metric is large (near :math:`(2, 2)`), ellipses are small
# and travel is expensive. The grey background is the log volume element
# :math:`\tfrac12 \log\det M(x)`.

nearest = NearestLocalField(centers, metrics)
smooth = SmoothLocalField(centers, metrics, rho=1.0)
bounds = (0.0, 6.0, 0.0, 6.0)

fig, axes = plt.subplots(1, 2, figsize=(10, 5))
for ax, field, title in zip(axes, (nearest, smooth), ("nearest (piecewise constant)", "smooth (rho = 1)")):
    plot_volume(field, bounds, ax=ax)
    plot_metric_ellipses(field, bounds, n_grid=9, ax=ax)
    ax.plot(*centers.T, "r+", ms=12, mew=2)
    ax.set_title(title)
fig.tight_layout()

# %%
# Straight lines versus geodesics
# -------------------------------
# Ramanan & Baker measure a distance along the straight line between two
# points. On a curved metric the shortest path bends away from the expensive
# region. :class:`~riemlocal.manifold.LearnedMetricManifold` computes it:
# ``space.metric.geodesic(a, end_point=b)`` returns a curve :math:`c(t)`,
# :math:`t \in [0, 1]`, and ``space.metric.dist`` its length.

space = LearnedMetricManifold(smooth)
starts = np.array([[1.0, 3.0], [3.0, 0.5], [0.5, 5.0]])
ends = np.array([[5.0, 3.0], [3.0, 5.5], [5.0, 0.5]])
t = np.linspace(0.0, 1.0, 60)
geodesics = space.metric.geodesic(starts, end_point=ends)(t)  # shape (3, 60, 2)

fig, ax = plt.subplots(figsize=(6, 6))
plot_metric_ellipses(smooth, bounds, n_grid=9, ax=ax, edgecolors="0.6")
for a, b, curve in zip(starts, ends, geodesics):
    ax.plot(*np.array([a, b]).T, color="tab:blue")
    ax.plot(*curve.T, color="tab:red")
    ax.plot(*np.array([a, b]).T, "ko", ms=4)
ax.legend(ax.get_lines()[:2], ["straight line", "geodesic"])
ax.set_title("geodesics avoid the expensive region around (2, 2)")

# %%
# How much shorter?
# -----------------
# The geodesic distance is never longer than the length of the straight
# line, which in turn is never longer than the square root of the straight
# line's energy (the ``"line"`` rule of Ramanan & Baker, eq. 18).
# :func:`riemlocal.distances.distance` returns all three as lengths.

print(f"{'from':>12} {'to':>12} {'line':>8} {'line_length':>12} {'geodesic':>9}")
for a, b in zip(starts, ends):
    values = [distance(smooth, a, b, rule=rule) for rule in ("line", "line_length", "geodesic")]
    print(f"{str(a):>12} {str(b):>12} {values[0]:8.4f} {values[1]:12.4f} {values[2]:9.4f}")

# %%
# A geodesic has constant speed :math:`\|c'(t)\|_{M(c(t))}`, equal to its
# length. We check it with finite differences along the first curve.

curve = geodesics[0]
velocity = np.gradient(curve, t, axis=0)
speed = np.sqrt(np.einsum("ni,nij,nj->n", velocity, smooth.metric_matrix(curve), velocity))
print(f"speed along the first geodesic: min {speed[1:-1].min():.4f}, max {speed[1:-1].max():.4f}")
print(f"its length: {space.metric.dist(starts[0], ends[0]):.4f}")
