"""Compare riemlocal's metric learners, GLML, Euclidean and metric-learn by k-NN test error.

Two markdown tables (plus fit times):

1. ``learners`` -- 3-NN test error (mean +- std over stratified 70/30 splits)
   and fit time on iris, wine (raw and standardized), breast cancer
   (standardized) and digits (PCA-30 fitted on the training part), for the
   Euclidean metric, every learner of :mod:`riemlocal.learners`, the GLML field
   (3-NN with the metric at the query) and, when its environment exists,
   metric-learn (LMNN, NCA; ITML on request) run in
   ``.venv-metriclearn`` through ``_metric_learn_worker.py``.
2. ``glml`` -- Noh, Zhang & Lee, Fig. 3a: two Gaussian classes with fixed
   means and random covariances (random orthogonal eigenvectors, random
   eigenvalues), 500 training and 500 test points, 20 realizations, 1-NN
   accuracy of the Euclidean metric and of GLML (gamma by cross-validation on
   the training data, as the paper does for its other experiments, and
   ``gamma=1``).

Usage::

    python benchmarks/bench_learners.py [--quick] [--tables learners glml]
        [--datasets iris wine ...] [--learners euclidean LDAMetric glml ml-LMNN ...]

BLAS runs on one thread.
"""

import os

for _name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_name] = "1"

import argparse  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
from sklearn import datasets as sk_datasets  # noqa: E402
from sklearn.decomposition import PCA  # noqa: E402
from sklearn.model_selection import StratifiedKFold, StratifiedShuffleSplit  # noqa: E402
from sklearn.neighbors import KNeighborsClassifier  # noqa: E402
from sklearn.preprocessing import StandardScaler  # noqa: E402

from riemlocal import learners as rl_learners  # noqa: E402
from riemlocal.datasets import make_rotated_gaussians  # noqa: E402
from riemlocal.fields import GLMLField  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
WORKER = Path(__file__).with_name("_metric_learn_worker.py")
METRIC_LEARN_PYTHON = Path(os.environ.get("RIEMLOCAL_METRIC_LEARN_PYTHON", ROOT / ".venv-metriclearn/bin/python"))

DATASETS = ["iris", "wine", "wine-scaled", "breast_cancer-scaled", "digits-pca30"]
RIEMLOCAL_LEARNERS = ["LDAMetric", "LMNNMetric", "BoostMetric", "CCMLMetric"]
LEARNERS = ["euclidean", *RIEMLOCAL_LEARNERS, "glml", "ml-LMNN", "ml-NCA"]
OPTIONAL_LEARNERS = ["ml-ITML"]  # about 80 s per fit on digits
GAMMA_GRID = (0.01, 0.1, 1.0, 10.0, 100.0)


# ----------------------------------------------------------------------------- data


def load(name):
    """Features and labels of a dataset name (preprocessing suffixes are applied per split)."""
    base = name.split("-")[0]
    loader = {
        "iris": sk_datasets.load_iris,
        "wine": sk_datasets.load_wine,
        "breast_cancer": sk_datasets.load_breast_cancer,
        "digits": sk_datasets.load_digits,
    }[base]
    return loader(return_X_y=True)


def preprocess(name, X_train, X_test):
    """Standardize (``-scaled``) or project on 30 principal components (``-pca30``), fitted on the training part."""
    if name.endswith("-scaled"):
        scaler = StandardScaler().fit(X_train)
        return scaler.transform(X_train), scaler.transform(X_test)
    if name.endswith("-pca30"):
        pca = PCA(n_components=30, random_state=0).fit(X_train)
        return pca.transform(X_train), pca.transform(X_test)
    return X_train, X_test


def splits(name, n_splits):
    X, y = load(name)
    splitter = StratifiedShuffleSplit(n_splits=n_splits, test_size=0.3, random_state=0)
    for train, test in splitter.split(X, y):
        yield (*preprocess(name, X[train], X[test]), y[train], y[test])


# ----------------------------------------------------------------------------- k-NN with a metric at the query


def query_metric_scores(field, X_train, X_query, chunk=64):
    """Squared distances split into ``|d|^2`` and ``d^T A_opt(x) d`` (so every gamma reuses them)."""
    euclidean = np.empty((len(X_query), len(X_train)))
    generative = np.empty_like(euclidean)
    for start in range(0, len(X_query), chunk):
        part = X_query[start : start + chunk]
        diff = X_train[None] - part[:, None]
        euclidean[start : start + chunk] = np.einsum("qni,qni->qn", diff, diff)
        generative[start : start + chunk] = np.einsum("qni,qij,qnj->qn", diff, field.optimal_metric(part), diff)
    return euclidean, generative


