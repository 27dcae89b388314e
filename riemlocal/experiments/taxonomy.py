r"""Ramanan & Baker's taxonomy table (how x where x when) on offline data.

Reproduces Tables II--IV of Ramanan & Baker (TPAMI 2011) on data that needs
no download:

* ``dataset="mnist"`` -- their sampled-MNIST protocol on the 5,000-image sample
  of :func:`~riemlocal.datasets.load_mnist_sample`: images deskewed
  (:func:`deskew`), PCA to 95 % variance fitted on each training batch, 10
  batches of 1,000 training and 1,000 test images; their numbers
  (:data:`PAPER_MNIST`) are printed beside ours;
* ``dataset="digits-wine"`` -- scikit-learn's 8x8 ``digits`` (PCA to 95 %
  variance, the MNIST protocol scaled down) and ``wine`` (13 chemical
  features, standardized on each training batch).

Each of ``n_batches`` batches draws a random stratified train/test
subsample. Every cell is one :class:`~riemlocal.neighbors.LocalMetricKNN`
(3-NN on a 20-candidate global shortlist, as in the paper):

============  =============================  ====================================
when \\ where  Global / Class                 Train / Test / Line
============  =============================  ====================================
offline       ``where="global"`` / ``"class"``  N/A (Train offline: "small DB only")
online        (as offline)                   ``where="lazy"``, rule train / test
interp        (as offline)                   ``where="reference"`` (NN interpolation
                                             of eq. 16-smoothed metrics), rule
                                             train / test / line (exact); Geodesic:
                                             the same metrics blended smoothly
                                             (``interpolation="rbf"``, eq. 14--15)
                                             and the certified geodesic distance
============  =============================  ====================================

The Geodesic cell is not in the paper: it asks what the exact distance of a
smooth field of the interp metrics gains over the straight line. Its cell
counts the geodesic distances left uncertified (``n_uncertified`` of
``n_pairs``). It is not run on wine and MNIST (:data:`NO_GEODESIC`).

How: ``LDA`` (LDA global and local), ``LMNN`` (LMNN global and local; the
per-class metrics are learned jointly, eq. 8) and ``Hybrid`` (LMNN global
metric for the shortlist and the placement, LDA local metrics).

Sizes (default / ``quick``): MNIST 1,000 / 500 training and test images,
digits 250 / 150 training and 80 / 40 test points, wine 118 training and 60
test points; 10 / 2 batches; ``R = 20`` reference points; ``quick`` leaves out
the LMNN *how*. Every table has a Euclidean 3-NN baseline row. To fit in a few minutes on two cores, LMNN is
budgeted: ``max_iter=200`` for global metrics, 100 for the joint per-class
fit and 20 for local fits, and the LMNN *online* cells (one LMNN fit per
query or shortlisted exemplar) are scored on the first ``n_online_lmnn``
test points of each batch only. Times are seconds for fit + predict of the
cell's classifier per batch, given the batch's global metric (learned once
per batch and how; its fit time is reported separately); the three
reference-point rules share one fit, whose time is counted in each; the
Geodesic cell fits its own (the same metrics: the placement is deterministic).
"""

import json
import time
import warnings
from pathlib import Path

import numpy as np
from joblib import Parallel, delayed
from matplotlib.figure import Figure
from sklearn.base import BaseEstimator, clone
from scipy import ndimage
from sklearn.datasets import load_digits, load_wine
from sklearn.decomposition import PCA
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import train_test_split
from sklearn.neighbors import KNeighborsClassifier
from sklearn.preprocessing import StandardScaler
from tqdm.auto import tqdm

from ..datasets import load_mnist_sample
from ..learners import LDAMetric, LMNNMetric
from ..neighbors import LocalMetricKNN
from ..numerics import EnergyLogSolver
from ..utils.validation import check_n_jobs

__all__ = ["run_taxonomy", "render_taxonomy", "plot_taxonomy", "deskew", "DATASETS", "PAPER_MNIST"]

DATASETS = ("digits-wine", "mnist")

