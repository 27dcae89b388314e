"""Test data and doubles shared by several test files."""

import numpy as np
from sklearn.base import BaseEstimator

from riemlocal.fields import ConstantField, GLMLField, LazyField, NearestLocalField, RBFLocalField, SmoothLocalField
from riemlocal.learners import LDAMetric


class CovarianceLearner(BaseEstimator):
    """Tiny learner: inverse of the weighted within-class covariance plus ``reg * I``."""

    def __init__(self, reg=0.1):
        self.reg = reg

    def fit(self, X, y, sample_weight=None):
        X, y = np.asarray(X, float), np.asarray(y)
        w = np.ones(len(X)) if sample_weight is None else np.asarray(sample_weight, float)
        centered = X.copy()
        for label in np.unique(y):
            members = y == label
            centered[members] -= np.average(X[members], axis=0, weights=w[members])
        covariance = (w[:, None] * centered).T @ centered / w.sum()
        self.metric_ = np.linalg.inv(covariance + self.reg * np.eye(X.shape[1]))
        self.components_ = np.linalg.cholesky(self.metric_).T
        return self


def random_spd(rng, n, dim, condition=10.0):
    """``n`` random SPD ``dim x dim`` matrices with eigenvalues log-uniform in [1, condition]."""
    q, _ = np.linalg.qr(rng.normal(size=(n, dim, dim)))
    return np.einsum("nij,nj,nkj->nik", q, np.exp(rng.uniform(0, np.log(condition), (n, dim))), q)


def one_field_of_each_kind(X, y, seed, n_local):
    """Constant, Nearest, RBF, Smooth, GLML and Lazy fields on labelled data ``(X, y)``, four random centers."""
    rng = np.random.default_rng(seed)
    centers, metrics = rng.normal(size=(4, X.shape[1])), random_spd(rng, 4, X.shape[1])
    return [
        ConstantField(metrics[0]),
        NearestLocalField(centers, metrics),
        RBFLocalField(centers, metrics, sigma=0.5, proximity=metrics[1]),
        SmoothLocalField(centers, metrics, rho=1.5),
        GLMLField(X, y),
        LazyField(LDAMetric(), X, y, n_local=n_local),
    ]


def random_field_3d():
    """A curved 3-D SmoothLocalField: four random metrics of condition <= 20, rho = 0.5."""
    rng = np.random.default_rng(0)
    metrics = []
    for _ in range(4):
        q, _ = np.linalg.qr(rng.normal(size=(3, 3)))
        metrics.append((q * np.exp(rng.uniform(0, np.log(20), 3))) @ q.T)
    return SmoothLocalField(rng.normal(size=(4, 3)), np.array(metrics), rho=0.5)


def assert_figure_is_labelled(figure):
    """Every panel of ``figure`` has a title and axis labels, and no legend overlaps a panel."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    renderer = FigureCanvasAgg(figure).get_renderer()
    figure.draw(renderer)
    panels = [ax for ax in figure.axes if ax.get_visible() and ax.get_label() != "<colorbar>"]
    assert panels
    for ax in panels:
        assert ax.get_title() and ax.get_xlabel() and ax.get_ylabel(), ax
    legends = [*figure.legends, *(ax.get_legend() for ax in panels if ax.get_legend() is not None)]
    for legend in legends:
        box = legend.get_window_extent(renderer)
        assert not any(box.overlaps(ax.get_window_extent(renderer)) for ax in panels), legend
