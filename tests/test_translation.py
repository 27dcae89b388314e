"""Every field is translation invariant to rounding: shifting centers, training data and queries by 1e8 changes nothing.

The shifted inputs are the reference: ``shifted - offset`` is exact (Sterbenz), so both fields hold the
same geometry and any difference is cancellation inside the field (the expanded quadratics
:math:`x^T P x - 2 x^T P x_r + x_r^T P x_r` of an earlier version picked the wrong cell 139 times in 200
at 1e8 and changed the smooth metric by 78%).
"""

import numpy as np
import pytest

from helpers import random_spd
from riemlocal.fields import ConstantField, GLMLField, LazyField, NearestLocalField, RBFLocalField, SmoothLocalField
from riemlocal.learners import LDAMetric

OFFSETS = (1e4, -3e6, 1e8)


def _data(seed=0, dim=3, n_centers=6):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n_centers, dim)), random_spd(rng, n_centers, dim), rng.normal(size=(200, dim))


def _local_fields(centers):
    _, metrics, _ = _data()
    return {
        "nearest": NearestLocalField(centers, metrics),
        "nearest-proximity": NearestLocalField(centers, metrics, proximity=metrics[0]),
        "rbf": RBFLocalField(centers, metrics, sigma=0.7, proximity=metrics[1]),
        "rbf-own": RBFLocalField(centers, metrics, sigma=0.4),
        "smooth": SmoothLocalField(centers, metrics, rho=2.0),
    }


def _relative_gap(a, b):
    return np.abs(a - b).max() / np.abs(b).max()


def _shifted_pair(values, offset):
    """``(values + offset) - offset`` (exact) and ``values + offset``: the same geometry, shifted."""
    shifted = values + offset
    return shifted - offset, shifted


@pytest.mark.parametrize("offset", OFFSETS)
@pytest.mark.parametrize("name", sorted(_local_fields(np.zeros((6, 3)))))
def test_local_fields_are_translation_invariant(name, offset):
    centers, _, points = _data()
    (centers, shifted_centers), (points, shifted_points) = _shifted_pair(centers, offset), _shifted_pair(points, offset)
    field, shifted = _local_fields(centers)[name], _local_fields(shifted_centers)[name]
    assert _relative_gap(shifted.metric_matrix(shifted_points), field.metric_matrix(points)) < 1e-10
    if field.is_smooth:
        assert _relative_gap(shifted.metric_derivative(shifted_points), field.metric_derivative(points)) < 1e-10
        curves = points[:40].reshape(4, 10, 3)
        shifted_curves = shifted_points[:40].reshape(4, 10, 3)
        for term, shifted_term in zip(field.segment_energy_terms(curves, True), shifted.segment_energy_terms(shifted_curves, True)):
            assert _relative_gap(shifted_term, term) < 1e-10
    else:
        np.testing.assert_array_equal(shifted.nearest_center(shifted_points), field.nearest_center(points))


@pytest.mark.parametrize("offset", OFFSETS)
def test_constant_glml_and_lazy_fields_are_translation_invariant(offset):
    rng = np.random.default_rng(3)
    X = np.concatenate([rng.normal(loc, scale, size=(25, 3)) for loc, scale in ((-1.0, 1.0), (0.5, 0.7), (1.5, 1.3))])
    y = np.repeat([0, 1, 2], 25)
    (X, shifted_X), (points, shifted_points) = _shifted_pair(X, offset), _shifted_pair(rng.normal(size=(30, 3)), offset)
    metric = random_spd(rng, 1, 3)[0]
    pairs = [
        (ConstantField(metric), ConstantField(metric)),
        (GLMLField(X, y, gamma=0.5), GLMLField(shifted_X, y, gamma=0.5)),
        (LazyField(LDAMetric(), X, y, n_local=20), LazyField(LDAMetric(), shifted_X, y, n_local=20)),
    ]
    for field, shifted in pairs:
        assert _relative_gap(shifted.metric_matrix(shifted_points), field.metric_matrix(points)) < 1e-10, field
