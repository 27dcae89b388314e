"""Geodesic distance matrices on learned fields, with and without ``LocalMetrics(max_condition=...)``.

Protocol: iris, wine and digits (sklearn), standardized; digits then reduced
by PCA (``--digits-dim``, default 10: geodesics on the raw 64-D field with its
1797 centers are out of reach), optionally subsampled (``--digits-samples``;
the smooth field's cost grows with its number of centers, one per training
point); LMNN per class
(``LocalMetrics(LMNNMetric(), where="class")``), the smooth field with
``rho=1``, 60 training points drawn with a fixed seed. Every ordered pair is
solved by ``LearnedMetricManifold(field).metric.log_solver.solve``: the pairs
``i < j`` as one call ("time") and the pairs ``j > i`` as a second, which
gives the symmetry ``|d(a, b) - d(b, a)|`` relative to the sum of the two
estimated errors ("est. error") and to ``rtol`` times the two distances (the
certified bound); a value above 1 is an asymmetry they do not explain. Each distance is also compared with the length of the straight
segment (``rule="line_length"`` of :func:`riemlocal.distances.distance`), an
upper bound on the geodesic distance.

``max_condition=None`` (the learned metrics as they are) is slow: by default
it is run on iris only and on a random subset of ``--none-pairs`` pairs.

Run: ``python benchmarks/bench_learned_fields.py [--datasets iris wine digits]
[--max-condition none 10 100] [--n-jobs 2]``. Prints a markdown table.

Measured with 2 workers on a quiet machine, seconds per direction, two runs: iris 4.1-4.2 / 4.3-4.4 at
``max_condition`` 10 and 8.7-8.8 / 7.8 at 100, wine 0.75-0.77 / 0.84-0.95 and 5.3-7.6 / 5.8-6.1, digits 4.7-4.8 /
4.1-4.3 and 7.1-7.2 / 6.5-6.8, all certified, the same asymmetries and line ratios (to the digits printed) as before
the curve checks measured each curve's segments along the whole curve and the preconditioners of fine levels were
built in O(N^2) (that day, on the same
machine: iris 5.9 / 5.4, wine 0.78 / 1.08, digits 4.8 / 4.4 at 10; 11.1 / 9.2, 7.8 / 6.8, 8.1 / 7.9 at 100). Earlier, on another day: iris 6.0-6.2 / 7.1-7.3 at
``max_condition`` 10 and 12.6-12.7 / 12.8-14.0 at 100, wine 1.1-1.2 / 1.2-1.4 and 7.8 / 8.0-8.2, digits 7.2-7.7 /
6.4-7.1 (one run of four 10.2 / 6.8) and 10.7 / 10.3-10.6, all certified, after the shared evaluators stopped storing
every center's ``h_r``, the digits field's graph and sharpness ran over the workers and ``LOG_GUARD`` held past the
third level (before it: digits 7.3-7.5 / 6.3-6.6 and 10.1-10.3 / 9.4-9.5, iris 12.6-12.7 / 11.9-12.1 at 100, wine
7.7-8.5 / 8.2-8.5 at 100). Before: iris 8.2-8.3 / 14.1-14.5
at ``max_condition`` 10 / 100, wine 1.3-1.5 / 8.9-9.1; all certified (iris 8.0-8.1 / 14.7-15.7, wine 1.5-1.7 / 9.4-10.1
before ``LOG_GUARD`` and the shared-metric Hessian; before the search's unchanged rows kept
their measured curves: iris 10.6-11.1 / 19.3-19.6, wine 1.8-2.2 / 11.2-11.4). Iris was 1.5-2.4 / 9.2-9.4 before every
pair of its field was searched (``cheap_reach``: 2 and 20 of its distances were certified up to 6% and 22% too
long); wine was 1.9-2.3 / 13.5-13.9 before the legs to the centers were computed once per point (before the route search ran over the
workers, per-class fields evaluated each distinct metric once and curve lengths were compiled above 5
dimensions: iris 4.9-5.8 / 48, wine 6.7-7.0 / 92).
Digits (10-D, 1797 centers) then 13.8-15.5 / 10.3-11.7 at 10 and 21.1 / 19.8 at 100, all certified (17.8 / 13.0 and 22.9 / 20.7 before
the shared-metric Hessian; 16.7 / 12.0 and 19.7 / 17.7 before ``LOG_GUARD``, with four directions at 100 certified
1.5-2.2e-6 off); about half an hour while one
isolated center made its blend sharp (0.86), so that every pair was searched (``SHARP_OUTLIERS``).
Earlier, on 2 cores shared with other jobs (load about 5): iris 420 for 60 pairs unbounded (60 % certified);
digits 132 / 234, (200 samples) 19 / 23, before the route search.
At 100 the two directions of a pair can differ by slightly more than ``rtol``
(wine, 1.02 ``rtol``): the error estimate of some pairs stopped at 32 segments is
too small.
"""

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402

