"""Wine results of BoostMetric (Shen et al.) and CCML (Im & Taylor), and BoostMetric vs. LMNN fit times.

Run ``python benchmarks/bench_boost_ccml.py`` (about 5-10 minutes on one core);
it prints three markdown tables:

1. BoostMetric on *unscaled* wine, 10 random 70/30 splits, 3-NN test error
   (paper: Euclidean 26.23 +- 5.52 %, BoostMetric 2.64 +- 1.59 %).
2. Fit time of BoostMetric and LMNN on concentric circles padded with noise
   dimensions, 250 triplets (one target and one impostor per point), as in
   the paper's Fig. 1.
3. CCML on standardized wine, repeated 10-fold CV, 3-NN and CCKNN error
   (paper: Euclidean 3.99 / 3.29 %, CCML 2.13 / 2.04 %).
"""

import argparse
import time
import warnings

import numpy as np
from sklearn.datasets import load_wine, make_circles
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics import pairwise_distances
from sklearn.model_selection import StratifiedKFold, train_test_split
from sklearn.neighbors import KNeighborsClassifier
from sklearn.preprocessing import StandardScaler

from riemlocal.learners import BoostMetric, CCMLMetric, LMNNMetric
from riemlocal.neighbors import ccknn_predict


def knn_error(Z_train, y_train, Z_test, y_test, k=3):
    return 1.0 - KNeighborsClassifier(k).fit(Z_train, y_train).score(Z_test, y_test)


def ccknn_error(Z_train, y_train, Z_test, y_test, k=3):
    return np.mean(ccknn_predict(pairwise_distances(Z_test, Z_train) ** 2, y_train, k) != y_test)


def percent(values):
    return f"{100 * np.mean(values):.2f} ± {100 * np.std(values):.2f}"


def boostmetric_wine(n_splits):
    X, y = load_wine(return_X_y=True)
    euclidean, boost, seconds, iterations = [], [], [], []
    for seed in range(n_splits):
        X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.3, random_state=seed)
        start = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)  # wine runs the paper's J = 500 iterations
            learner = BoostMetric(nu=1e-7, max_iter=500, n_targets=3).fit(X_train, y_train)
        seconds.append(time.perf_counter() - start)
        iterations.append(learner.n_iter_)
        euclidean.append(knn_error(X_train, y_train, X_test, y_test))
        boost.append(knn_error(learner.transform(X_train), y_train, learner.transform(X_test), y_test))
    print(f"\n### BoostMetric, unscaled wine, {n_splits} random 70/30 splits, 3-NN test error (%)\n")
    print("| metric | ours | paper (Table 1) | fit time (s) | iterations |")
    print("|---|---|---|---|---|")
    print(f"| Euclidean | {percent(euclidean)} | 26.23 ± 5.52 | | |")
    print(f"| BoostMetric | {percent(boost)} | 2.64 ± 1.59 | {np.mean(seconds):.2f} | {np.mean(iterations):.0f} |")


def circles(dim, n_samples=250, seed=0):
    """Concentric circles in the first two coordinates, Gaussian noise in the other ``dim - 2``."""
    rng = np.random.default_rng(seed)
    X2, y = make_circles(n_samples, factor=0.5, noise=0.05, random_state=seed)
    return np.c_[X2, 0.5 * rng.normal(size=(n_samples, dim - 2))], y


def scaling(dims):
    print("\n### Fit time vs. dimension, 250 triplets (concentric circles + noise), default max_iter\n")
    print("| D | BoostMetric (s) | BoostMetric iterations | LMNN (s) | LMNN iterations | LMNN / BoostMetric |")
    print("|---|---|---|---|---|---|")
    for dim in dims:
        X, y = circles(dim)
        times, iterations = [], []
        for learner in (BoostMetric(n_targets=1), LMNNMetric(n_targets=1)):
            start = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ConvergenceWarning)
                learner.fit(X, y)
            times.append(time.perf_counter() - start)
            iterations.append(learner.n_iter_)
        ratio = times[1] / times[0]
        print(f"| {dim} | {times[0]:.2f} | {iterations[0]} | {times[1]:.2f} | {iterations[1]} | {ratio:.1f} |")


def ccml_wine(n_repeats):
    X, y = load_wine(return_X_y=True)
    rows = {"Euclidean": None, "CCML local (eq. 15)": "local", "CCML class-conditional (eq. 10)": "class_conditional"}
    errors = {name: ([], []) for name in rows}
    for repeat in range(n_repeats):
        for train, test in StratifiedKFold(10, shuffle=True, random_state=repeat).split(X, y):
            scaler = StandardScaler().fit(X[train])
            X_train, X_test = scaler.transform(X[train]), scaler.transform(X[test])
            for name, objective in rows.items():
                if objective is None:
                    Z_train, Z_test = X_train, X_test
                else:
                    learner = CCMLMetric(objective=objective, n_neighbors=3).fit(X_train, y[train])
                    Z_train, Z_test = learner.transform(X_train), learner.transform(X_test)
                errors[name][0].append(knn_error(Z_train, y[train], Z_test, y[test]))
                errors[name][1].append(ccknn_error(Z_train, y[train], Z_test, y[test]))
    paper = {"Euclidean": "3.99 / 3.29", "CCML local (eq. 15)": "2.13 / 2.04", "CCML class-conditional (eq. 10)": ""}
    print(f"\n### CCML, standardized wine, {n_repeats} x 10-fold CV, error (%) (mean over all folds)\n")
    print("| metric | 3-NN | CCKNN (k=3) | paper 3-NN / CCKNN (Table I) |")
    print("|---|---|---|---|")
    for name, (knn, ccknn) in errors.items():
        print(f"| {name} | {100 * np.mean(knn):.2f} | {100 * np.mean(ccknn):.2f} | {paper[name]} |")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--splits", type=int, default=10, help="random splits for BoostMetric on wine")
    parser.add_argument("--repeats", type=int, default=3, help="repetitions of 10-fold CV for CCML")
    parser.add_argument("--dims", type=int, nargs="+", default=[50, 200, 500], help="dimensions of the timing table")
    args = parser.parse_args()
    boostmetric_wine(args.splits)
    scaling(args.dims)
    ccml_wine(args.repeats)


if __name__ == "__main__":
    main()
