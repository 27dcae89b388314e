"""
Regression and PGA on a learned manifold (body shapes)
======================================================

Hauberg, Freifeld & Black (2012, sec. 4.1) learn one LMNN metric per cluster
of body shapes, grouped by a body measurement, blend them into a smooth
Riemannian metric and then do statistics *on that manifold*: principal
geodesic analysis (PGA) and regression in the tangent space at the Fréchet
mean. Directions along which the measurement changes are stretched, so a
few principal geodesics already predict it.

The CAESAR scans of the paper are not redistributable;
:func:`riemlocal.datasets.make_body_shapes` generates data with the same
layout (shape coefficients plus measurements in mm). We use a small version:
200 bodies, 6 coefficients. The full experiment is ``riemlocal bodyshape``.
"""

import matplotlib.pyplot as plt
import numpy as np
from sklearn.decomposition import PCA
from sklearn.linear_model import LinearRegression
from sklearn.model_selection import KFold, cross_val_predict
from sklearn.pipeline import make_pipeline

from riemlocal.datasets import make_body_shapes
from riemlocal.fields import SmoothLocalField
from riemlocal.learners import LMNNMetric
from riemlocal.learning import GeodesicRegression, PrincipalGeodesicAnalysis, TangentSpaceRegression
from riemlocal.manifold import LearnedMetricManifold
from riemlocal.placement import LocalMetrics

# %%
# Learning the metric
# -------------------
# As in the paper: whiten the coefficients (so that any structure PGA finds
# comes from the metric), cut the bodies into four equal-sized clusters by
# shoulder breadth, learn LMNN metrics for the clusters (jointly, one per
# cluster) and place each at its cluster mean in Hauberg et al.'s smooth
# blend (their eq. 6).

bodies = make_body_shapes(n_samples=200, n_components=6, random_state=0)
X = PCA(whiten=True).fit_transform(bodies.data)
breadth = bodies.target[:, bodies.measurement_names.index("shoulder_breadth")]
clusters = np.searchsorted(np.quantile(breadth, [0.25, 0.5, 0.75]), breadth)

placement = LocalMetrics(LMNNMetric(), where="class").fit(X, clusters)
cluster_means = np.stack([X[clusters == c].mean(axis=0) for c in range(4)])
field = SmoothLocalField(cluster_means, placement.class_metrics_, rho=0.5)
space = LearnedMetricManifold(field)

# %%
# Principal geodesic analysis
# ---------------------------
# Euclidean PCA of whitened data has no preferred direction. PGA in the
# learned metric (tangent PCA at the Fréchet mean, inner product
# :math:`M(\mu)`) orders the bodies by the measurement along its first
# principal geodesic.

pga = PrincipalGeodesicAnalysis(space, n_components=2).fit(X)
coordinates = {"Euclidean PCA": PCA(n_components=2).fit_transform(X), "PGA, learned metric": pga.transform(X)}

fig, axes = plt.subplots(1, 2, figsize=(10, 4.5))
for ax, (title, Z) in zip(axes, coordinates.items()):
    points = ax.scatter(Z[:, 0], Z[:, 1], c=breadth, cmap="viridis", s=14)
    ax.set_title(title)
    ax.set_xlabel("component 1 (whitened units)")
    ax.set_ylabel("component 2 (whitened units)")
fig.colorbar(points, ax=axes, label="shoulder breadth (mm)")
for title, Z in coordinates.items():
    print(f"{title:>20}: correlation of component 1 with shoulder breadth {abs(np.corrcoef(Z[:, 0], breadth)[0, 1]):.2f}")

# %%
# Regression in the tangent space
# -------------------------------
# Predict shoulder breadth from the shape, after reducing it to :math:`k`
# dimensions: Euclidean PCA + linear regression against PGA + linear
# regression on the tangent coordinates
# (:class:`~riemlocal.learning.TangentSpaceRegression`). Mean absolute error of
# 3-fold cross-validation (the metric itself stays fixed; the paper learns it
# inside each fold, which ``riemlocal bodyshape`` does).

folds = KFold(n_splits=3, shuffle=True, random_state=0)
dimensions = [1, 2, 3]
errors = {"Euclidean": [], "learned metric": []}
for k in dimensions:
    euclidean = cross_val_predict(make_pipeline(PCA(n_components=k), LinearRegression()), X, breadth, cv=folds)
    riemannian = cross_val_predict(TangentSpaceRegression(space, LinearRegression(), n_components=k), X, breadth, cv=folds)
    errors["Euclidean"].append(np.abs(euclidean - breadth).mean())
    errors["learned metric"].append(np.abs(riemannian - breadth).mean())
    print(f"k = {k}: Euclidean {errors['Euclidean'][-1]:5.2f} mm, learned metric {errors['learned metric'][-1]:5.2f} mm")

fig, ax = plt.subplots(figsize=(5, 4))
for label, values in errors.items():
    ax.plot(dimensions, values, "o-", label=label)
ax.set_xlabel("number of principal geodesics (components)")
ax.set_ylabel("mean absolute error (mm)")
ax.set_xticks(dimensions)
ax.legend()
ax.set_title("predicting shoulder breadth")

# %%
# Geodesic regression
# -------------------
# The other way round: Fletcher's geodesic regression fits a geodesic
# :math:`t \mapsto \mathrm{Exp}_p(t v)` through the shapes, with :math:`t` the
# standardized measurement. Sampling it shows how body shape changes with
# shoulder breadth (here in the first two PGA coordinates). We fit it on 60
# bodies to keep the tutorial fast.

t = (breadth - breadth.mean()) / breadth.std()
regression = GeodesicRegression(space, tol=1e-4).fit(t[:60], X[:60])
path = regression.predict(np.linspace(-2.0, 2.0, 9))

fig, ax = plt.subplots(figsize=(5, 4.5))
points = ax.scatter(*coordinates["PGA, learned metric"].T, c=breadth, cmap="viridis", s=10, alpha=0.5)
ax.plot(*pga.transform(path).T, "r.-", label="geodesic regression, t = -2 ... 2")
ax.set_xlabel("PGA component 1 (whitened units)")
ax.set_ylabel("PGA component 2 (whitened units)")
fig.colorbar(points, ax=ax, label="shoulder breadth (mm)")
ax.legend()
