"""Geodesic distances on hard fields against independent references (issue 20, item 6).

Fields: ``SmoothLocalField`` with R = 5--20 centers uniform in [-2, 2]^D and
random SPD metrics (eigenvalues log-uniform in [1, condition], random
rotations); D = 2 at condition 10 / 100 / 1000 and rho 0.5 / 1 / 2, D = 5 and
10 at condition 100 and rho 1 / 2. Pairs of points are uniform in [-2, 2]^D.
The metrics are not normalized and the centers are sparse at D = 5 / 10, so
the blends there are nearly piecewise constant: harder than bench_geodesics'.

References (``_reference_geodesics.py``, independent of riemlocal's solver):
at D = 2 the shortest route on a 201 x 201, 16-neighbour lattice (Dijkstra), up
to 7 other lattice routes through waypoints (every 20th node per axis; within 30%
of the shortest, waypoints more than 0.3 apart) and the straight line, each refined
at 64 nodes, the 3 best at 512; at D = 5 / 10 the straight line, detours through every center
and through 4 random waypoints and the library's own curve, each refined by
L-BFGS on a chain's discrete energy (the 2 or 3 best at 512 / 256 nodes). A
reference is the Gauss--Legendre length of a polyline: an upper bound on the
distance. When the library's curve (``last_result_.curves``) is shorter, it
is the reference (counted as "library curve shorter" when by more than 1e-3).

The library: ``LearnedMetricManifold(field).metric.log_solver.solve(b, a)``
with its defaults, one pair per call; "certified" is its ``converged``, the
error is ``(length - reference) / reference``; warnings are counted.

Estimators: ``GeodesicRegression`` on three curved 2-D fields, its objective
``sum_i d^2(predict(t_i), y_i)`` with reference distances against that of a
Nelder--Mead optimum over (p, v) (library distances, from the fit and from the
chart's least squares).

Run: ``python benchmarks/bench_hard_geometry.py [--quick] [--seed N]`` (one BLAS thread).
"""

import argparse
import os
import time
import warnings

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402
from _reference_geodesics import LatticeRoutes, curve_length, polyline_through, shortest_of  # noqa: E402
from scipy.optimize import minimize  # noqa: E402

from riemlocal import LearnedMetricManifold, SmoothLocalField  # noqa: E402
from riemlocal.learning import GeodesicRegression  # noqa: E402

BOX = 2.0  # centers and points in [-BOX, BOX]^D
MARGIN = 1.0  # the lattice covers [-BOX - MARGIN, BOX + MARGIN]^2
OFF = 1e-3  # a certified distance further than this (relative) from the reference is "silently wrong"
ROWS = [(2, condition, rho) for condition in (10.0, 100.0, 1000.0) for rho in (0.5, 1.0, 2.0)]
ROWS += [(dim, 100.0, rho) for dim in (5, 10) for rho in (1.0, 2.0)]


def hard_field(dim, condition, rho, seed):
    """R = 5--20 random SPD metrics (eigenvalues log-uniform in [1, condition]) at centers uniform in the box."""
    rng = np.random.default_rng(seed)
    n_centers = int(rng.integers(5, 21))
    metrics = []
    for _ in range(n_centers):
        q, _ = np.linalg.qr(rng.normal(size=(dim, dim)))
        metrics.append((q * np.exp(rng.uniform(0.0, np.log(condition), dim))) @ q.T)
    return SmoothLocalField(rng.uniform(-BOX, BOX, (n_centers, dim)), np.array(metrics), rho=rho)