WHERE = ("Global", "Class", "Train", "Test", "Line", "Geodesic")
WHEN = ("offline", "online", "interp")
HOWS = ("LDA", "LMNN", "Hybrid")
#: what each *how* learns (see ``_learners``): the global metric picks the shortlist and places the local ones
HOW_DESCRIPTIONS = {
    "LDA": "LDA global and local metrics",
    "LMNN": "LMNN global and local metrics",
    "Hybrid": "LMNN global metric, LDA local metrics",
}
#: (where, when) -> LocalMetricKNN settings; the paper's defined cells
CELLS = {
    ("Global", "offline"): dict(where="global", rule="test"),
    ("Class", "offline"): dict(where="class", rule="train"),
    ("Train", "online"): dict(where="lazy", rule="train"),
    ("Test", "online"): dict(where="lazy", rule="test"),
    ("Train", "interp"): dict(where="reference", rule="train"),
    ("Test", "interp"): dict(where="reference", rule="test"),
    ("Line", "interp"): dict(where="reference", rule="line"),
    ("Geodesic", "interp"): dict(where="reference", rule="geodesic", interpolation="rbf"),
}
#: data sets without the Geodesic cell: their interp metrics (LDA) are near-singular, condition numbers up to 6e6
#: (wine) and 1.7e5 (MNIST, 1,000 training images), far above CONDITION_WARNING = 1e3, and one certified geodesic
#: took about 2 s on either (loaded machine); on digits (condition <= 331) it took 3 ms
NO_GEODESIC = ("wine", "mnist")


#: Ramanan & Baker's sampled-MNIST recognition rates (Tables II-IV): how -> (where, when) -> (mean, std) %
PAPER_MNIST = {
    how: dict(zip(CELLS, rates))
    for how, rates in {
        "LDA": [(92.4, 0.9), (93.7, 1.0), (92.8, 0.8), (93.6, 0.9), (92.7, 0.7), (92.5, 0.7), (92.6, 0.7)],
        "LMNN": [(92.4, 1.2), (94.4, 0.8), (92.8, 0.7), (93.1, 1.2), (93.5, 0.8), (93.5, 0.8), (93.5, 0.8)],
        "Hybrid": [(92.4, 1.2), (93.8, 0.9), (92.9, 0.8), (93.7, 0.8), (92.6, 0.7), (92.5, 0.7), (92.6, 0.8)],
    }.items()
}
N_NEIGHBORS, SHORTLIST, N_REFERENCES = 3, 20, 20


def deskew(images):
    r"""Shear each image so that its pixel mass has no row--column covariance, centred.

    With the centre of mass :math:`(\bar r, \bar c)` and the second moments of
    the grey levels, the shear :math:`c \mapsto c + \alpha (r - \bar r)`,
    :math:`\alpha = \operatorname{cov}(r, c) / \operatorname{var}(r)`, makes the
    digit upright (LeCun et al., Proc. IEEE 1998; Ramanan & Baker, sec. 6); the
    centre of mass moves to the image centre. Bilinear interpolation.

    Parameters
    ----------
    images : ndarray of shape (n_images, height, width)

    Returns
    -------
    ndarray of shape (n_images, height, width)
    """
    images = np.asarray(images, dtype=float)
    if images.ndim != 3:
        raise ValueError(f"images must have shape (n_images, height, width), got {images.shape}")
    rows, cols = np.indices(images.shape[1:], dtype=float)
    center = (np.array(images.shape[1:]) - 1.0) / 2.0
    result = np.empty_like(images)
    for i, image in enumerate(images):
        mass = image.sum()
        if mass <= 0:
            result[i] = image
            continue
        r, c = (rows * image).sum() / mass, (cols * image).sum() / mass
        alpha = ((rows - r) * (cols - c) * image).sum() / ((rows - r) ** 2 * image).sum()
        shear = np.array([[1.0, 0.0], [alpha, 1.0]])
        result[i] = ndimage.affine_transform(image, shear, offset=np.array([r, c]) - shear @ center, order=1)
    return result


class FixedMetric(BaseEstimator):
    """A "learner" returning a given metric: lets the cells of a batch share one global fit."""

    def __init__(self, metric=None):
        self.metric = metric

    def fit(self, X, y, sample_weight=None):
        self.metric_ = np.asarray(self.metric, dtype=float)
        return self