import numpy as np  # noqa: E402
from sklearn.datasets import load_digits, load_iris, load_wine  # noqa: E402
from sklearn.decomposition import PCA  # noqa: E402
from sklearn.model_selection import train_test_split  # noqa: E402
from sklearn.preprocessing import StandardScaler  # noqa: E402

from riemlocal.distances import distance  # noqa: E402
from riemlocal.learners import LMNNMetric  # noqa: E402
from riemlocal.manifold import LearnedMetricManifold  # noqa: E402
from riemlocal.placement import LocalMetrics  # noqa: E402

LOADERS = {"iris": load_iris, "wine": load_wine, "digits": load_digits}


def load(name, digits_dim, digits_samples=None):
    X, y = LOADERS[name](return_X_y=True)
    X = StandardScaler().fit_transform(X)
    if name == "digits":
        X = StandardScaler().fit_transform(PCA(n_components=digits_dim, random_state=0).fit_transform(X))
        if digits_samples:
            X, _, y, _ = train_test_split(X, y, train_size=digits_samples, stratify=y, random_state=0)
    return X, y


def pairs(n_points, n_pairs, rng):
    """Index pairs ``i < j``: all of them, or ``n_pairs`` drawn at random."""
    i, j = np.triu_indices(n_points, 1)
    if n_pairs is not None and n_pairs < len(i):
        keep = np.sort(rng.choice(len(i), n_pairs, replace=False))
        i, j = i[keep], j[keep]
    return i, j


def run(X, y, max_condition, n_points, n_pairs, n_jobs, seed=0):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # max_condition=None: the fit's condition warning
        placement = LocalMetrics(LMNNMetric(), where="class", max_condition=max_condition).fit(X, y)
    field = placement.smooth_field(rho=1.0)
    solver = LearnedMetricManifold(field, n_jobs=n_jobs).metric.log_solver
    rng = np.random.default_rng(seed)
    P = X[rng.choice(len(X), n_points, replace=False)]
    i, j = pairs(n_points, n_pairs, rng)
    times, results = [], []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # counted below from the results
        solver.solve(P[1], P[0])  # compiles the kernels (cached on disk after the first run)
        for a, b in ((j, i), (i, j)):
            start = time.perf_counter()
            results.append(solver.solve(P[a], P[b]))
            times.append(time.perf_counter() - start)
    forward, backward = results
    certified = np.concatenate([forward.converged, backward.converged])
    line = distance(field, P[i], P[j], rule="line_length")
    distinct = line > 0  # iris repeats some points
    d_ab, d_ba = forward.length[distinct], backward.length[distinct]
    e_ab, e_ba = forward.error_estimate[distinct], backward.error_estimate[distinct]
    asymmetry = np.abs(d_ab - d_ba)
    ratio = d_ab / line[distinct]
    return {
        "worst condition": placement.condition_numbers_.max(),
        "pairs": len(i),
        "time i<j (s)": times[0],
        "time j>i (s)": times[1],
        "% certified": 100.0 * certified.mean(),
        "max asym / est. error": (asymmetry / np.maximum(e_ab * d_ab + e_ba * d_ba, np.finfo(float).tiny)).max(),
        "max asym / rtol": (asymmetry / (solver.rtol * (d_ab + d_ba))).max(),
        "d_geo > line": int((ratio > 1).sum()),
        "max d_geo / line - 1": ratio.max() - 1.0,
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="+", default=list(LOADERS), choices=list(LOADERS))
    parser.add_argument("--max-condition", nargs="+", default=["none", "10", "100"], help="values; 'none' for None")
    parser.add_argument("--none-datasets", nargs="+", default=["iris"], help="datasets run with max_condition=None")
    parser.add_argument("--none-pairs", type=int, default=60, help="pairs solved with max_condition=None")
    parser.add_argument("--n-points", type=int, default=60)
    parser.add_argument("--digits-dim", type=int, default=10)
    parser.add_argument("--digits-samples", type=int, default=None, help="stratified subsample of digits (all 1797)")
    parser.add_argument("--n-jobs", type=int, default=2)
    args = parser.parse_args()
    columns = None
    for name in args.datasets:
        X, y = load(name, args.digits_dim, args.digits_samples)
        for value in args.max_condition:
            unbounded = value.lower() == "none"
            if unbounded and name not in args.none_datasets:
                continue
            row = run(X, y, None if unbounded else float(value), args.n_points, args.none_pairs if unbounded else None, args.n_jobs)
            if columns is None:
                columns = ["dataset", "max_condition", *row]
                print("| " + " | ".join(columns) + " |")
                print("|" + "---|" * len(columns))
            cells = [f"{name} ({len(X)} x {X.shape[1]})", value] + [f"{v:.3g}" if isinstance(v, float) else str(v) for v in row.values()]
            print("| " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