def library_solve(solver, point_a, point_b):
    """Length, error estimate, certification, curve, time and warnings of the library on one pair."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        start = time.perf_counter()
        result = solver.solve(point_b, point_a)
        elapsed = time.perf_counter() - start
    return (float(result.length), float(result.error_estimate), bool(result.converged), result.curves[()],
            elapsed, len(caught))


def reference(field, point_a, point_b, lattice, library_curve, rng):
    """Shortest refined curve from the starts of the module docstring: its length."""
    straight = np.stack([point_a, point_b])
    if lattice is not None:
        return shortest_of(field, lattice.routes(point_a, point_b) + [straight], n_coarse=64, n_fine=512, n_best=3)[0]
    waypoints = np.concatenate([field.centers, rng.uniform(-BOX, BOX, (4, field.dim))])
    starts = [straight, library_curve] + [polyline_through(point_a, w, point_b) for w in waypoints]
    return shortest_of(field, starts, n_coarse=32, n_fine=256, n_best=3)[0]


def lattice_for(field):
    return LatticeRoutes(field, [-BOX - MARGIN] * 2, [BOX + MARGIN] * 2) if field.dim == 2 else None


def hardness_row(dim, condition, rho, n_fields, n_pairs, seed, hard_pairs):
    """Statistics of one hardness row; appends its certified-but-off and uncertified pairs to ``hard_pairs``."""
    records = []
    for k in range(n_fields):
        field_seed = [seed, dim, int(condition), int(10 * rho), k]
        field = hard_field(dim, condition, rho, field_seed)
        solver = LearnedMetricManifold(field).metric.log_solver
        lattice = lattice_for(field)
        rng = np.random.default_rng(field_seed + [1])
        for point_a, point_b in rng.uniform(-BOX, BOX, (n_pairs, 2, dim)):
            length, estimate, certified, curve, t_library, n_warnings = library_solve(solver, point_a, point_b)
            start = time.perf_counter()
            ref = reference(field, point_a, point_b, lattice, curve, rng)
            t_reference = time.perf_counter() - start
            library_curve = curve_length(field, curve)
            shorter = library_curve < (1.0 - OFF) * ref  # the reference missed the route
            ref = min(ref, library_curve)
            error = (length - ref) / ref
            records.append((certified, error, shorter, t_library, t_reference, n_warnings))
            if not certified or abs(error) > OFF:
                hard_pairs.append(dict(dim=dim, condition=condition, rho=rho, field_seed=field_seed,
                                       point_a=point_a.round(6).tolist(), point_b=point_b.round(6).tolist(),
                                       reference=round(ref, 8), library=round(length, 8),
                                       error_estimate=float(f"{estimate:.2e}"), certified=certified))
    certified, error, shorter, t_library, t_reference, n_warnings = map(np.array, zip(*records))
    wrong = certified & (np.abs(error) > OFF)
    worst_signed = error[certified][np.argmax(np.abs(error[certified]))] if certified.any() else 0.0
    n = len(records)
    print(f"| {dim} | {condition:g} | {rho:g} | {n} | {100 * certified.mean():.0f}% | {100 * wrong.mean():.0f}% "
          f"| {worst_signed:+.1e} | {np.max(np.abs(error)):.1e} | {shorter.sum()} | {n_warnings.sum()} "
          f"| {1e3 * np.median(t_library):.1f} | {np.median(t_reference):.1f} |", flush=True)


def regression_objective(field, lattice, predicted, Y):
    """``sum_i d^2(predicted_i, y_i)`` with reference distances (each the shorter of two routes)."""
    return sum(shortest_of(field, [lattice.route(p, y), np.stack([p, y])], n_coarse=64, n_fine=256, n_best=2)[0] ** 2
               for p, y in zip(predicted, Y))


def regression_row(seed, n_samples, max_evaluations):
    """GeodesicRegression's objective against Nelder--Mead's optimum on one curved 2-D field."""
    field = hard_field(2, 100.0, 1.0, [seed, 99])
    space = LearnedMetricManifold(field)
    rng = np.random.default_rng([seed, 98])
    t = np.linspace(0.0, 1.0, n_samples)
    point_a, point_b = rng.uniform(-BOX, BOX, (2, 2))
    Y = point_a + t[:, None] * (point_b - point_a) + 0.3 * rng.normal(size=(n_samples, 2))

    def predict(params):
        return space.metric.exp(t[:, None] * params[2:], params[:2])

    def objective(params):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return float(np.sum(space.metric.squared_dist(predict(params), Y)))

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = GeodesicRegression(space).fit(t, Y)
    chart = np.polyfit(t, Y, 1)  # rows: slope, intercept
    best = min((minimize(objective, start, method="Nelder-Mead",
                         options={"maxfev": max_evaluations, "xatol": 1e-7, "fatol": 1e-12})
                for start in (np.concatenate([fit.intercept_, fit.coef_[:, 0]]), np.concatenate(chart[::-1]))),
               key=lambda result: result.fun)
    lattice = lattice_for(field)
    ours = regression_objective(field, lattice, fit.predict(t), Y)
    optimum = regression_objective(field, lattice, predict(best.x), Y)
    print(f"| {seed} | {n_samples} | {fit.converged_} | {ours:.6g} | {optimum:.6g} | {ours / optimum:.6f} "
          f"| {objective(np.concatenate([fit.intercept_, fit.coef_[:, 0]])):.6g} | {best.fun:.6g} |", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer fields and pairs (about 2 minutes)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the fields and pairs")
    args = parser.parse_args()
    print(f"load average: {', '.join(f'{load:.2f}' for load in os.getloadavg())}\n")
    warm_up = hard_field(2, 10.0, 1.0, 0)
    library_solve(LearnedMetricManifold(warm_up).metric.log_solver, np.zeros(2), np.ones(2))  # compiles
    hard_pairs = []
    print(f"| D | condition | rho | pairs | certified | certified, off > {OFF:g} | worst certified error "
          "| worst error | library curve shorter | warnings | library (ms / pair) | reference (s / pair) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for dim, condition, rho in ROWS:
        n_fields, n_pairs = (1, 3) if args.quick else (3, 10)
        if dim > 2:
            n_fields, n_pairs = (1, 2) if args.quick else (2, 5)
        hardness_row(dim, condition, rho, n_fields, n_pairs, args.seed, hard_pairs)
    print("\n| field seed | samples | fit converged | fit objective (ref.) | Nelder-Mead objective (ref.) | ratio "
          "| fit objective (library) | Nelder-Mead objective (library) |")
    print("|---|---|---|---|---|---|---|---|")
    for seed in range(args.seed, args.seed + 3):
        regression_row(seed, 6 if args.quick else 10, 100 if args.quick else 400)
    print(f"\nHard pairs (uncertified, or certified and off by more than {OFF:g}):")
    for pair in hard_pairs:
        print(pair)


if __name__ == "__main__":
    main()
