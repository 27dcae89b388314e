"""Local metrics stored as low rank plus a multiple of the identity give the dense field's values."""

import copy

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from riemlocal import LearnedMetricManifold
from riemlocal.fields import NearestLocalField, RBFLocalField, SmoothLocalField
from riemlocal.fields._bank import LOW_RANK_MIN_DIM, DenseMetrics, LowRankMetrics, metric_bank


def _low_rank_metrics(rng, n_centers, dim, rank, scale):
    factors = rng.normal(size=(n_centers, dim, rank))
    return factors @ factors.transpose(0, 2, 1) + scale * np.eye(dim)


def _dense_twin(field):
    """The same field with its metrics stored dense."""
    twin = copy.copy(field)
    twin._bank = DenseMetrics(field.metrics)
    return twin


def _gap(a, b):
    a, b = (a, b) if isinstance(a, tuple) else ((a,), (b,))
    return max(np.abs(p - q).max() / max(np.abs(q).max(), 1e-300) for p, q in zip(a, b))


@settings(max_examples=12, deadline=None)
@given(
    n_centers=st.integers(1, 6),
    rank=st.integers(1, LOW_RANK_MIN_DIM // 4),
    scale=st.floats(0.1, 10.0),
    own=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_low_rank_metrics_evaluate_as_the_dense_ones(n_centers, rank, scale, own, seed):
    rng = np.random.default_rng(seed)
    dim = LOW_RANK_MIN_DIM
    metrics = _low_rank_metrics(rng, n_centers, dim, rank, scale)
    centers = rng.normal(size=(n_centers, dim))
    if own:
        field = SmoothLocalField(centers, metrics, rho=1.0 / dim)
    else:
        field = RBFLocalField(centers, metrics, sigma=float(dim), proximity=np.eye(dim))
    assert field.low_rank and field.capability is None
    assert field._bank.factors.shape == (n_centers, dim, rank)  # O(R D d) storage
    assert _gap(field.metrics, metrics) < 1e-12
    dense = _dense_twin(field)
    x, v, dx, dv = 0.5 * rng.normal(size=(4, 3, dim))
    curves = 0.5 * rng.normal(size=(2, 5, dim))
    for evaluate in (
        lambda f: f.metric_matrix(x),
        lambda f: f.metric_vector_product(v, x),
        lambda f: f.metric_derivative(x[:1]),
        lambda f: f.energy_terms(v, x),
        lambda f: f.energy_hessian(v, x),
        lambda f: f.segment_energy_terms(curves, hessian=True),
        lambda f: f.segment_end_quadratics(curves),
    ):
        assert _gap(evaluate(field), evaluate(dense)) < 1e-12
    # through a solve with M(x) (condition below about 1e3 here): its rounding
    for evaluate in (lambda f: f.geodesic_acceleration(v, x), lambda f: f.acceleration_derivative(v, x, dx, dv)):
        assert _gap(evaluate(field), evaluate(dense)) < 1e-10


def test_the_form_is_chosen_from_the_eigenvalues():
    rng = np.random.default_rng(0)
    dim = LOW_RANK_MIN_DIM
    low = _low_rank_metrics(rng, 3, dim, dim // 4, 0.5)
    assert isinstance(metric_bank(low), LowRankMetrics)
    assert isinstance(metric_bank(low, low_rank=False), DenseMetrics)
    assert isinstance(metric_bank(_low_rank_metrics(rng, 3, dim, dim // 4 + 1, 0.5)), DenseMetrics)  # rank above D / 4
    small = _low_rank_metrics(rng, 3, dim - 1, 2, 0.5)
    assert isinstance(metric_bank(small), DenseMetrics)  # below LOW_RANK_MIN_DIM
    perturbed = low + np.diag(1e-9 * rng.uniform(size=dim))  # a spread of the ridge above LOW_RANK_RTOL: not low rank
    assert isinstance(metric_bank(perturbed), DenseMetrics)
    isotropic = metric_bank(np.array([2.0, 3.0])[:, None, None] * np.eye(dim))  # rank 0 is stored as rank 1
    assert isinstance(isotropic, LowRankMetrics) and np.array_equal(isotropic.dense[1], 3.0 * np.eye(dim))
    # the conditioned projectors of LDA (rank 9, ridge): low rank, exact to rounding
    basis = np.linalg.qr(rng.normal(size=(dim, 9)))[0]
    projector = basis @ basis.T * dim / 9 + 1e-6 * np.eye(dim)
    bank = metric_bank(projector[None])
    assert isinstance(bank, LowRankMetrics) and bank.factors.shape[-1] == 9
    assert np.abs(bank.dense[0] - projector).max() < 1e-12 * dim / 9


def test_nearest_fields_keep_their_metrics_dense():
    rng = np.random.default_rng(1)
    metrics = _low_rank_metrics(rng, 2, LOW_RANK_MIN_DIM, 3, 1.0)
    field = NearestLocalField(rng.normal(size=(2, LOW_RANK_MIN_DIM)), metrics)
    assert not field.low_rank and field.metrics is field._bank.dense


@pytest.mark.parametrize("kind", ["smooth", "rbf"])
def test_a_low_rank_field_gives_the_dense_geodesic_distance(kind):
    rng = np.random.default_rng(2)
    dim = LOW_RANK_MIN_DIM
    metrics = _low_rank_metrics(rng, 4, dim, 4, 1.0) / dim
    centers = 0.5 * rng.normal(size=(4, dim))
    if kind == "smooth":
        field = SmoothLocalField(centers, metrics, rho=1.0)
    else:
        field = RBFLocalField(centers, metrics, sigma=1.0, proximity=np.eye(dim) / dim)
    a, b = centers[0], centers[1]
    ours, theirs = (LearnedMetricManifold(f).metric.dist(a, b) for f in (field, _dense_twin(field)))
    assert abs(ours - theirs) < 1e-10 * theirs


def test_a_low_rank_blend_of_one_point_keeps_the_factors_and_of_several_builds_the_dense_stack_once():
    rng = np.random.default_rng(3)
    metrics = _low_rank_metrics(rng, 5, LOW_RANK_MIN_DIM, 4, 0.3)
    bank = metric_bank(metrics)
    weights = rng.uniform(-0.3, 1.0, size=(3, 5))
    reference = np.einsum("nr,rij->nij", weights, metrics)
    assert _gap(bank.blend(weights[:1]), reference[:1]) < 1e-12 and "_flat" not in vars(bank)  # O(R D d) memory kept
    assert _gap(bank.blend(weights), reference) < 1e-12 and "_flat" in vars(bank)
    assert _gap(bank.blend(weights[:1]), reference[:1]) < 1e-12


def _full_twin(field):
    """The same field evaluated over every center (no sparse view)."""
    twin = copy.copy(field)
    twin.__dict__["_sparse_pays"] = False
    return twin


@settings(max_examples=12, deadline=None)
@given(
    dim=st.sampled_from([3, 5, LOW_RANK_MIN_DIM]),
    own=st.booleans(),
    rho=st.floats(2.0, 50.0),
    seed=st.integers(0, 2**16),
)
def test_sparse_blends_equal_the_full_ones_within_the_dropped_weight(dim, own, rho, seed):
    """Centers far apart on the blend's scale: only the nearby ones are evaluated, and every value is the full blend's to rounding."""
    rng = np.random.default_rng(seed)
    n_centers = 48
    metrics = _low_rank_metrics(rng, n_centers, dim, 2, 0.5) / dim if dim == LOW_RANK_MIN_DIM else _low_rank_metrics(rng, n_centers, dim, dim, 0.2)
    centers = rng.uniform(-30.0, 30.0, size=(n_centers, dim))
    if own:
        field = SmoothLocalField(centers, metrics, rho=rho)
    else:
        field = RBFLocalField(centers, metrics, sigma=2.0 / rho, proximity=np.eye(dim) * rng.uniform(0.5, 2.0))
    field.__dict__["capability"] = None  # the numpy path, where the sparse view is used
    full = _full_twin(field)
    x = centers[:3] + 0.1 * rng.normal(size=(3, dim))
    v, dx, dv = rng.normal(size=(3, 3, dim))
    curves = centers[3:5, None] + np.linspace(0.0, 1.0, 9)[:, None] * (centers[5:7] - centers[3:5])[:, None]
    assert field._sparse(x).n_centers < n_centers / 4
    scale = np.abs(field.metrics).max() * (1.0 + 1.0 / field.sigma) ** 2 * (1.0 + np.abs(v).max()) ** 2
    for evaluate in (
        lambda f: f.metric_matrix(x),
        lambda f: f.metric_vector_product(v, x),
        lambda f: f.metric_derivative(x),
        lambda f: f.metric_second_derivative(x[:1]),
        lambda f: f.energy_terms(v, x),
        lambda f: f.energy_hessian(v, x),
        lambda f: f.derivative_vector_product(v, x),
        lambda f: f.geodesic_acceleration(v, x),
        lambda f: f.acceleration_derivative(v, x, dx, dv),
        lambda f: f.segment_energy_terms(curves, hessian=True),
        lambda f: f.segment_end_quadratics(curves),
    ):
        ours, theirs = evaluate(field), evaluate(full)
        for a, b in zip(*((ours, theirs) if isinstance(ours, tuple) else ((ours,), (theirs,)))):
            np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-13 * scale)


def test_a_sparse_geodesic_distance_equals_the_full_one():
    rng = np.random.default_rng(3)
    centers = rng.uniform(-20.0, 20.0, size=(64, 2))
    metrics = _low_rank_metrics(rng, 64, 2, 2, 0.3)
    field = SmoothLocalField(centers, metrics, rho=2.0)
    field.__dict__["capability"] = None
    full = _full_twin(field)
    a, b = centers[:4] + 0.05, centers[:4] + rng.normal(size=(4, 2))
    assert field._sparse_pays and field._sparse_along(np.stack([a, b], axis=1)[:1]).n_centers < 16
    ours, theirs = (LearnedMetricManifold(f).metric.dist(a, b) for f in (field, full))
    np.testing.assert_allclose(ours, theirs, rtol=1e-10)
    assert not SmoothLocalField(centers, metrics, rho=0.1)._sparse_pays  # a smoother blend: most centers matter everywhere
