"""Every estimator of geomstats.learning that runs on a generic Riemannian space, on a curved learned metric.

Each either respects the learned metric (a property that a flat computation
would fail) or refuses the space with a clear error. Run with ``-s`` to see
what each returned.
"""

import warnings

import geomstats.backend as gs
import numpy as np
import pytest
from geomstats.learning.agglomerative_hierarchical_clustering import AgglomerativeHierarchicalClustering
from geomstats.learning.expectation_maximization import RiemannianEM
from geomstats.learning.exponential_barycenter import ExponentialBarycenter
from geomstats.learning.frechet_mean import FrechetMean
from geomstats.learning.geodesic_regression import GeodesicRegression
from geomstats.learning.geometric_median import GeometricMedian
from geomstats.learning.incremental_frechet_mean import IncrementalFrechetMean
from geomstats.learning.kernel_density_estimation_classifier import KernelDensityEstimationClassifier
from geomstats.learning.kmeans import RiemannianKMeans
from geomstats.learning.kmedoids import RiemannianKMedoids
from geomstats.learning.knn import KNearestNeighborsClassifier
from geomstats.learning.mdm import RiemannianMinimumDistanceToMean
from geomstats.learning.online_kmeans import OnlineKMeans
from geomstats.learning.pca import TangentPCA
from geomstats.learning.preprocessing import ToTangentSpace
from geomstats.learning.riemannian_mean_shift import RiemannianMeanShift
from geomstats.learning.wrapped_gaussian_process import WrappedGaussianProcess
from numpy.testing import assert_allclose, assert_array_equal

from riemlocal import LearnedMetricManifold, SmoothLocalField
from riemlocal.distances import pairwise_distances

# Two anisotropic metrics 3 apart: vertical steps cost 3x near the origin, horizontal ones 3x near (3, 0).
FIELD = SmoothLocalField([[0.0, 0.0], [3.0, 0.0]], [np.diag([1.0, 9.0]), np.diag([9.0, 1.0])], rho=1.0)
# q's Euclidean nearest neighbour is A (0.5 away), its learned nearest is B (A costs about 1.5, B about 1.2)
Q, A, B = np.array([0.0, 0.0]), np.array([0.0, 0.5]), np.array([1.0, 0.0])


@pytest.fixture(scope="module")
def space():
    return LearnedMetricManifold(FIELD)


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    X = np.vstack([rng.normal([0.0, 0.0], 0.4, (5, 2)), rng.normal([3.0, 0.0], 0.4, (5, 2))])
    return X, np.repeat([0, 1], 5)


def _is_frechet_mean(space, X, point, atol=1e-3):
    """First-order condition of a Fréchet mean: the Log maps at ``point`` sum to zero."""
    return np.linalg.norm(space.metric.log(X, point).mean(axis=0)) < atol


def _report(name, value):
    print(f"\n{name}: {np.round(np.asarray(value, dtype=float), 3).tolist()}")


def test_the_learned_metric_separates_q_from_a_and_b(space):
    d_a, d_b = space.metric.dist(Q, A), space.metric.dist(Q, B)
    assert np.linalg.norm(A - Q) < np.linalg.norm(B - Q) and d_b < d_a


def test_frechet_mean_and_incremental_mean_respect_the_metric(space, data):
    X, _ = data
    estimate = FrechetMean(space).fit(X).estimate_
    incremental = IncrementalFrechetMean(space).fit(X).estimate_
    _report("FrechetMean", estimate)
    _report("IncrementalFrechetMean", incremental)
    assert _is_frechet_mean(space, X, estimate)
    assert np.linalg.norm(estimate - X.mean(axis=0)) > 0.3  # the flat mean is far
    assert np.linalg.norm(incremental - estimate) < 0.05


def test_exponential_barycenter_refuses_the_space(space, data):
    with pytest.raises(TypeError, match="no Lie group operations.*FrechetMean"):
        ExponentialBarycenter(space).fit(data[0])
    print("\nExponentialBarycenter: TypeError (no Lie group operations; use FrechetMean)")


def test_geometric_median_lowers_the_learned_objective(space, data):
    X, _ = data
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        median = GeometricMedian(space, max_iter=30).fit(X).estimate_
    _report("GeometricMedian", median)

    def objective(point):
        return space.metric.dist(X, point).sum()

    euclidean_median = np.median(X, axis=0)  # the flat answers are worse in the learned metric
    assert objective(median) < min(objective(X.mean(axis=0)), objective(euclidean_median))


def test_kmeans_and_mdm_centers_are_cluster_frechet_means(space, data):
    X, y = data
    gs.random.seed(0)  # geomstats draws its initial centers from numpy's global generator
    kmeans = RiemannianKMeans(space, 2, init="kmeans++").fit(X)
    mdm = RiemannianMinimumDistanceToMean(space).fit(X, y)
    _report("RiemannianKMeans", kmeans.cluster_centers_)
    _report("RiemannianMinimumDistanceToMean", mdm.mean_estimates_)
    for label, center in enumerate(kmeans.cluster_centers_):  # geomstats' mean stops at a gradient norm of 1e-4 scale
        assert _is_frechet_mean(space, X[kmeans.labels_ == label], center, atol=1e-2)
    for label, center in enumerate(mdm.mean_estimates_):
        assert _is_frechet_mean(space, X[y == label], center, atol=1e-2)


