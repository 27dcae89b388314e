"""Geodesic speed and accuracy on SmoothLocalField (issue: geometry core).

Field: R = 10 random SPD metrics (condition number <= 100, mean eigenvalue 1)
at centers drawn from N(0, I_D), with ``rho = 8 / D`` so that the blend
really varies between the points (the largest weight is typically 0.3--0.9).
Points x, y are drawn from N(0, I_D). The reference distance is the solve
at 64, 128 and 256 segments (Romberg) with tol 1e-10; the reference Exp
integrates with rtol 1e-12. Exp errors are relative to ``|Exp_x(v) - x|``.
"est. >= error" counts the pairs whose certified estimate of the relative
distance error (``log_solver.last_result_.error_estimate``) bounds the true one.

Times are medians over pairs of the median of 3 runs, after one warm-up solve.
Log uses ``method="auto"`` (:func:`riemlocal.numerics.resolve_method`): for these
RBF fields the compiled Newton up to D = 17 (one pair up to D = 20), numpy L-BFGS
above; the last table times both minimizers on the same batches.

Run: ``python benchmarks/bench_geodesics.py [--quick]`` (one BLAS thread).
"""

import argparse
import os
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

from riemlocal import LearnedMetricManifold, SmoothLocalField  # noqa: E402
from riemlocal.numerics import EnergyLogSolver, integrate_geodesic, resolve_method  # noqa: E402


def random_field(dim, n_centers=10, condition=100.0, seed=0):
    rng = np.random.default_rng(seed)
    metrics = []
    for _ in range(n_centers):
        q, _ = np.linalg.qr(rng.normal(size=(dim, dim)))
        eigenvalues = np.exp(rng.uniform(0.0, np.log(condition), dim))
        metrics.append((q * (eigenvalues / eigenvalues.mean())) @ q.T)
    return SmoothLocalField(rng.normal(size=(n_centers, dim)), np.array(metrics), rho=8.0 / dim), rng


def tight_log_solver(field):
    """The reference Log solver of the benchmarks: 64, 128 and 256 segments, minimized to tol 1e-10."""
    return EnergyLogSolver(field, 64, rtol=1.0, log_rtol=1.0, max_segments=256, tol=1e-10, max_iter=20000)


def median_time(fn, repeats):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    return float(np.median(times)), out


def ours_vs_reference(dim, n_pairs):
    field, rng = random_field(dim)
    space = LearnedMetricManifold(field)
    reference = tight_log_solver(field)
    space.metric.exp(space.metric.log(field.centers[1], field.centers[0]), field.centers[0])  # warm-up
    log_times, exp_times, errors, exp_errors, estimates = [], [], [], [], []
    for _ in range(n_pairs):
        x, y = rng.normal(size=(2, dim))
        t_log, v = median_time(lambda: space.metric.log(y, x), 3)
        t_exp, end = median_time(lambda: space.metric.exp(v, x), 3)
        d_ref = reference.dist(x, y)
        end_ref = integrate_geodesic(field, v[None], x[None], (1.0,), rtol=1e-12, atol=1e-14)[0, 0]
        log_times.append(t_log)
        exp_times.append(t_exp)
        errors.append(abs(space.metric.dist(x, y) - d_ref) / d_ref)
        estimates.append(float(space.metric.log_solver.last_result_.error_estimate))
        exp_errors.append(np.linalg.norm(end - end_ref) / np.linalg.norm(end_ref - x))
    bounded = int(np.sum(np.array(estimates) >= np.array(errors)))
    return np.median(log_times), np.median(exp_times), np.max(errors), np.max(estimates), bounded, np.max(exp_errors)


