"""riemlocal against geomstats 2.8.0, side by side in one run (issue 15).

geomstats runs in its best numpy configuration (``--geomstats-config best``):
``geodesic_equation`` overridden with the field's closed-form acceleration
``field.geodesic_acceleration`` (riemlocal's own, compiled where that is faster;
O(R D^2 + D^3) per state, equal to geomstats' Christoffel-based equation to
rounding), ``inner_product_derivative_matrix`` with the analytic derivative,
``LogODESolver(use_jac=False)`` for Log (scipy's ``solve_bvp``, which calls the
overridden equation) and ``ExpODESolver`` with a vectorized RK4
``GSIVPIntegrator(n_steps=50, step_type="rk4")`` for Exp. ``--geomstats-config
derivative`` overrides only ``inner_product_derivative_matrix``, from which
geomstats builds the Christoffel symbols by dense contractions, O(R D^3 + D^4).
riemlocal runs with its defaults (Exp at ``rtol=EXP_RTOL`` to match RK4's accuracy).

Fields: Log on ``bench_geodesics.random_field`` (R = 10 random SPD metrics,
points 0.5 N(0, I)); Exp and statistics at D = 2 on the two-metric field
``SmoothLocalField([[2, 2], [4, 4]], [2I, I])`` with points uniform in [0, 6]^2.

Errors are against tight references: Log vectors against
``EnergyLogSolver`` at 64-256 segments with tol 1e-10, in the norm M(x)
relative to the distance; Exp end points against DOP853 at rtol 1e-12,
relative to |Exp_x(v) - x|; Fréchet means and the PCA base points in M(mean)
against riemlocal's mean at rtol 1e-9; regressions by their loss
sum_i d^2(Exp_p(t_i v), y_i) (tight distances) above the better of the two.
Times are medians of repeated runs (one warm-up call first), except the
distance matrix (one run, 5 of its pairs checked); the load is printed before and after the table.

Run: ``python benchmarks/bench_vs_geomstats.py [--quick] [--geomstats-config {best,derivative}]``
(one BLAS thread).
"""

import argparse
import os
import time
import warnings

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402
from bench_geodesics import median_time, random_field, tight_log_solver  # noqa: E402
from geomstats.geometry.euclidean import Euclidean  # noqa: E402
from geomstats.geometry.riemannian_metric import RiemannianMetric  # noqa: E402
from geomstats.learning.frechet_mean import FrechetMean as GeomstatsFrechetMean  # noqa: E402
from geomstats.learning.geodesic_regression import GeodesicRegression as GeomstatsRegression  # noqa: E402
from geomstats.learning.pca import TangentPCA  # noqa: E402
from geomstats.numerics.geodesic import ExpODESolver, LogODESolver  # noqa: E402
from geomstats.numerics.ivp import GSIVPIntegrator  # noqa: E402

from riemlocal import LearnedMetricManifold, SmoothLocalField  # noqa: E402
from riemlocal.distances import pairwise_distances  # noqa: E402
from riemlocal.learning import FrechetMean, GeodesicRegression, PrincipalGeodesicAnalysis  # noqa: E402
from riemlocal.numerics import integrate_geodesic  # noqa: E402

EXP_RTOL = 1e-6  # riemlocal's rtol in the Exp row: its integrator at 1e-7 per step (geomstats' RK4 with 50 steps: about 2e-7)
TWO_METRICS = SmoothLocalField([[2.0, 2.0], [4.0, 4.0]], [2.0 * np.eye(2), np.eye(2)])


def geomstats_space(field, config="best", n_steps=50):
    """geomstats' Euclidean space equipped with the field's metric.

    ``config="derivative"`` overrides ``inner_product_derivative_matrix`` only (geomstats builds the
    Christoffel symbols from it, O(R D^3 + D^4)); ``"best"`` also overrides ``geodesic_equation`` with the
    field's closed-form acceleration, O(R D^2 + D^3).
    """

    class FieldMetric(RiemannianMetric):
        def metric_matrix(self, base_point=None):
            return field.metric_matrix(base_point)

        def inner_product_derivative_matrix(self, base_point=None):
            return field.metric_derivative(base_point)

    class ClosedFormMetric(FieldMetric):
        def geodesic_equation(self, state):
            position, velocity = state[..., 0, :], state[..., 1, :]
            return np.stack([velocity, field.geodesic_acceleration(velocity, position)], axis=-2)

    space = Euclidean(field.dim, equip=False)
    space.equip_with_metric({"best": ClosedFormMetric, "derivative": FieldMetric}[config])
    space.metric.exp_solver = ExpODESolver(space, integrator=GSIVPIntegrator(n_steps=n_steps, step_type="rk4"))
    space.metric.log_solver = LogODESolver(space, use_jac=False)
    return space