def knn_vote(scores, y_train, n_neighbors):
    """Majority label of the ``n_neighbors`` smallest scores; ties go to the tied class met first (nearest)."""
    labels = y_train[np.argsort(scores, axis=1)[:, :n_neighbors]]
    classes = np.unique(y_train)
    index = np.searchsorted(classes, labels)
    votes = (index[:, :, None] == np.arange(classes.size)).sum(1)
    tied = votes == votes.max(1, keepdims=True)
    first = np.take_along_axis(tied, index, axis=1).argmax(1)
    return labels[np.arange(len(labels)), first]


def glml_predict(X_train, y_train, X_test, n_neighbors, reg_covar, gamma=None):
    """k-NN with the GLML metric at each query; ``gamma=None`` picks it by 3-fold cross-validation."""
    if gamma is None:
        errors = np.zeros(len(GAMMA_GRID))
        for fit, val in StratifiedKFold(3, shuffle=True, random_state=0).split(X_train, y_train):
            field = GLMLField(X_train[fit], y_train[fit], reg_covar=reg_covar)
            euclidean, generative = query_metric_scores(field, X_train[fit], X_train[val])
            for g, value in enumerate(GAMMA_GRID):
                predicted = knn_vote(value * euclidean + generative, y_train[fit], n_neighbors)
                errors[g] += np.mean(predicted != y_train[val])
        gamma = GAMMA_GRID[int(np.argmin(errors))]
    field = GLMLField(X_train, y_train, reg_covar=reg_covar)
    euclidean, generative = query_metric_scores(field, X_train, X_test)
    return knn_vote(gamma * euclidean + generative, y_train, n_neighbors), gamma


def relative_reg_covar(X_train, scale=1e-2):
    """Covariance ridge ``reg_covar = scale * tr(Cov(X)) / D`` (in squared data units)."""
    return scale * np.trace(np.atleast_2d(np.cov(X_train, rowvar=False))) / X_train.shape[1]


# ----------------------------------------------------------------------------- learners


def fit_riemlocal(name, X_train, y_train):
    learner = getattr(rl_learners, name)()
    params = learner.get_params()
    learner.set_params(**{key: value for key, value in (("random_state", 0), ("n_neighbors", 3), ("n_targets", 3)) if key in params})
    start = time.perf_counter()
    learner.fit(X_train, y_train)
    return learner.components_, time.perf_counter() - start


def fit_metric_learn(name, train_sets):
    """Components and fit times of a metric-learn learner for every split, or an explanation string."""
    if not METRIC_LEARN_PYTHON.exists():
        return (
            f"no metric-learn environment at {METRIC_LEARN_PYTHON}; create it with `python3 -m venv "
            f".venv-metriclearn && .venv-metriclearn/bin/pip install metric-learn==0.7.0 'scikit-learn<1.6'` "
            "or set RIEMLOCAL_METRIC_LEARN_PYTHON"
        )
    with tempfile.TemporaryDirectory() as tmp:
        path_in, path_out = Path(tmp, "in.npz"), Path(tmp, "out.npz")
        np.savez(path_in, **{f"{k}_{i}": v for i, (X, y) in enumerate(train_sets) for k, v in (("X", X), ("y", y))})
        run = subprocess.run(
            [str(METRIC_LEARN_PYTHON), str(WORKER), name, str(path_in), str(path_out)], capture_output=True, text=True
        )
        if run.returncode != 0:
            last_line = run.stderr.strip().splitlines()[-1] if run.stderr.strip() else f"exit code {run.returncode}"
            return f"metric-learn worker failed: {last_line}"
        out = np.load(path_out)
        return [(out[f"components_{i}"], out["fit_seconds"][i]) for i in range(len(train_sets))]


def evaluate(learner, dataset, n_splits, n_neighbors=3):
    """Test errors and fit times over the splits, or a string saying why the learner was skipped."""
    data = list(splits(dataset, n_splits))
    errors, seconds, notes = [], [], []
    if learner.startswith("ml-"):
        fitted = fit_metric_learn(learner[3:], [(X_train, y_train) for X_train, _, y_train, _ in data])
        if isinstance(fitted, str):
            return fitted
    for split, (X_train, X_test, y_train, y_test) in enumerate(data):
        if learner == "glml":
            start = time.perf_counter()
            predicted, gamma = glml_predict(X_train, y_train, X_test, n_neighbors, relative_reg_covar(X_train))
            seconds.append(time.perf_counter() - start)
            notes.append(gamma)
            errors.append(np.mean(predicted != y_test))
            continue
        if learner == "euclidean":
            components, fit_seconds = np.eye(X_train.shape[1]), 0.0
        elif learner.startswith("ml-"):
            components, fit_seconds = fitted[split]
        else:
            try:
                components, fit_seconds = fit_riemlocal(learner, X_train, y_train)
            except NotImplementedError:
                return "not implemented yet"
            except Exception as exc:  # report any failure in the table instead of aborting the benchmark
                return f"failed: {type(exc).__name__}: {exc}"
        knn = KNeighborsClassifier(n_neighbors).fit(X_train @ components.T, y_train)
        errors.append(np.mean(knn.predict(X_test @ components.T) != y_test))
        seconds.append(fit_seconds)
    return np.array(errors), np.array(seconds), notes


