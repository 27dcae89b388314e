"""Speed of the exact line integral in Ramanan & Baker's MNIST setting.

K = 164 dimensions, R = 500 full-rank reference metrics (random SPD; nearest
field with each center's own metric, eq. 20--21), 1000 test points with 20
candidates each, so 20,000 line integrals, in two candidate settings:

* ``shortlist``: each query's 20 Euclidean nearest neighbours among 1000
  training points (candidates shared between queries: 1000 distinct ends);
* ``distinct``: 20 fresh points per query from the same distribution, as from
  a training set much larger than the shortlists (20,000 distinct ends). This
  is issue 15's setting ("distinct candidates", 11 s before it): the work per
  distinct end, R quadratic forms of size K, dominates.

Each is timed as one batched call, ``distance(field, queries[:, None], candidates)``,
and as one call per query. The paper reports 98--281 s for its line-integral
classifier on one 1000-point MNIST batch (Tables II and IV). The paper's own
algorithm (all R(R-1)/2 boundary roots, sorted, a nearest-center search per
segment; O(R^3 K^2)), as written independently in ``tests/test_distances.py``,
is timed on a few pairs and checked against the envelope walk. Last, the exact
line rule of a ``LazyField`` (Lazy LDA on iris, S = 20, one segment), which
walks the crossing lines of its S-nearest set and fits one metric per cell.

Run: ``python benchmarks/bench_line_integral.py [--queries 1000] [--paper-pairs 1] [--n-jobs 1]``
"""

import argparse
import os
import pathlib
import sys
import time

import numpy as np

from sklearn.datasets import load_iris

from riemlocal.distances import distance
from riemlocal.fields import LazyField, NearestLocalField
from riemlocal.learners import LDAMetric

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tests"))
from test_distances import paper_line_integral  # noqa: E402


def mnist_like_problem(n_queries, dim=164, n_centers=500, n_train=1000, shortlist=20, seed=0):
    """Data with a PCA-like decaying spectrum, R reference points among the training set.

    Returns the field, the queries and both candidate sets, ``{"shortlist": ..., "distinct": ...}``,
    each of shape ``(n_queries, shortlist, dim)``.
    """
    rng = np.random.default_rng(seed)
    scale = np.sqrt(np.geomspace(1.0, 0.02, dim))
    train = rng.normal(size=(n_train, dim)) * scale
    queries = rng.normal(size=(n_queries, dim)) * scale
    factors = rng.normal(size=(n_centers, dim, dim)) / np.sqrt(dim)
    metrics = factors @ factors.transpose(0, 2, 1) + 0.05 * np.eye(dim)
    field = NearestLocalField(train[rng.choice(n_train, n_centers, replace=False)], metrics)
    squared = (queries**2).sum(1)[:, None] - 2 * queries @ train.T + (train**2).sum(1)
    nearest = train[np.argsort(squared, axis=1)[:, :shortlist]]
    fresh = rng.normal(size=(n_queries, shortlist, dim)) * scale
    return field, queries, {"shortlist": nearest, "distinct": fresh}


def timed(function):
    """Result, wall-clock seconds and CPU seconds of this process (the machine may be shared)."""
    wall, cpu = time.perf_counter(), time.process_time()
    result = function()
    return result, time.perf_counter() - wall, time.process_time() - cpu


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--paper-pairs", type=int, default=1, help="pairs given to the paper's algorithm (~1 min each)")
    parser.add_argument("--n-jobs", type=int, default=1, help="also time the line rule with this many workers")
    args = parser.parse_args()

    field, queries, candidates = mnist_like_problem(args.queries)
    shortlists = candidates["shortlist"]
    load = os.getloadavg()[0]
    rows = []
    for setting, points in candidates.items():
        runs = [("line", 1)] + ([("line", args.n_jobs)] if args.n_jobs != 1 else [])
        runs += [("line_length", 1), ("test", 1), ("train", 1)] if setting == "shortlist" else []
        for rule, n_jobs in runs:
            values, wall, cpu = timed(
                lambda points=points, rule=rule, n_jobs=n_jobs: distance(
                    field, queries[:, None, :], points, rule=rule, squared=True, n_jobs=n_jobs
                )
            )
            name = f"`{rule}`, envelope walk" if rule.startswith("line") else f"`{rule}`"
            rows.append((setting, f"{name}, one batched call", n_jobs, points.size // field.dim, wall, cpu if n_jobs == 1 else float("nan")))
            if (setting, rule, n_jobs) == ("shortlist", "line", 1):
                energies = values
        _, wall, cpu = timed(
            lambda points=points: [
                distance(field, query, shortlist, rule="line", squared=True) for query, shortlist in zip(queries, points)
            ]
        )
        rows.append((setting, "`line`, envelope walk, one call per query", 1, points.size // field.dim, wall, cpu))

    checked = [divmod(i, shortlists.shape[1]) for i in range(args.paper_pairs)]
    if checked:
        paper, wall, cpu = timed(
            lambda: [paper_line_integral(field, queries[q], shortlists[q, s])[0] for q, s in checked]
        )
        rows.append(("shortlist", "`line`, paper algorithm (Sec. II-E)", 1, len(checked), wall, cpu))
        error = max(abs(p - energies[q, s]) / p for p, (q, s) in zip(paper, checked))

    print(f"K={field.dim}, R={field.n_centers} (own full-rank metrics), {args.queries} queries x "
          f"{shortlists.shape[1]} candidates; load average at start {load:.1f}, at end {os.getloadavg()[0]:.1f}, "
          f"on {os.cpu_count()} cores\n")
    print("| candidates | rule / method | n_jobs | pairs | wall (s) | CPU (s) | wall per pair (ms) |")
    print("|---|---|---|---|---|---|---|")
    for setting, name, n_jobs, pairs, wall, cpu in rows:
        print(f"| {setting} | {name} | {n_jobs} | {pairs} | {wall:.2f} | {cpu:.2f} | {1e3 * wall / pairs:.3g} |")
    if checked:
        print(f"\nmax relative difference, envelope walk vs paper algorithm on {len(checked)} pair(s): {error:.2e}")

    X, y = load_iris(return_X_y=True)
    lazy = LazyField(LDAMetric(), X, y, n_local=20)
    energy, wall, cpu = timed(lambda: distance(lazy, X[0], X[100], rule="line", squared=True))
    print(f"\nLazyField(LDAMetric(), iris, n_local=20), rule='line' from X[0] to X[100]: "
          f"{wall:.3f} s wall, {cpu:.3f} s CPU, {lazy.cache_info().misses} metric fits, energy {energy:.10g}")


if __name__ == "__main__":
    main()
