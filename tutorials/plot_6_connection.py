"""
Curvature, parallel transport and exact regression
==================================================

A smooth field :math:`M(x)` is a Riemannian metric, so it has a Levi-Civita
connection: Christoffel symbols, curvature, parallel transport and Jacobi
fields (:mod:`riemlocal.connection`, also methods of
:class:`~riemlocal.manifold.LearnedMetric` under geomstats' names). This
tutorial maps the scalar curvature of a learned 2-D field, transports a vector
along one of its geodesics, and shows why geodesic regression needs the
differential of Exp (Jacobi fields) rather than the identity of the chart.
"""

import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import load_wine
from sklearn.decomposition import PCA
from sklearn.preprocessing import StandardScaler

from riemlocal.learners import LMNNMetric
from riemlocal.learning import GeodesicRegression
from riemlocal.manifold import LearnedMetricManifold
from riemlocal.placement import LocalMetrics
from riemlocal.plotting import plot_metric_ellipses

# %%
# Scalar curvature of a learned field
# -----------------------------------
# Wine measurements reduced to two principal components; five reference
# metrics learned by LMNN, blended into Hauberg et al.'s smooth field
# (:math:`\rho = 2`). In 2-D
# the scalar curvature is twice the Gaussian curvature
# (:func:`~riemlocal.connection.scalar_curvature`, from the analytic second
# derivatives of the field). It is far from zero where the metrics change.

X, y = load_wine(return_X_y=True)
X = PCA(n_components=2).fit_transform(StandardScaler().fit_transform(X))
placement = LocalMetrics(LMNNMetric(), where="reference", n_references=5, random_state=0).fit(X, y)
field = placement.smooth_field(rho=2.0)
space = LearnedMetricManifold(field)

bounds = (-4.0, 4.0, -3.0, 3.5)
xs, ys = np.linspace(*bounds[:2], 80), np.linspace(*bounds[2:], 70)
grid = np.stack(np.meshgrid(xs, ys), axis=-1)
scalar = space.metric.scalar_curvature(grid)
limit = np.abs(scalar).max()

fig, ax = plt.subplots(figsize=(6.5, 5))
image = ax.pcolormesh(xs, ys, scalar, cmap="RdBu_r", vmin=-limit, vmax=limit, shading="auto")
fig.colorbar(image, ax=ax, label="scalar curvature")
plot_metric_ellipses(field, bounds, n_grid=9, ax=ax, edgecolors="k", facecolors="none")
ax.scatter(*X.T, c=y, s=6, cmap="viridis")
ax.set_title("scalar curvature and metric ellipses")
print(f"scalar curvature on the grid: from {scalar.min():.3f} to {scalar.max():.3f}")

# %%
# A vector parallel-transported along a geodesic
# ----------------------------------------------
# Parallel transport solves :math:`V' = -\Gamma(c', V)` together with the
# geodesic; it keeps inner products, so the transported vector keeps its
# length in the metric of each point it passes, while its coordinates turn and
# stretch with the ellipses.

start, velocity = np.array([-3.0, 1.5]), np.array([5.5, -4.0])
vector = np.array([0.0, 0.7])
times = np.linspace(0.0, 1.0, 9)
path = space.metric.geodesic(start, initial_tangent_vec=velocity)(times)
transported = np.array([space.metric.parallel_transport(vector, start, direction=t * velocity) for t in times])
norms = np.sqrt(np.einsum("ti,tij,tj->t", transported, field.metric_matrix(path), transported))
print(f"norm of the transported vector along the geodesic: {norms.min():.8f} ... {norms.max():.8f}")

fig, ax = plt.subplots(figsize=(6.5, 5))
plot_metric_ellipses(field, bounds, n_grid=9, ax=ax, edgecolors="0.6", facecolors="none")
ax.plot(*path.T, "k.-", label="geodesic")
ax.quiver(*path.T, *transported.T, color="tab:red", angles="xy", scale_units="xy", scale=1, label="parallel transport")
ax.set_xlim(*bounds[:2])
ax.set_ylim(*bounds[2:])
ax.legend(loc="lower right")
ax.set_title("a vector transported along a geodesic")

# %%
# Exact versus flat-chart geodesic regression
# -------------------------------------------
# Points scattered around a geodesic. The exact fit (the default) takes the
# gradient of the squared residuals through the Jacobians of Exp, from Jacobi
# fields (:func:`~riemlocal.connection.exp_differential`); ``method="flat"``
# replaces them by the identity, an approximation that stops above the minimum
# wherever the field is curved. This learned field is mildly curved, so the gap
# is small here (on the strongly curved field of the test suite, three metrics
# of condition 30--80, it is 5.7 %); the exact fit is never worse.

rng = np.random.default_rng(0)
t = np.linspace(-1.0, 1.0, 20)
base, direction = np.array([0.0, -1.0]), np.array([-3.0, 2.5])
Y = space.metric.exp(t[:, None] * direction, base) + 0.4 * rng.normal(size=(len(t), 2))
exact = GeodesicRegression(space).fit(t, Y)
flat = GeodesicRegression(space, method="flat").fit(t, Y)
print(f"mean squared geodesic residual, exact fit:      {exact.objective_:.7f}")
gap = 100 * (flat.objective_ / exact.objective_ - 1)
print(f"mean squared geodesic residual, flat-chart fit: {flat.objective_:.7f} ({gap:.3f} % above)")

times = np.linspace(-1.1, 1.1, 25)
fig, ax = plt.subplots(figsize=(6.5, 5))
plot_metric_ellipses(field, bounds, n_grid=9, ax=ax, edgecolors="0.6", facecolors="none")
ax.scatter(*Y.T, c="k", s=12, label="data")
ax.plot(*exact.predict(times).T, "tab:red", label=f"exact ({exact.objective_:.6f})")
ax.plot(*flat.predict(times).T, "tab:blue", ls="--", label=f"flat chart ({flat.objective_:.6f})")
ax.set_xlim(*bounds[:2])
ax.set_ylim(*bounds[2:])
ax.legend(loc="lower right")
ax.set_title("geodesic regression: exact vs flat-chart")
plt.show()