class _KMedoidsFromTwoPoints(RiemannianKMedoids):
    """geomstats draws the initial medoids with replacement from numpy's global generator, where a draw of the
    same point twice leaves a cluster empty. The start is fixed instead: points 0 and 5, one of each cluster
    (with ``gs.random.seed(3)`` before ``fit``, one suite run ended with a single cluster; not reproduced)."""

    def _initialize_medoids(self, distances):
        return np.array([0, 5])


def test_kmedoids_medoids_minimize_learned_distances(space, data):
    X, _ = data
    distances = space.metric.dist_pairwise(X)  # what geomstats clusters: our distances, one pair per call
    assert_allclose(distances, pairwise_distances(space, X, rule="geodesic"), rtol=1e-5, atol=1e-12)
    kmedoids = _KMedoidsFromTwoPoints(space, 2).fit(X)
    _report("RiemannianKMedoids", kmedoids.cluster_centers_)
    assert_array_equal(np.unique(kmedoids.labels_), [0, 1])
    for label, medoid in enumerate(kmedoids.cluster_centers_):
        members = X[kmedoids.labels_ == label]
        costs = [space.metric.dist(members, candidate).sum() for candidate in members]
        assert_allclose(medoid, members[int(np.argmin(costs))])


@pytest.mark.parametrize(
    "make",
    [
        lambda space: KNearestNeighborsClassifier(space, n_neighbors=1),
        lambda space: KernelDensityEstimationClassifier(space),
    ],
    ids=["KNearestNeighborsClassifier", "KernelDensityEstimationClassifier"],
)
def test_classifiers_use_learned_distances(space, make):
    classifier = make(space).fit(np.array([A, B]), np.array([0, 1]))
    predicted = classifier.predict(Q[None])
    _report(type(classifier).__name__, predicted)
    assert_array_equal(predicted, [1])  # Euclidean: 0


def test_agglomerative_clustering_uses_learned_distances(space):
    labels = AgglomerativeHierarchicalClustering(space, n_clusters=2, linkage="single").fit(np.array([Q, A, B])).labels_
    _report("AgglomerativeHierarchicalClustering", labels)
    assert labels[0] == labels[2] != labels[1]  # Euclidean: q with a


def test_mean_shift_with_a_wide_flat_kernel_finds_the_frechet_mean(space, data):
    X, _ = data
    shift = RiemannianMeanShift(space, bandwidth=100.0, tol=1e-8, max_iter=50).fit(X)
    _report("RiemannianMeanShift", shift.cluster_centers_)
    assert _is_frechet_mean(space, X, shift.cluster_centers_[0], atol=1e-2)


def test_online_kmeans_labels_by_learned_distance(space, data):
    X, _ = data
    gs.random.seed(0)
    online = OnlineKMeans(space, 2, n_repetitions=2, max_iter=60).fit(X)
    _report("OnlineKMeans", online.cluster_centers_)
    nearest = np.argmin([space.metric.dist(X, center) for center in online.cluster_centers_], axis=0)
    assert_array_equal(online.predict(X), nearest)


def test_tangent_space_estimators_use_learned_logs(space, data):
    X, _ = data
    tangent = ToTangentSpace(space).fit(X)
    mean = FrechetMean(space).fit(X).estimate_
    _report("ToTangentSpace (first two rows)", tangent.transform(X)[:2])
    assert_allclose(tangent.transform(X), space.metric.log(X, mean), atol=1e-4)
    pca = TangentPCA(space, n_components=2).fit(X)
    _report("TangentPCA explained variance", pca.explained_variance_)
    # total variance of the learned Logs (in coordinates; geomstats' TangentPCA does not weigh them by M(mean))
    logs = space.metric.log(X, pca.base_point_)
    assert_allclose(pca.explained_variance_.sum(), np.sum(logs**2) / (len(X) - 1), rtol=1e-6)
    assert not np.isclose(pca.explained_variance_.sum(), np.sum((X - X.mean(axis=0)) ** 2) / (len(X) - 1), rtol=0.05)


def test_geodesic_regression_recovers_a_learned_geodesic(space):
    t = np.linspace(-1.0, 1.0, 5)
    base, velocity = np.array([1.5, 0.0]), np.array([1.0, 0.5])
    X = space.metric.exp(t[:, None] * velocity, base)
    regression = GeodesicRegression(space, center_X=False, initialization="data")  # "riemannian" needs autodiff
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        regression.fit(t, X)
    _report("GeodesicRegression intercept, coef", [regression.intercept_, regression.coef_])
    assert_allclose(regression.predict(t), X, atol=0.05)


def test_wrapped_gaussian_process_interpolates_through_learned_logs(space, data):
    X, _ = data
    t = np.linspace(0.0, 1.0, len(X))[:, None]
    base = np.array([1.5, 0.0])
    process = WrappedGaussianProcess(space, prior=lambda inputs: np.broadcast_to(base, (len(inputs), 2)))
    process.fit(t, X)
    _report("WrappedGaussianProcess at the training inputs (first two)", process.predict(t)[:2])
    assert_allclose(process.predict(t), X, atol=1e-3)


def test_expectation_maximization_refuses_the_space(space, data):
    # geomstats' EM needs a closed-form normalization factor of the Riemannian Gaussian,
    # which only its symmetric spaces define
    with pytest.raises(NotImplementedError, match="RiemannianEM cannot run on it"):
        RiemannianEM(space, n_gaussians=2).fit(data[0])
    print("\nRiemannianEM: NotImplementedError (no closed-form normalization factor for a learned metric)")