def _datasets(dataset, quick):
    """Name -> (X, y, n_train, n_test, preprocessing)."""
    if dataset == "mnist":
        sample = load_mnist_sample()
        n = 500 if quick else 1000
        return {"mnist": (deskew(sample.images).reshape(len(sample.target), -1), sample.target, n, n, "deskew + pca")}
    digits = load_digits(return_X_y=True)
    wine = load_wine(return_X_y=True)
    if quick:
        return {"digits": (*digits, 150, 40, "pca"), "wine": (*wine, 118, 60, "standardize")}
    return {"digits": (*digits, 250, 80, "pca"), "wine": (*wine, 118, 60, "standardize")}


def _preprocess(kind, X_train, X_test):
    model = PCA(n_components=0.95, svd_solver="full") if kind.endswith("pca") else StandardScaler()
    model.fit(X_train)
    return model.transform(X_train), model.transform(X_test)


def _learners(how):
    """(global learner, local learner, per-class learner) of one *how*."""
    lda = LDAMetric()
    if how == "LDA":
        return lda, lda, lda
    global_lmnn = LMNNMetric(max_iter=200)
    if how == "Hybrid":
        return global_lmnn, lda, lda
    return global_lmnn, LMNNMetric(max_iter=20), LMNNMetric(per_class=True, max_iter=100)


class SolverRecord:
    """A ``log_solver`` of :class:`~riemlocal.neighbors.LocalMetricKNN` that keeps its solvers to count certificates."""

    def __init__(self):
        self.solvers = []

    def __call__(self, field):
        self.solvers.append(EnergyLogSolver(field))
        return self.solvers[-1]

    def counts(self):
        """Geodesic distances solved and those left uncertified, over every solver built."""
        solved = [solver.last_result_.converged.ravel() for solver in self.solvers if hasattr(solver, "last_result_")]
        converged = np.concatenate([np.ones(0, dtype=bool), *solved])  # no solver called: nothing solved
        return converged.size, int(np.count_nonzero(~converged))


def _batch(data, batch, seed):
    """``X_train, X_test, y_train, y_test`` of one batch: a stratified draw, preprocessed on its training points."""
    X, y, n_train, n_test, kind = data
    X_train, X_test, y_train, y_test = train_test_split(
        X, y, train_size=n_train, test_size=n_test, stratify=y, random_state=seed + batch
    )
    return (*_preprocess(kind, X_train, X_test), y_train, y_test)


def _classifier(global_metric, local_learner, params, n_references, random_state, log_solver=None):
    """The unfitted :class:`~riemlocal.neighbors.LocalMetricKNN` of a cell (``params`` of :data:`CELLS`)."""
    return LocalMetricKNN(
        FixedMetric(global_metric),
        local_learner=local_learner,
        n_neighbors=N_NEIGHBORS,
        shortlist=SHORTLIST,
        n_references=n_references,
        log_solver=log_solver,
        random_state=random_state,
        **params,
    )


