"""Speed of the exact line integral in Ramanan & Baker's MNIST setting.

K = 164 dimensions, R = 500 full-rank reference metrics (random SPD; nearest
field with each center's own metric, eq. 20--21), 1000 training and 1000 test
points, 20 shortlisted candidates per query (Euclidean nearest neighbours),
so 20,000 line integrals. The paper reports 98--281 s for its line-integral
classifier on one 1000-point MNIST batch (Tables II and IV); the target here
is <= 10 s for the "line" rule. The paper's own algorithm (all R(R-1)/2
boundary roots, sorted, a nearest-center search per segment; O(R^3 K^2)),
as written independently in ``tests/test_distances.py``, is timed on a few
pairs and checked against the envelope walk. Last, the exact line rule of a
``LazyField`` (Lazy LDA on iris, S = 20, one segment), which walks the crossing
lines of its S-nearest set and fits one metric per cell.

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
    """Data with a PCA-like decaying spectrum, R reference points among the training set."""
    rng = np.random.default_rng(seed)
    scale = np.sqrt(np.geomspace(1.0, 0.02, dim))
    train = rng.normal(size=(n_train, dim)) * scale
    queries = rng.normal(size=(n_queries, dim)) * scale
    factors = rng.normal(size=(n_centers, dim, dim)) / np.sqrt(dim)
    metrics = factors @ factors.transpose(0, 2, 1) + 0.05 * np.eye(dim)
    field = NearestLocalField(train[rng.choice(n_train, n_centers, replace=False)], metrics)
    squared = (queries**2).sum(1)[:, None] - 2 * queries @ train.T + (train**2).sum(1)
    candidates = np.argsort(squared, axis=1)[:, :shortlist]
    return field, queries, train[candidates]


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

    field, queries, shortlists = mnist_like_problem(args.queries)
    n_pairs = shortlists.shape[0] * shortlists.shape[1]
    load = os.getloadavg()[0]
    runs = [("line", 1), ("line_length", 1), ("test", 1), ("train", 1)]
    runs += [("line", args.n_jobs)] if args.n_jobs != 1 else []
    rows = []
    for rule, n_jobs in runs:
        values, wall, cpu = timed(
            lambda: distance(field, queries[:, None, :], shortlists, rule=rule, squared=True, n_jobs=n_jobs)
        )
        name = f"`{rule}`, envelope walk" if rule.startswith("line") else f"`{rule}`"
        rows.append((name, n_jobs, n_pairs, wall, cpu if n_jobs == 1 else float("nan")))
        if (rule, n_jobs) == ("line", 1):
            energies = values

    checked = [divmod(i, shortlists.shape[1]) for i in range(args.paper_pairs)]
    if checked:
        paper, wall, cpu = timed(
            lambda: [paper_line_integral(field, queries[q], shortlists[q, s])[0] for q, s in checked]
        )
        rows.append(("`line`, paper algorithm (Sec. II-E)", 1, len(checked), wall, cpu))
        error = max(abs(p - energies[q, s]) / p for p, (q, s) in zip(paper, checked))

    print(f"K={field.dim}, R={field.n_centers} (own full-rank metrics), {args.queries} queries x "
          f"{shortlists.shape[1]} candidates; load average at start {load:.1f} on {os.cpu_count()} cores\n")
    print("| rule / method | n_jobs | pairs | wall (s) | CPU (s) | wall per pair (ms) |")
    print("|---|---|---|---|---|---|")
    for name, n_jobs, pairs, wall, cpu in rows:
        print(f"| {name} | {n_jobs} | {pairs} | {wall:.2f} | {cpu:.2f} | {1e3 * wall / pairs:.3g} |")
    if checked:
        print(f"\nmax relative difference, envelope walk vs paper algorithm on {len(checked)} pair(s): {error:.2e}")

    X, y = load_iris(return_X_y=True)
    lazy = LazyField(LDAMetric(), X, y, n_neighbors=20)
    energy, wall, cpu = timed(lambda: distance(lazy, X[0], X[100], rule="line", squared=True))
    print(f"\nLazyField(LDAMetric(), iris, n_neighbors=20), rule='line' from X[0] to X[100]: "
          f"{wall:.3f} s wall, {cpu:.3f} s CPU, {lazy.cache_info().misses} metric fits, energy {energy:.10g}")


if __name__ == "__main__":
    main()
