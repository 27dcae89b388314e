"""Speed of the Fréchet mean and PGA on the body-shape manifold (986 x 35, R local metrics).

Usage::

    python benchmarks/bench_pga.py [--n-jobs N] [--metrics 5 10] [--karcher-samples 200] [--exact 3] [--exact-samples 100]

Local metrics: the bodies (whitened) are split into R equal-sized groups by
stature; group r gets the inverse of its regularized covariance, scaled to
trace D, placed at the group mean, blended by a SmoothLocalField (rho = 1).
Prints a markdown table: time of the joint Fréchet mean, of the Log maps at
the mean and of the whole PGA fit, plus the Karcher mean (one batch of Log
solves per iteration) against the joint solver on a subsample.
Target: PGA on 986 x 35 with 5-10 metrics in at most 60 s. ``--exact K`` adds
a column: exact PGA (Sommer et al. 2010) with K components at the same mean, on all
bodies or, with ``--exact-samples N``, on the first N (its time grows about linearly in N).
"""

import argparse
import time
import warnings

import numpy as np

from riemlocal.datasets import make_body_shapes
from riemlocal.experiments.bodyshape import equal_size_clusters
from riemlocal.fields import SmoothLocalField
from riemlocal.learning import FrechetMean, PrincipalGeodesicAnalysis
from riemlocal.manifold import LearnedMetricManifold


def _space(X, labels, n_jobs):
    dim = X.shape[1]
    centers, metrics = [], []
    for label in np.unique(labels):
        members = X[labels == label]
        precision = np.linalg.inv(np.cov(members.T) + 0.1 * np.eye(dim))
        centers.append(members.mean(axis=0))
        metrics.append(precision * dim / np.trace(precision))
    return LearnedMetricManifold(SmoothLocalField(np.array(centers), np.array(metrics), rho=1.0), n_jobs=n_jobs)


def _timed(function):
    start = time.perf_counter()
    value = function()
    return value, time.perf_counter() - start


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-jobs", type=int, default=None)
    parser.add_argument("--metrics", type=int, nargs="+", default=[5, 10])
    parser.add_argument("--karcher-samples", type=int, default=200)
    parser.add_argument("--exact", type=int, default=0, metavar="K", help="also time exact PGA with K components")
    parser.add_argument("--exact-samples", type=int, default=None, metavar="N", help="exact PGA on the first N bodies only")
    args = parser.parse_args(argv)

    bodies = make_body_shapes(random_state=0)
    centered = bodies.data - bodies.data.mean(axis=0)
    _, singular, vt = np.linalg.svd(centered, full_matrices=False)
    X = centered @ vt.T / singular * np.sqrt(len(centered) - 1)
    stature = bodies.target[:, bodies.measurement_names.index("stature")]
    n = args.karcher_samples
    rows = []
    for n_metrics in args.metrics:
        space = _space(X, equal_size_clusters(stature, n_metrics), args.n_jobs)
        mean, t_mean = _timed(lambda: FrechetMean(space).fit(X))
        _, t_log = _timed(lambda: space.metric.log(X, mean.estimate_))
        pga, t_pga = _timed(lambda: PrincipalGeodesicAnalysis(space, n_jobs=args.n_jobs).fit(X))
        joint, t_joint = _timed(lambda: FrechetMean(space).fit(X[:n]))
        with warnings.catch_warnings(record=True):
            karcher, t_karcher = _timed(lambda: FrechetMean(space, method="karcher", n_jobs=args.n_jobs).fit(X[:n]))
        gap = np.linalg.norm(joint.estimate_ - karcher.estimate_)
        exact = ""
        if args.exact:
            with warnings.catch_warnings(record=True) as caught:
                fit = PrincipalGeodesicAnalysis(space, args.exact, method="exact", mean=mean, n_jobs=args.n_jobs)
                fit, t_exact = _timed(lambda: fit.fit(X[: args.exact_samples]))
            exact = f" {t_exact:.1f} ({fit.direction_n_iter_.sum()} it{', warned' if caught else ''}) |"
        rows.append(
            f"| {n_metrics} | {t_mean:.1f} ({mean.n_iter_} it) | {t_log:.1f} | **{t_pga:.1f}** | "
            f"{t_joint:.1f} | {t_karcher:.1f} ({karcher.n_iter_} it) | {gap:.1e} |{exact}"
        )
    print(f"PGA on {X.shape[0]} x {X.shape[1]} body shapes (n_jobs={args.n_jobs}); times in seconds\n")
    print(
        f"| metrics R | joint Fréchet mean | Log at mean | PGA fit | joint mean, n={n} "
        f"| Karcher mean, n={n} | joint - Karcher |" + (f" exact PGA, {args.exact} components, n={len(X[: args.exact_samples])} |" if args.exact else "")
    )
    print("|---:|---:|---:|---:|---:|---:|---:|" + ("---:|" if args.exact else ""))
    print("\n".join(rows))


if __name__ == "__main__":
    main()
