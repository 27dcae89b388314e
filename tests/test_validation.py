"""Validation helpers: rank and definiteness by eigenvalues (never by whether LAPACK raises), broadcasting."""

import re

import numpy as np
import pytest

from riemlocal import LearnedMetricManifold
from riemlocal.fields import ConstantField, GLMLField
from riemlocal.learners import BoostMetric, CCMLMetric, LDAMetric, LMNNMetric
from riemlocal.learning import FrechetMean, GeodesicRegression, PrincipalGeodesicAnalysis
from riemlocal.neighbors import LocalMetricKNN
from riemlocal.placement import LocalMetrics
from riemlocal.utils.validation import (
    SPD_RTOL,
    broadcast_flat,
    check_broadcast,
    check_callable,
    check_fraction,
    check_int,
    check_params,
    check_spd,
    is_positive_definite,
    optional,
    options,
)


def _rank_deficient(rng, dim, rank, scale=1.0):
    factor = rng.standard_normal((dim, rank))
    return scale * factor @ factor.T


@pytest.mark.parametrize("scale", [1e-200, 1e-8, 1.0, 1e8, 1e200])
def test_rank_deficient_matrices_are_not_definite_at_any_scale(scale):
    rng = np.random.default_rng(0)
    for dim in (2, 3, 10, 50):
        for _ in range(20):
            matrix = _rank_deficient(rng, dim, dim - 1, scale)
            # a rounding residue on the null space, of either sign, as different BLAS kernels leave it
            null = np.linalg.svd(matrix)[0][:, -1]
            for residue in (-1e-17, 0.0, 1e-17, 1e-13):
                perturbed = matrix + residue * np.abs(matrix).max() * np.outer(null, null)
                assert not is_positive_definite(perturbed)
                with pytest.raises(ValueError, match="metric must be positive definite; eigenvalues range"):
                    check_spd(perturbed)


def test_well_conditioned_matrices_are_definite():
    rng = np.random.default_rng(1)
    matrices = np.stack([_rank_deficient(rng, 5, 5) + 1e-3 * np.eye(5) for _ in range(10)])
    assert is_positive_definite(matrices).all()
    assert is_positive_definite(np.diag([1.0, 10 * SPD_RTOL]))
    assert not is_positive_definite(np.diag([1.0, 0.5 * SPD_RTOL]))
    assert not is_positive_definite(np.zeros((3, 3)))
    ConstantField(np.diag([1.0, 1e-6]))


def test_glml_singular_class_covariance_is_rejected_whatever_cholesky_does():
    # 3 points in 3-D: a class covariance of rank 2 (the case where OpenBLAS 0.3.30 on an AMD EPYC
    # lets Cholesky succeed with a last pivot of 8.8e-8)
    rng = np.random.default_rng(2)
    for _ in range(20):
        X = rng.standard_normal((40, 3))
        y = np.r_[np.zeros(3), np.ones(37)]
        with pytest.raises(ValueError, match="reg_covar=0.0 leaves a singular class covariance"):
            GLMLField(X, y, reg_covar=0.0)
        GLMLField(X, y, reg_covar=1e-3)


def test_lda_singular_within_scatter_is_rejected():
    X = np.c_[np.arange(6.0), np.zeros(6)]  # no within-class spread on the second axis
    y = np.r_[np.zeros(3), np.ones(3)]
    with pytest.raises(ValueError, match="within-class scatter is singular with reg=0"):
        LDAMetric(reg=0.0).fit(X, y)


def test_broadcast_errors_name_every_argument_with_its_shape():
    shape, arrays = check_broadcast(3, (np.zeros((4, 1, 3)), "a"), (np.zeros((2, 3)), "b"))
    assert shape == (4, 2, 3) and [a.shape for a in arrays] == [(4, 1, 3), (2, 3)]
    batch, flat = broadcast_flat(3, (np.zeros((4, 1, 3)), "a"), (np.ones(3), "b"))
    assert batch == (4, 1) and all(a.shape == (4, 3) for a in flat) and np.all(flat[1] == 1.0)
    with pytest.raises(ValueError, match=re.escape("a of shape (4, 3) and b of shape (2, 3) do not broadcast together")):
        check_broadcast(3, (np.zeros((4, 3)), "a"), (np.zeros((2, 3)), "b"))
    # the connection's maps give the same message (they used to raise numpy's own)
    metric = LearnedMetricManifold(ConstantField(np.eye(3))).metric
    with pytest.raises(ValueError, match=re.escape("tangent_vec of shape (4, 3) and base_point of shape (2, 3)")):
        metric.parallel_transport(np.zeros((4, 3)), np.zeros((2, 3)), direction=np.zeros((2, 3)))


class Settings:
    def __init__(self, **params):
        self.__dict__.update(params)


CHECKS = {"kind": options("a", "b"), "size": optional(check_int, "auto", None), "share": check_fraction, "hook": check_callable}


def test_parameter_tables_check_every_entry_with_the_helpers_messages():
    good = Settings(kind="b", size="auto", share=1, hook=len)
    assert check_params(good, CHECKS) == {"kind": "b", "size": "auto", "share": 1.0, "hook": len}
    assert check_params(Settings(kind="a", size=None, share=0.5, hook=len), CHECKS)["size"] is None
    bad = [
        (dict(kind="c"), ValueError, "kind must be one of ['a', 'b'], got 'c'"),
        (dict(size="many"), TypeError, "size must be an int, got 'many'"),
        (dict(size=0), ValueError, "size must be an int >= 1, got 0"),
        (dict(size=np.arange(2)), TypeError, "size must be an int"),
        (dict(share=1.5), ValueError, "share must be in (0, 1], got 1.5"),
        (dict(share=0), ValueError, "share must be > 0, got 0.0"),
        (dict(hook="len"), TypeError, "hook must be callable, got 'len'"),
    ]
    for change, error, message in bad:
        with pytest.raises(error, match=re.escape(message)):
            check_params(Settings(**{**good.__dict__, **change}), CHECKS)
    with pytest.raises(ValueError, match=re.escape("share must be in [0, 1], got 2.0")):
        check_fraction(2, "share", strict=False)


_SPACE = LearnedMetricManifold(ConstantField(np.eye(2)))


@pytest.mark.parametrize(
    "estimator",
    [
        BoostMetric(),
        CCMLMetric(),
        LDAMetric(),
        LMNNMetric(),
        LocalMetricKNN(),
        LocalMetrics(),
        FrechetMean(_SPACE),
        PrincipalGeodesicAnalysis(_SPACE),
        GeodesicRegression(_SPACE),
    ],
)
def test_every_parameter_table_names_parameters_of_its_estimator(estimator):
    table = type(estimator)._parameter_checks
    assert table and set(table) <= set(estimator.get_params(deep=False))
    check_params(estimator, table)  # the defaults pass


def test_the_classifier_checks_its_log_solver_factory():
    X, y = np.random.default_rng(0).normal(size=(8, 2)), np.repeat([0, 1], 4)
    with pytest.raises(TypeError, match="log_solver must be callable, got 'energy'"):
        LocalMetricKNN(log_solver="energy").fit(X, y)
