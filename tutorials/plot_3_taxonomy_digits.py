"""
The local-distance taxonomy on digits
=====================================

Ramanan & Baker (2011) sort local distance functions along three axes:
**how** a metric is learned (LDA, LMNN, ...), **where** it is placed (one
global metric, one per class, one per training exemplar, at reference
points, or lazily at the query) and **when** it is applied (frozen at the
test point, at the training point, or integrated along the line between
them). In riemlocal every cell of that taxonomy is a setting of one
classifier, :class:`~riemlocal.neighbors.LocalMetricKNN`:

* a global metric picks a shortlist of candidates (fast, KD-tree);
* a field of local metrics, built by ``where``, re-ranks them with ``rule``;
* ``decision="knn"`` votes among the :math:`k` nearest, ``"ccknn"`` picks
  the class with the smallest sum of its :math:`k` smallest squared
  distances (Im & Taylor).

This tutorial runs a few cells on a small split of scikit-learn's digits. The
command ``riemlocal taxonomy`` runs the full grid, and ``riemlocal taxonomy
--dataset mnist`` the paper's sampled-MNIST protocol.
"""

import time

import matplotlib.pyplot as plt
from sklearn.datasets import load_digits
from sklearn.decomposition import PCA
from sklearn.model_selection import train_test_split
from sklearn.neighbors import KNeighborsClassifier

from riemlocal.learners import LDAMetric, LMNNMetric
from riemlocal.neighbors import LocalMetricKNN

# %%
# Data: 8x8 digit images projected on 20 principal components, 600 training
# and 300 test images.

X, y = load_digits(return_X_y=True)
X = PCA(n_components=20, random_state=0).fit_transform(X)
X_train, X_test, y_train, y_test = train_test_split(X, y, train_size=600, test_size=300, random_state=0, stratify=y)

# %%
# The cells
# ---------
# Each entry is one (how, where, when) combination; LDA is the default
# learner. ``"hybrid"`` is Ramanan & Baker's hybrid: LMNN for the global
# metric, LDA for the local ones.

cells = {
    "Euclidean 3-NN": None,
    "global LDA": dict(where="global"),
    "global LDA, CCKNN": dict(where="global", decision="ccknn"),
    "per-class, train rule": dict(where="class", rule="train"),
    "per-exemplar, train rule": dict(where="exemplar", rule="train"),
    "lazy, test rule": dict(where="lazy", rule="test"),
    "20 references, train rule": dict(where="reference", rule="train", n_references=20),
    "20 references, line rule": dict(where="reference", rule="line", n_references=20),
    "hybrid LMNN + LDA, per-class": dict(learner=LMNNMetric(), local_learner=LDAMetric(), where="class", rule="train"),
}

errors, seconds = {}, {}
for name, settings in cells.items():
    start = time.perf_counter()
    if settings is None:
        model = KNeighborsClassifier(n_neighbors=3)
    else:
        model = LocalMetricKNN(n_neighbors=3, shortlist=20, random_state=0, **settings)
    errors[name] = 1.0 - model.fit(X_train, y_train).score(X_test, y_test)
    seconds[name] = time.perf_counter() - start

print(f"{'cell':<30} {'test error':>10} {'seconds':>8}")
for name in cells:
    print(f"{name:<30} {errors[name]:10.3f} {seconds[name]:8.2f}")

# %%
# With 300 test images one error is 0.33 %, so differences of a point or
# two are within noise; the full experiment (``riemlocal taxonomy``) averages
# over several splits.

fig, ax = plt.subplots(figsize=(7, 4))
names = list(cells)
ax.barh(names, [100 * errors[name] for name in names], color="tab:blue")
ax.invert_yaxis()
ax.set_xlabel("test error (%)")
ax.set_title("digits, 600 training images, 3-NN")
fig.tight_layout()

# %%
# Inspecting a fitted cell
# ------------------------
# The field behind a classifier is ``field_``; any rule of
# :func:`riemlocal.distances.distance` can be evaluated on it, and it can be
# saved with :func:`riemlocal.io.save` (then ``riemlocal geodesic`` measures
# two points of it from the command line).

model = LocalMetricKNN(where="reference", rule="line", n_references=20, random_state=0).fit(X_train, y_train)
print(model.field_)