def equation_gap(field, batch_shape=(3, 4)):
    """Largest gap of the ``"best"`` geodesic equation to geomstats' own (Christoffel symbols) on random states,
    relative to the largest component."""
    rng = np.random.default_rng(0)
    state = rng.normal(size=batch_shape + (2, field.dim))
    state[..., 0, :] += field.centers.mean(axis=0)
    best = geomstats_space(field).metric.geodesic_equation(state)
    default = geomstats_space(field, "derivative").metric.geodesic_equation(state)
    return float(np.max(np.abs(best - default)) / np.max(np.abs(default)))


def log_errors(field, velocities, y, x):
    """Max error of Log vectors in M(x), relative to the distance, against the tight solver."""
    reference = tight_log_solver(field).solve(y, x)
    gap = np.atleast_2d(velocities - reference.initial_velocity)
    metric = field.metric_matrix(np.atleast_2d(x))
    return float(np.max(np.sqrt(np.einsum("pi,pij,pj->p", gap, metric, gap)) / np.atleast_1d(reference.length)))


def timed(fn, repeats):
    """Median time after one warm-up call, and the last output."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fn()
        return median_time(fn, repeats)


def row(name, ours, theirs, target=""):
    """Markdown row from ``(seconds, error)`` of both sides (``theirs`` may be None)."""
    (t_ours, e_ours) = ours
    if theirs is None:
        print(f"| {name} | {1e3 * t_ours:.2f} | {e_ours:.1e} | - | - | - | {target} |")
        return
    t_theirs, e_theirs = theirs
    print(
        f"| {name} | {1e3 * t_ours:.2f} | {e_ours:.1e} | {1e3 * t_theirs:.1f} | {e_theirs:.1e} "
        f"| **{t_theirs / t_ours:.0f}x** | {target} |"
    )


def log_rows(dim, n_pairs, repeats, target, config="best", n_centers=10):
    """Log rows; geomstats in ``config`` of :func:`geomstats_space` (None: riemlocal only)."""
    field, rng = random_field(dim, n_centers=n_centers, seed=1)
    x, y = 0.5 * rng.normal(size=(2, n_pairs, dim))
    if n_pairs == 1:
        x, y = x[0], y[0]
    space = LearnedMetricManifold(field)
    t_ours, v_ours = timed(lambda: space.metric.log(y, x), repeats)
    ours = (t_ours, log_errors(field, v_ours, y, x))
    theirs = None
    if config is not None:
        gs_space = geomstats_space(field, config)
        t_theirs, v_theirs = timed(lambda: gs_space.metric.log(y, x), repeats)
        theirs = (t_theirs, log_errors(field, v_theirs, y, x))
    what = "one pair" if n_pairs == 1 else f"batch of {n_pairs}"
    row(f"Log, {what}, D = {dim}" + ("" if n_centers == 10 else f", R = {n_centers}"), ours, theirs, target)


def exp_row(repeats, config):
    rng = np.random.default_rng(2)
    x = rng.uniform(0.0, 6.0, size=(49, 2))
    v = rng.uniform(-3.0, 3.0, size=(49, 2))
    reference = integrate_geodesic(TWO_METRICS, v, x, (1.0,), rtol=1e-12, atol=1e-14)[:, 0]

    def error(end):
        return float(np.max(np.linalg.norm(end - reference, axis=1) / np.linalg.norm(reference - x, axis=1)))

    space = LearnedMetricManifold(TWO_METRICS, rtol=EXP_RTOL)
    gs_space = geomstats_space(TWO_METRICS, config)
    t_ours, end_ours = timed(lambda: space.metric.exp(v, x), repeats)
    t_theirs, end_theirs = timed(lambda: gs_space.metric.exp(v, x), repeats)
    row(f"Exp, batch of 49, D = 2 (ours rtol {EXP_RTOL:g})", (t_ours, error(end_ours)), (t_theirs, error(end_theirs)), ">= 5x")


def statistics_rows(repeats, regression_repeats, config):
    rng = np.random.default_rng(3)
    X = rng.uniform(0.0, 6.0, size=(50, 2))
    space, gs_space = LearnedMetricManifold(TWO_METRICS), geomstats_space(TWO_METRICS, config)
    reference = FrechetMean(space, rtol=1e-9, tol=1e-9).fit(X).estimate_
    metric = TWO_METRICS.metric_matrix(reference)

    def mean_error(point):
        gap = point - reference
        return float(np.sqrt(gap @ metric @ gap) / np.sqrt(np.trace(metric)))

    t, mean = timed(lambda: FrechetMean(space).fit(X).estimate_, repeats)
    t_gs, mean_gs = timed(lambda: GeomstatsFrechetMean(gs_space).fit(X).estimate_, repeats)
    row("Fréchet mean, 50 points, D = 2", (t, mean_error(mean)), (t_gs, mean_error(mean_gs)), ">= 100x")
    t, pga = timed(lambda: PrincipalGeodesicAnalysis(space, n_components=2).fit(X), repeats)
    t_gs, pca = timed(lambda: TangentPCA(gs_space, n_components=2).fit(X), repeats)
    row("tangent PCA, 50 points, D = 2", (t, mean_error(pga.mean_)), (t_gs, mean_error(pca.base_point_)), ">= 100x")

    t_reg = np.linspace(-1.0, 1.0, 30)
    truth = space.metric.exp(t_reg[:, None] * np.array([1.5, 0.8]), np.array([3.0, 3.0]))
    Y = truth + 0.1 * rng.normal(size=truth.shape)
    tight = tight_log_solver(TWO_METRICS)

    def loss(intercept, coef):
        fitted = space.metric.exp(t_reg[:, None] * coef, intercept)
        return float(np.sum(tight.dist(fitted, Y) ** 2))

    t, ours = timed(lambda: GeodesicRegression(space).fit(t_reg, Y), repeats)
    t_gs, theirs = timed(
        lambda: GeomstatsRegression(gs_space, center_X=False, initialization="data").fit(t_reg, Y), regression_repeats
    )
    losses = np.array([loss(ours.intercept_, ours.coef_.ravel()), loss(theirs.intercept_, theirs.coef_)])
    excess = losses / losses.min() - 1.0
    row("geodesic regression, 30 points, D = 2 (loss excess)", (t, excess[0]), (t_gs, excess[1]), ">= 100x")


def distance_matrix_row(n_points, dim, n_jobs):
    """Time of ``pairwise_distances(rule="geodesic")``, extrapolated to 500 points by the number of pairs."""
    field, rng = random_field(dim, seed=1)
    X = 0.5 * rng.normal(size=(n_points, dim))
    pairwise_distances(field, X[:4], rule="geodesic", n_jobs=n_jobs)  # starts the workers
    start = time.perf_counter()
    matrix = pairwise_distances(field, X, rule="geodesic", n_jobs=n_jobs)
    seconds = time.perf_counter() - start
    i, j = np.triu_indices(n_points, 1)
    check = rng.choice(len(i), size=5, replace=False)
    reference = tight_log_solver(field).dist(X[i[check]], X[j[check]])
    error = float(np.max(np.abs(matrix[i[check], j[check]] - reference) / reference))
    per_pair = seconds / (n_points * (n_points - 1))
    print(
        f"| geodesic distance matrix, {n_points} points, D = {dim}, n_jobs={n_jobs} | {1e3 * seconds:.0f} "
        f"| {error:.1e} | - | - | - | 500 points: {per_pair * 500 * 499:.0f} s (<= 30 s) |"
    )


def load_average():
    return ", ".join(f"{load:.2f}" for load in os.getloadavg())


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats, no D = 500")
    parser.add_argument("--log-only", action="store_true", help="only riemlocal's Log rows at D = 2, 10, 20 (before/after runs)")
    parser.add_argument("--matrix-points", type=int, default=None, help="points of the distance matrix (default 100; 40 with --quick)")
    parser.add_argument(
        "--geomstats-config", choices=("best", "derivative"), default="best", help="what geomstats overrides (see above)"
    )
    args = parser.parse_args()
    repeats = 3 if args.quick else 7
    config = None if args.log_only else args.geomstats_config
    print(f"load average: {load_average()}; geomstats config: {config}\n")
    if config == "best":
        fields = [random_field(dim, seed=1)[0] for dim in (2, 10, 20)] + [TWO_METRICS]
        gaps = [equation_gap(field) for field in fields]
        print(f"closed-form geodesic_equation vs geomstats' (D = 2, 10, 20, two metrics): {', '.join(f'{g:.1e}' for g in gaps)}")
        assert max(gaps) < 1e-10, "the closed-form geodesic_equation differs from geomstats' own"
    print("| operation | riemlocal (ms) | error | geomstats (ms) | error | speed-up | target |")
    print("|---|---|---|---|---|---|---|")
    for dim in (2, 10, 20):
        log_rows(dim, 1, repeats, ">= 20x", config)
    for dim, n_pairs in ((2, 49), (10, 16), (20, 16)):
        log_rows(dim, n_pairs, repeats if dim == 2 or args.log_only else 1, ">= 50x", config)
    if args.log_only:
        return
    exp_row(repeats, config)
    statistics_rows(repeats, 1, config)
    distance_matrix_row(args.matrix_points or (40 if args.quick else 100), 10, 2)
    targets = {100: "<= 20 ms", 500: "-", 1000: "<= 500 ms"}
    for dim in (100, 1000) if args.quick else (100, 500, 1000):
        log_rows(dim, 1, repeats, targets[dim], config=None)
    print(f"\nload average at the end: {load_average()}")


if __name__ == "__main__":
    main()