def geomstats_log_ratio(dim, n_pairs):
    """Per-Log time of geomstats' LogODESolver (its best numpy configuration) and ours.

    Both get the same batch of ``n_pairs`` pairs; ours solves it in one call
    (vectorized), geomstats through its own batch handling; both times are
    medians of 3 runs.
    """
    from geomstats.geometry.euclidean import Euclidean
    from geomstats.geometry.riemannian_metric import RiemannianMetric
    from geomstats.numerics.geodesic import ExpODESolver, LogODESolver

    field, rng = random_field(dim, seed=1)

    class FieldMetric(RiemannianMetric):
        def metric_matrix(self, base_point=None):
            return field.metric_matrix(base_point)

        def inner_product_derivative_matrix(self, base_point=None):
            return field.metric_derivative(base_point)

    gs_space = Euclidean(dim, equip=False)
    gs_space.equip_with_metric(FieldMetric)
    gs_space.metric.exp_solver = ExpODESolver(gs_space)
    gs_space.metric.log_solver = LogODESolver(gs_space, use_jac=False)
    space = LearnedMetricManifold(field, chunk_size=n_pairs)
    x, y = 0.5 * rng.normal(size=(2, n_pairs, dim))
    t_single, _ = median_time(lambda: space.metric.log(y[0], x[0]), 3)
    t_ours, v_ours = median_time(lambda: space.metric.log(y, x), 3)
    t_theirs, v_theirs = median_time(lambda: gs_space.metric.log(y, x), 3)
    gap = np.max(np.linalg.norm(v_ours - v_theirs, axis=-1) / np.linalg.norm(v_ours, axis=-1))
    return t_theirs / n_pairs, t_single, t_ours / n_pairs, gap


def newton_vs_lbfgs(dim, n_pairs):
    """Per-Log time (ms / pair, batch ``n_pairs``) of both energy minimizers; sets ``method="auto"``'s switch."""
    field, rng = random_field(dim, seed=1)
    x, y = 0.5 * rng.normal(size=(2, n_pairs, dim))
    times = {}
    for method in ("newton", "lbfgs"):
        space = LearnedMetricManifold(field, chunk_size=n_pairs, method=method)
        times[method] = median_time(lambda: space.metric.log(y, x), 3)[0] / n_pairs
    return times


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer pairs")
    args = parser.parse_args()
    n_pairs = 3 if args.quick else 10
    print("| D | median Log (ms) | median Exp (ms) | max rel. dist error | max est. | est. >= error "
          "| max rel. Exp error | target Log / Exp (ms) |")
    print("|---|---|---|---|---|---|---|---|")
    targets = {100: "50 / 30", 150: "100 / -", 200: "300 / -"}
    for dim in (100, 150, 200):
        t_log, t_exp, err, estimate, bounded, exp_err = ours_vs_reference(dim, n_pairs)
        print(f"| {dim} | {1e3 * t_log:.1f} | {1e3 * t_exp:.1f} | {err:.1e} | {estimate:.1e} | {bounded}/{n_pairs} "
              f"| {exp_err:.1e} | {targets[dim]} |")
    print()
    n_batch = 8 if args.quick else 32
    print(f"| D | geomstats Log (ms / pair, batch {n_batch}) | ours, one pair (ms) | ours (ms / pair, batch {n_batch}) "
          "| speed-up (one pair / batch) | max rel. gap of Log |")
    print("|---|---|---|---|---|---|")
    for dim in (2, 10):
        theirs, single, ours, gap = geomstats_log_ratio(dim, n_batch)
        print(f"| {dim} | {1e3 * theirs:.1f} | {1e3 * single:.1f} | {1e3 * ours:.2f} "
              f"| {theirs / single:.0f}x / {theirs / ours:.0f}x | {gap:.1e} |")
    print()
    print(f"| D | Newton (ms / pair, batch {n_batch}) | L-BFGS (ms / pair) | method='auto' |")
    print("|---|---|---|---|")
    for dim in (2, 5, 8, 10, 20):
        times = newton_vs_lbfgs(dim, n_batch)
        auto = resolve_method("auto", dim, n_problems=n_batch, compiled=True)
        print(f"| {dim} | {1e3 * times['newton']:.2f} | {1e3 * times['lbfgs']:.2f} | {auto} |")


if __name__ == "__main__":
    main()
