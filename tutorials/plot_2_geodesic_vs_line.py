"""
Geodesic versus line-integral distances
=======================================

Ramanan & Baker (2011) measure a local distance by integrating the metric
along the *straight line* between two points (their eq. 18). Hauberg,
Freifeld & Black (2012) point out that the straight line is not the shortest
curve once the metric varies, and that only the *geodesic* distance is a
metric. This tutorial shows where the two differ, how the line rules break
the triangle inequality on a piecewise-constant field, how close they are on
real data, and what each costs.

The rules of :func:`riemlocal.distances.distance`, all returned as lengths:

* ``"line"`` -- :math:`\\sqrt{E}`, the root of the segment's energy
  :math:`E = d^T [\\int_0^1 M(x + \\lambda d)\\, d\\lambda]\\, d`;
* ``"line_length"`` -- the segment's length :math:`L`;
* ``"geodesic"`` -- the length of the shortest curve.

Always :math:`d_{geo} \\le L \\le \\sqrt{E}`.
"""

import time

import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import load_wine
from sklearn.decomposition import PCA
from sklearn.preprocessing import StandardScaler

from riemlocal.distances import distance, pairwise_distances
from riemlocal.fields import NearestLocalField, SmoothLocalField
from riemlocal.learners import LDAMetric
from riemlocal.placement import LocalMetrics
from riemlocal.plotting import plot_metric_ellipses

# %%
# Where the straight line is a poor path
# --------------------------------------
# On the two-metric field of Hauberg et al. (:math:`M_1 = 2I` at
# :math:`(2, 2)`, :math:`M_2 = I` at :math:`(4, 4)`), we measure from
# :math:`(1, 3)` to every point of a grid and map the ratio
# :math:`L / d_{geo}`: the straight line is nearly optimal when it stays in one
# region and loses most when it grazes the expensive one.

field = SmoothLocalField([[2.0, 2.0], [4.0, 4.0]], [2.0 * np.eye(2), np.eye(2)], rho=1.0)
source = np.array([1.0, 3.0])
grid = np.stack(np.meshgrid(np.linspace(0.0, 6.0, 13), np.linspace(0.0, 6.0, 13)), axis=-1).reshape(-1, 2)
grid = grid[np.linalg.norm(grid - source, axis=1) > 0.5]
line_length = distance(field, source, grid, rule="line_length")
geodesic = distance(field, source, grid, rule="geodesic")
excess = line_length / geodesic - 1.0

fig, ax = plt.subplots(figsize=(6, 5))
plot_metric_ellipses(field, (0.0, 6.0, 0.0, 6.0), n_grid=7, ax=ax, edgecolors="0.7")
points = ax.scatter(*grid.T, c=100 * excess, cmap="viridis", s=60)
ax.plot(*source, "r*", ms=14)
fig.colorbar(points, ax=ax, label="line length / geodesic - 1 (%)")
ax.set_title("how much longer the straight line is, from the red star")
print(f"largest excess of the line length: {100 * excess.max():.2f} %")

# %%
# The line rules are not metrics
# ------------------------------
# On a piecewise-constant field (eight random anisotropic metrics on nearest
# cells) the line integral is computed exactly, cell by cell. For random
# triples :math:`(a, b, c)` we count how often
# :math:`d(a, c) > d(a, b) + d(b, c)`: going round through :math:`b` beats the
# straight line, so the triangle inequality fails.

rng = np.random.default_rng(0)
centers = rng.uniform(0.0, 1.0, size=(8, 2))
factors = rng.normal(size=(8, 2, 2))
metrics = factors @ np.swapaxes(factors, 1, 2) + 0.05 * np.eye(2)
cells = NearestLocalField(centers, metrics)
triples = rng.uniform(0.0, 1.0, size=(1000, 3, 2))


def triangle_violations(field, rule, triples):
    a, b, c = triples[:, 0], triples[:, 1], triples[:, 2]
    direct = distance(field, a, c, rule=rule)
    detour = distance(field, a, b, rule=rule) + distance(field, b, c, rule=rule)
    return direct > detour * (1.0 + 1e-6), (direct - detour) / direct  # beyond round-off and solver tolerance


for rule in ("line", "line_length"):
    violated, gap = triangle_violations(cells, rule, triples)
    print(f"{rule:>12}: {violated.mean():6.1%} of triples violate the triangle inequality (worst by {gap.max():.1%})")

# %%
# The geodesic distance of a smooth version of the same field (the softmax
# blend of the same eight metrics) is a true metric. Geodesics are costlier,
# so we test 100 triples; gaps below the relative tolerance 1e-6 of the
# solver are not counted.

blend = SmoothLocalField(centers, metrics, rho=20.0)
violated, gap = triangle_violations(blend, "geodesic", triples[:100])
print(f"    geodesic: {violated.mean():6.1%} of triples violate it (largest gap {gap.max():.1e})")

fig, ax = plt.subplots(figsize=(5, 5))
plot_metric_ellipses(cells, (0.0, 1.0, 0.0, 1.0), n_grid=14, ax=ax)
worst = triples[np.argmax(triangle_violations(cells, "line", triples)[1])]
ax.plot(*worst[[0, 2]].T, "r-", lw=2, label="a to c (straight)")
ax.plot(*worst.T, "k--", lw=2, label="a to b to c")
ax.legend(loc="upper right", framealpha=1.0)
ax.set_title("the worst violation of the line rule")

# %%
# On real data
# ------------
# Wine measurements (standardized, 5 principal components), ten reference
# metrics learned with LDA (Ramanan & Baker's *interpolated* placement), blended
# into Hauberg et al.'s smooth field. We compare the line rules with the geodesic
# distance between 12 queries and 20 training points.

X, y = load_wine(return_X_y=True)
X = PCA(n_components=5).fit_transform(StandardScaler().fit_transform(X))
placement = LocalMetrics(LDAMetric(), where="reference", n_references=10, random_state=0).fit(X, y)
wine_field = placement.smooth_field(rho=1.0)
queries, candidates = X[::15][:12], X[1::9][:20]

values, seconds = {}, {}
for rule in ("test", "train", "line", "line_length", "geodesic"):
    start = time.perf_counter()
    values[rule] = pairwise_distances(wine_field, queries, candidates, rule=rule)
    seconds[rule] = time.perf_counter() - start

fig, ax = plt.subplots(figsize=(5, 5))
for rule, marker in (("line", "o"), ("line_length", "x"), ("test", ".")):
    ax.scatter(values["geodesic"].ravel(), values[rule].ravel(), marker=marker, s=18, label=rule)
top = max(v.max() for v in values.values())
ax.plot([0, top], [0, top], "k:", lw=1)
ax.set_xlabel("geodesic distance")
ax.set_ylabel("distance by the rule")
ax.legend()
ax.set_title("wine, 240 pairs")

ratio = values["line_length"] / values["geodesic"]
print(f"line length / geodesic on wine: median {np.median(ratio):.4f}, max {ratio.max():.4f}")

# %%
# Cost
# ----
# Seconds for the 240 pairs above (one core). The frozen rules are a
# quadratic form; the line rules need a quadrature of the smooth field (or,
# on a piecewise-constant field, a walk over the cell boundaries); the
# geodesic is an energy minimization per pair.

for rule, value in seconds.items():
    print(f"{rule:>12}: {value:7.3f} s ({1e3 * value / queries.shape[0] / candidates.shape[0]:.3f} ms per pair)")