def learners_table(datasets, learners, n_splits):
    results, skipped = {}, {}
    for learner in learners:
        for dataset in datasets:
            print(f"  {learner} on {dataset} ...", file=sys.stderr, flush=True)
            outcome = evaluate(learner, dataset, n_splits)
            if isinstance(outcome, str):
                skipped[learner] = outcome
                break
            results[learner, dataset] = outcome
    header = "| learner | " + " | ".join(datasets) + " |"
    rule = "|---|" + "---|" * len(datasets)
    print(f"\n### 3-NN test error (%), mean ± std over {n_splits} stratified 70/30 splits\n")
    print(header, rule, sep="\n")
    for learner in learners:
        if learner in skipped:
            continue
        errors = [100 * results[learner, d][0] for d in datasets]
        cells = [f"{e.mean():.1f} ± {e.std():.1f}" for e in errors]
        print(f"| {learner} | " + " | ".join(cells) + " |")
    print("\n### Mean fit time (s) per split (glml: cross-validation of gamma + prediction)\n")
    print(header, rule, sep="\n")
    for learner in learners:
        if learner in skipped:
            continue
        print(f"| {learner} | " + " | ".join(f"{results[learner, d][1].mean():.3g}" for d in datasets) + " |")
    if "glml" in learners and "glml" not in skipped:
        print("\nGLML gamma chosen by 3-fold CV: " + "; ".join(f"{d}: {results['glml', d][2]}" for d in datasets))
    for learner, reason in skipped.items():
        print(f"\nSkipped {learner}: {reason}")


# ----------------------------------------------------------------------------- Fig. 3a


def glml_table(dims, n_realizations, reg_covar=1e-3):
    rows = []
    for dim in dims:
        acc = {"euclidean": [], "glml (gamma=1)": [], "glml (CV gamma)": []}
        gammas = []
        start = time.perf_counter()
        for seed in range(n_realizations):
            X_train, y_train, X_test, y_test = make_rotated_gaussians(dim, random_state=np.random.default_rng(seed))
            euclidean = ((X_test[:, None] - X_train[None]) ** 2).sum(-1)
            acc["euclidean"].append(np.mean(y_train[euclidean.argmin(1)] == y_test))
            field = GLMLField(X_train, y_train, reg_covar=reg_covar)
            _, generative = query_metric_scores(field, X_train, X_test)
            acc["glml (gamma=1)"].append(np.mean(y_train[(euclidean + generative).argmin(1)] == y_test))
            predicted, gamma = glml_predict(X_train, y_train, X_test, 1, reg_covar)
            acc["glml (CV gamma)"].append(np.mean(predicted == y_test))
            gammas.append(gamma)
        rows.append((dim, {k: np.array(v) for k, v in acc.items()}, gammas, time.perf_counter() - start))
        print(f"  Fig. 3a, D={dim} done", file=sys.stderr, flush=True)
    print(
        f"\n### Noh et al. Fig. 3a: 1-NN accuracy (%), two Gaussian classes, 500 train / 500 test, "
        f"mean ± std over {n_realizations} realizations (reg_covar={reg_covar})\n"
    )
    print("| D | Euclidean | GLML, gamma=1 | GLML, CV gamma | gain (CV) | CV gammas (median) | time (s) |")
    print("|---|---|---|---|---|---|---|")
    for dim, acc, gammas, seconds in rows:
        cells = [f"{100 * acc[k].mean():.1f} ± {100 * acc[k].std():.1f}" for k in acc]
        gain = 100 * (acc["glml (CV gamma)"] - acc["euclidean"]).mean()
        print(f"| {dim} | " + " | ".join(cells) + f" | {gain:+.1f} | {np.median(gammas):g} | {seconds:.1f} |")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="3 splits / 5 realizations, two datasets, D=20 only")
    parser.add_argument("--tables", nargs="+", choices=["learners", "glml"], default=["learners", "glml"])
    parser.add_argument("--datasets", nargs="+", choices=DATASETS + ["breast_cancer"])
    parser.add_argument("--learners", nargs="+", choices=LEARNERS + OPTIONAL_LEARNERS)
    parser.add_argument("--splits", type=int, help="number of random splits (default 10, 3 with --quick)")
    parser.add_argument("--dims", nargs="+", type=int, help="dimensions of the Fig. 3a table (default 5 10 20 50)")
    args = parser.parse_args(argv)
    datasets = args.datasets or (["iris", "wine-scaled"] if args.quick else DATASETS)
    learners = args.learners or LEARNERS
    n_splits = args.splits or (3 if args.quick else 10)
    if "learners" in args.tables:
        learners_table(datasets, learners, n_splits)
    if "glml" in args.tables:
        glml_table(args.dims or ([20] if args.quick else [5, 10, 20, 50]), 5 if args.quick else 20)


if __name__ == "__main__":
    main()