def _run_batch(name, data, batch, seed, n_online_lmnn, n_references, hows):
    X_train, X_test, y_train, y_test = _batch(data, batch, seed)
    start = time.perf_counter()
    accuracy = KNeighborsClassifier(N_NEIGHBORS).fit(X_train, y_train).score(X_test, y_test)
    results = {("Euclidean", "3-NN"): (100 * accuracy, time.perf_counter() - start)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # uncertified geodesics are counted instead
        for how in hows:
            global_learner, local_learner, class_learner = _learners(how)
            start = time.perf_counter()
            global_metric = clone(global_learner).fit(X_train, y_train).metric_
            results[(how, "global fit")] = (np.nan, time.perf_counter() - start)
            online_limit = n_online_lmnn if how == "LMNN" else len(X_test)
            fitted = {}
            for (where, when), params in CELLS.items():
                if where == "Geodesic" and name in NO_GEODESIC:
                    continue
                record = SolverRecord() if params["rule"] == "geodesic" else None
                local = class_learner if where == "Class" else local_learner
                clf = _classifier(global_metric, local, params, n_references, seed + batch, record)
                queries, truth = (X_test[:online_limit], y_test[:online_limit]) if when == "online" else (X_test, y_test)
                field = (params["where"], params.get("interpolation"))
                start = time.perf_counter()
                if field[0] == "reference" and field in fitted:  # the rules of one reference field share its fit
                    clf, fit_time = fitted[field]
                    clf.set_params(rule=params["rule"])
                else:
                    clf.fit(X_train, y_train)
                    fit_time = time.perf_counter() - start
                    fitted[field] = (clf, fit_time)
                start = time.perf_counter()
                accuracy = clf.score(queries, truth)
                counts = () if record is None else record.counts()
                results[(how, where, when)] = (100 * accuracy, fit_time + time.perf_counter() - start, *counts)
    return name, batch, results


def run_taxonomy(
    quick=False, seed=0, n_jobs=None, verbose=True, out=None, n_batches=None, n_online_lmnn=10, dataset="digits-wine"
):
    """Run the taxonomy experiment and return its numbers and markdown table.

    Parameters
    ----------
    quick : bool, default=False
        2 batches, smaller digits subsamples and no LMNN *how* (well under a minute).
    seed : int, default=0
        Seed of the train/test draws and reference points.
    n_jobs : int, default=None
        Batches run in parallel through joblib.
    verbose : bool, default=True
        Progress bar over batches.
    out : str or Path, default=None
        Directory receiving ``taxonomy.md``, ``taxonomy.json`` and one
        ``taxonomy_<data set>.png`` per data set (:func:`plot_taxonomy`).
    n_batches : int, default=None
        Number of random batches (``None``: 10, or 2 with ``quick``).
    n_online_lmnn : int, default=10
        Test points per batch scored by the LMNN online cells.
    dataset : {"digits-wine", "mnist"}, default="digits-wine"
        ``"mnist"`` needs the ``data`` extra (:func:`~riemlocal.datasets.load_mnist_sample`).

    Returns
    -------
    result : dict
        ``cells``: ``{"dataset/how/where/when": {"accuracy", "accuracy_std", "time", "time_std", "n_batches"}}``,
        the Geodesic cells also ``n_pairs`` and ``n_uncertified`` (geodesic distances solved and left
        uncertified, summed over batches);
        ``datasets``: sizes; ``checks``: the paper's qualitative expectations
        (per-class >= global, lazy >= global, global <= line <= lazy) per data
        set and how; ``paper``: Ramanan & Baker's rates (MNIST); ``settings``;
        ``markdown``: the rendered tables. ``cells`` also holds the Euclidean
        3-NN baseline as ``"dataset/Euclidean/3-NN"``.
    """
    if dataset not in DATASETS:
        raise ValueError(f"dataset must be one of {DATASETS}, got {dataset!r}")
    n_batches = (2 if quick else 10) if n_batches is None else int(n_batches)
    datasets = _datasets(dataset, quick)
    hows = ("LDA", "Hybrid") if quick else HOWS
    tasks = [(name, data, batch) for name, data in datasets.items() for batch in range(n_batches)]
    runs = Parallel(n_jobs=check_n_jobs(n_jobs), return_as="generator")(
        delayed(_run_batch)(name, data, batch, seed, n_online_lmnn, N_REFERENCES, hows) for name, data, batch in tasks
    )
    collected = {}
    for name, _, results in tqdm(runs, total=len(tasks), disable=not verbose, desc="taxonomy batches"):
        for key, value in results.items():
            collected.setdefault((name,) + key, []).append(value)
    cells = {}
    for key, values in collected.items():
        values = np.array(values)
        scored = key[-1] != "global fit"
        cells["/".join(key)] = {
            "accuracy": float(np.mean(values[:, 0])) if scored else None,
            "accuracy_std": float(np.std(values[:, 0])) if scored else None,
            "time": float(np.mean(values[:, 1])),
            "time_std": float(np.std(values[:, 1])),
            "n_batches": len(values),
        }
        if values.shape[1] > 2:  # a geodesic cell: distances solved and left uncertified, over all batches
            cells["/".join(key)].update(zip(("n_pairs", "n_uncertified"), map(int, values[:, 2:].sum(axis=0))))
    result = {
        "datasets": {
            name: {"n_train": data[2], "n_test": data[3], "preprocessing": data[4]} for name, data in datasets.items()
        },
        "n_batches": n_batches,
        "hows": list(hows),
        "n_online_lmnn": n_online_lmnn if "LMNN" in hows else 0,
        "cells": cells,
        "checks": _checks(cells, datasets, hows),
        "paper": {"mnist": {how: {"/".join(cell): rate for cell, rate in PAPER_MNIST[how].items()} for how in hows}}
        if dataset == "mnist"
        else {},
        "settings": {
            "dataset": dataset,
            "quick": quick,
            "seed": seed,
            "n_batches": n_batches,
            "n_neighbors": N_NEIGHBORS,
            "shortlist": SHORTLIST,
            "n_references": N_REFERENCES,
            "pca_variance": 0.95,
            "deskew": dataset == "mnist",
            "lmnn_max_iter": {"global": 200, "per_class": 100, "local": 20},
        },
    }
    result["markdown"] = render_taxonomy(result)
    if out is not None:
        out = Path(out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "taxonomy.md").write_text(result["markdown"])
        (out / "taxonomy.json").write_text(json.dumps(result, indent=2))
        for name in datasets:
            plot_taxonomy(result, name).savefig(out / f"taxonomy_{name}.png", dpi=110)
    return result


def _checks(cells, datasets, hows):
    def accuracy(name, how, where, when):
        return cells[f"{name}/{how}/{where}/{when}"]["accuracy"]

    checks = {}
    for name in datasets:
        for how in hows:
            glob = accuracy(name, how, "Global", "offline")
            lazy = accuracy(name, how, "Test", "online")
            line = accuracy(name, how, "Line", "interp")
            checks[f"{name}/{how}"] = {
                "class >= global": accuracy(name, how, "Class", "offline") >= glob,
                "lazy >= global": lazy >= glob,
                "line >= global": line >= glob,
                "line < lazy": line < lazy,
            }
    return checks


def _paper_comparison(cells, name, how, paper):
    """Rows: ours beside Ramanan & Baker's, cells more than 1.5 points apart marked."""
    lines = [
        f"Beside Ramanan & Baker's sampled-MNIST {how} table (** : more than 1.5 points apart)\n",
        "| cell | ours | paper | ours - paper |",
        "|---|---|---|---|",
    ]
    for cell, (mean, std) in paper.items():
        ours = cells.get(f"{name}/{how}/{cell}")
        if ours is None:
            continue
        gap = ours["accuracy"] - mean
        mark = " **" if abs(gap) > 1.5 else ""
        lines.append(
            f"| {cell.replace('/', ' ')} | {ours['accuracy']:.1f} ± {ours['accuracy_std']:.1f} | {mean} ± {std} | "
            f"{gap:+.1f}{mark} |"
        )
    return [*lines, ""]


def plot_taxonomy(result, name):
    """Recognition rate by where x when, one panel per how, error bars one std over batches; Euclidean baseline line.

    Ramanan & Baker's rates (mean +- std) are drawn as diamonds beside the bars when ``result["paper"]`` has them.
    """
    cells, hows = result["cells"], result["hows"]
    figure = Figure(figsize=(4.2 * len(hows), 4.6), layout="constrained")  # outside pyplot: the backend is left alone
    axes = figure.subplots(1, len(hows), squeeze=False, sharey=True)[0]
    base = cells[f"{name}/Euclidean/3-NN"]
    width = 0.8 / len(WHEN)
    rates = [c["accuracy"] for k, c in cells.items() if k.startswith(f"{name}/") and c["accuracy"] is not None]
    for ax, how in zip(axes, hows):
        paper = result.get("paper", {}).get(name, {}).get(how, {})
        paper_x, paper_rate, paper_error = [], [], []
        for j, when in enumerate(WHEN):
            x, rate, error = [], [], []
            for i, where in enumerate(WHERE):
                cell = cells.get(f"{name}/{how}/{where}/{when}")
                if cell is not None:
                    x.append(i + (j - 1) * width)
                    rate.append(cell["accuracy"])
                    error.append(cell["accuracy_std"])
                if f"{where}/{when}" in paper:
                    paper_x.append(i + (j - 1) * width + 0.25 * width)
                    paper_rate.append(paper[f"{where}/{when}"][0])
                    paper_error.append(paper[f"{where}/{when}"][1])
            ax.bar(x, rate, width, yerr=error, capsize=3, color=f"C{j}", label=when)
        if paper:
            ax.errorbar(paper_x, paper_rate, yerr=paper_error, fmt="D", ms=5, mfc="white", mec="k", ecolor="0.3",
                        label="Ramanan & Baker (paper)")
            rates = rates + paper_rate
        ax.axhline(base["accuracy"], color="k", linestyle="--", linewidth=1, label="Euclidean 3-NN")
        ax.axhspan(base["accuracy"] - base["accuracy_std"], base["accuracy"] + base["accuracy_std"], color="k", alpha=0.08)
        ax.set_xticks(range(len(WHERE)), WHERE)
        ax.set(xlabel="where the metrics are placed", ylabel="recognition rate (%)")
        ax.set_title(f"{how}: {HOW_DESCRIPTIONS[how]}", fontsize=10)
    axes[0].set_ylim(max(0.0, min(rates) - 5.0), min(100.0, max(rates) + 3.0))
    figure.suptitle(
        f"{name}: 3-NN recognition rate by how the local metrics are learned (panels),\n"
        "where they are placed (x axis) and when they are applied (colours)"
    )
    legend_title = "when the local metric is applied; error bars and grey band: one std over batches"
    figure.legend(*axes[-1].get_legend_handles_labels(), loc="outside lower center", ncols=5, fontsize=8,
                  title=legend_title, title_fontsize=8)
    return figure


def render_taxonomy(result):
    """Markdown tables (one per data set and how): recognition rate +- std and seconds per batch."""
    cells, lines = result["cells"], []
    lines.append(
        f"# Local distance taxonomy (Ramanan & Baker 2011): {result['n_batches']} batches, 3-NN on a 20-candidate "
        "global shortlist; recognition rate % (mean +- std) and seconds (fit + predict per batch)\n"
    )
    skipped = [name for name in result["datasets"] if name in NO_GEODESIC]
    lines.append(
        "Geodesic (not in the paper): certified geodesic distance on the RBF blend (eq. 14-15) of the interp "
        "metrics, with the count of distances left uncertified"
        + (f"; not run on {', '.join(skipped)} (near-singular local metrics: seconds per geodesic)" if skipped else "")
        + ".\n"
    )
    for name, sizes in result["datasets"].items():
        for how in result["hows"]:
            glob = cells[f"{name}/{how}/global fit"]
            lines.append(
                f"## {name} ({sizes['n_train']} train / {sizes['n_test']} test, {sizes['preprocessing']}), {how} "
                f"({HOW_DESCRIPTIONS[how]}); "
                f"global metric fit {glob['time']:.2f} s\n"
            )
            lines.append("| when \\ where | " + " | ".join(WHERE) + " |")
            lines.append("|---" * (len(WHERE) + 1) + "|")
            for when in WHEN:
                row = []
                for where in WHERE:
                    cell = cells.get(f"{name}/{how}/{where}/{when}")
                    if cell is None:
                        same = where in ("Global", "Class") and when != "offline"
                        row.append("as offline" if same else "not run" if (where, when) in CELLS else "N/A")
                    else:
                        certificates = ""
                        if "n_pairs" in cell:  # a geodesic cell
                            certificates = f"; {cell['n_uncertified']} of {cell['n_pairs']} uncertified"
                        row.append(
                            f"{cell['accuracy']:.1f} ± {cell['accuracy_std']:.1f} ({cell['time']:.2f} s{certificates})"
                        )
                lines.append(f"| {when} | " + " | ".join(row) + " |")
            base = cells[f"{name}/Euclidean/3-NN"]
            lines.append(
                f"| Euclidean 3-NN (baseline) | {base['accuracy']:.1f} ± {base['accuracy_std']:.1f} ({base['time']:.2f} s) |"
                + " |" * (len(WHERE) - 1)
            )
            lines.append("")
            paper = result.get("paper", {}).get(name, {}).get(how)
            if paper:
                lines.extend(_paper_comparison(cells, name, how, paper))
    if result["n_online_lmnn"]:
        lines.append(f"LMNN online cells: first {result['n_online_lmnn']} test points of each batch.\n")
    lines.append("## Qualitative expectations of the paper\n")
    lines.append("| data / how | class >= global | lazy >= global | line >= global | line < lazy |")
    lines.append("|---|---|---|---|---|")
    for key, check in result["checks"].items():
        lines.append(f"| {key} | " + " | ".join("yes" if check[c] else "no" for c in check) + " |")
    return "\n".join(lines) + "\n"
