r"""Body-shape regression and PGA with a learned Riemannian metric (Hauberg, Freifeld & Black 2012, sec. 4.1).

Protocol, per measurement (shoulder-to-wrist distance and shoulder breadth by default):

1. whiten the shape coefficients (zero mean, identity covariance), so that all
   variance PGA finds comes from the learned metric;
2. sort the bodies by the measurement and split them into ``n_clusters``
   equal-sized clusters;
3. learn one LMNN metric per cluster, jointly (``LMNNMetric(per_class=True)``,
   the multiple-metric LMNN), each placed at its cluster mean;
4. blend them into a :class:`~riemlocal.fields.SmoothLocalField` (eq. 6) and
   build the :class:`~riemlocal.manifold.LearnedMetricManifold`;
5. Fréchet mean, Log maps of all bodies and PGA (computed once, on all
   bodies, as in the paper);
6. leave-one-out linear regression of the measurement on the first
   :math:`d = 1, \dots, 10` principal geodesic coordinates, against the
   Euclidean baseline: the first :math:`d` principal components of the
   *unwhitened* coefficients (after whitening every direction has unit
   variance and Euclidean PCA is arbitrary). Leave-one-out residuals use the
   hat matrix, :math:`e_i / (1 - h_{ii})`, exactly.

Steps 2--5 use the targets of all bodies, so the left-out body's own
measurement has shaped the metric that predicts it (target leakage). The
leakage-free protocol reported beside it runs steps 1--6 inside each fold of a
K-fold cross-validation: whitening, clusters (from training targets only),
metrics, Fréchet mean, PGA, PCA and regression see only the training fold;
test bodies are whitened with the training map and mapped by the training
Log at the training mean.

Data: :func:`~riemlocal.datasets.make_body_shapes` (the CAESAR scans are not
redistributable), the 507 real adults of
:func:`~riemlocal.datasets.load_body_measurements` (21 diameters and girths as
the shape; weight and height as targets) or a user's own data from
:func:`~riemlocal.datasets.load_body_shapes_csv`.
"""

import json
import time
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure
from sklearn.model_selection import KFold
from tqdm.auto import tqdm

from ..datasets import make_body_shapes
from ..fields import SmoothLocalField
from ..learners import LMNNMetric, condition_metric
from ..learning import PrincipalGeodesicAnalysis
from ..manifold import LearnedMetricManifold
from ..utils.parallel import parallel_imap

__all__ = [
    "run_bodyshape",
    "equal_size_clusters",
    "loo_absolute_errors",
    "plot_errors",
    "plot_embeddings",
    "plot_principal_geodesics",
]


def equal_size_clusters(values, n_clusters):
    """Labels ``0 .. n_clusters-1`` of equal-sized groups of ``values`` sorted in increasing order."""
    order = np.argsort(values, kind="stable")
    labels = np.empty(len(values), dtype=int)
    for label, members in enumerate(np.array_split(order, n_clusters)):
        labels[members] = label
    return labels


def loo_absolute_errors(features, target):
    r"""Leave-one-out absolute errors of least squares with intercept, :math:`|e_i| / (1 - h_{ii})`."""
    design = np.hstack([np.ones((len(features), 1)), features])
    q, _ = np.linalg.qr(design)
    leverage = np.sum(q**2, axis=1)
    residuals = target - q @ (q.T @ target)
    return np.abs(residuals) / (1.0 - leverage)


def _whiten(X):
    """Return the mean and the map ``W`` with ``(X - mean) W`` of identity covariance."""
    mean = X.mean(axis=0)
    _, singular, vt = np.linalg.svd(X - mean, full_matrices=False)
    return mean, vt.T / singular * np.sqrt(len(X) - 1)


def _learned_pga(whitened, measurement, n_clusters, rho, max_dim, seed):
    """Steps 2-4: equal-sized clusters by ``measurement``, LMNN per cluster, smooth field; an unfitted PGA on it."""
    labels = equal_size_clusters(measurement, n_clusters)
    lmnn = LMNNMetric(per_class=True, random_state=seed).fit(whitened, labels)
    metrics = np.array([condition_metric(metric, normalize=False) for metric in lmnn.metrics_])
    centers = np.array([whitened[labels == k].mean(axis=0) for k in range(n_clusters)])
    space = LearnedMetricManifold(SmoothLocalField(centers, metrics, rho=rho))
    return PrincipalGeodesicAnalysis(space, n_components=max_dim), lmnn, labels


def _linear_errors(train_features, train_target, test_features, test_target):
    """Absolute test errors of least squares with intercept fitted on the training rows."""
    design = np.hstack([np.ones((len(train_features), 1)), train_features])
    coef = np.linalg.lstsq(design, train_target, rcond=None)[0]
    return np.abs(test_target - np.hstack([np.ones((len(test_features), 1)), test_features]) @ coef)


def _fit(X, measurement, fold, n_clusters, rho, max_dim, seed):
    """Steps 1-5 on all bodies (``fold=None``, the paper's protocol) or on the training part of ``fold = (train, test)``.

    All bodies: a dict of the fitted PGA, LMNN iterations, cluster labels, whitening, PGA
    coordinates and seconds. A fold: the absolute test errors, shape ``(2, max_dim, len(test))``
    (Euclidean PCA, then learned PGA, with d = 1..max_dim components), and seconds.
    """
    start = time.perf_counter()
    train, test = (slice(None), None) if fold is None else fold
    mean, whitening = _whiten(X[train])
    whitened = (X[train] - mean) @ whitening
    pga, lmnn, labels = _learned_pga(whitened, measurement[train], n_clusters, rho, max_dim, seed)
    riemannian = pga.fit_transform(whitened)
    if fold is None:
        fitted = {"pga": pga, "lmnn_iterations": lmnn.n_iter_, "labels": labels, "mean": mean, "whitening": whitening}
        return {**fitted, "riemannian": riemannian, "seconds": time.perf_counter() - start}
    riemannian = (riemannian, pga.transform((X[test] - mean) @ whitening))
    vt = np.linalg.svd(X[train] - mean, full_matrices=False)[2][:max_dim]
    euclidean = ((X[train] - mean) @ vt.T, (X[test] - mean) @ vt.T)
    errors = [
        [_linear_errors(fit[:, :d], measurement[train], held_out[:, :d], measurement[test]) for d in range(1, max_dim + 1)]
        for fit, held_out in (euclidean, riemannian)
    ]
    return np.array(errors), time.perf_counter() - start


def _summary(data, measurement, full, folds, fold_results, max_dim):
    """Numbers of one measurement from its fit on all bodies (``full``) and its folds' errors."""
    dims = list(range(1, max_dim + 1))
    centered = data.data - full["mean"]
    _, singular, vt = np.linalg.svd(centered, full_matrices=False)
    euclidean, riemannian = centered @ vt[:max_dim].T, full["riemannian"]
    errors = {
        "euclidean": [float(loo_absolute_errors(euclidean[:, :d], measurement).mean()) for d in dims],
        "riemannian": [float(loo_absolute_errors(riemannian[:, :d], measurement).mean()) for d in dims],
    }
    fold_errors = np.zeros((2, max_dim, len(measurement)))
    for (_, test), (fold, _) in zip(folds, fold_results):
        fold_errors[:, :, test] = fold

    # measurements predicted (linear model on all coefficients) along the first principal directions
    t = np.linspace(-3.0, 3.0, 13)  # the data range; at the paper's ±7 std the geodesics leave the data
    start = time.perf_counter()
    geodesic = full["pga"].principal_geodesic(0, t) @ np.linalg.pinv(full["whitening"]) + full["mean"]
    geodesic_seconds = time.perf_counter() - start
    line = full["mean"] + t[:, None] * (singular[0] / np.sqrt(len(centered) - 1)) * vt[0]
    design = np.hstack([np.ones((len(data.data), 1)), data.data])
    coef = np.linalg.lstsq(design, data.target, rcond=None)[0]
    along = {
        "t": t.tolist(),
        "riemannian": (np.hstack([np.ones((len(t), 1)), geodesic]) @ coef).tolist(),
        "euclidean": (np.hstack([np.ones((len(t), 1)), line]) @ coef).tolist(),
    }
    summary = {
        "dims": dims,
        "mae": errors,
        "mae_cross_validated": dict(zip(("euclidean", "riemannian"), fold_errors.mean(axis=2).tolist())),
        "mae_all_coefficients": float(loo_absolute_errors(data.data, measurement).mean()),
        "std": float(measurement.std()),
        "explained_variance_ratio": full["pga"].explained_variance_ratio_.tolist(),
        "frechet_iterations": int(full["pga"].n_iter_),
        "lmnn_iterations": int(full["lmnn_iterations"]),
        "along_first_direction": along,
        "timings": {  # seconds of each fit (in whichever worker ran it)
            "lmnn_and_pga": full["seconds"],
            "cross_validation": float(sum(seconds for _, seconds in fold_results)),
            "principal_geodesic": geodesic_seconds,
        },
    }
    arrays = {"labels": full["labels"], "measurement": measurement, "euclidean": euclidean[:, :2], "riemannian": riemannian[:, :2]}
    return summary, arrays


def _markdown(results, n_samples, units, n_folds):
    names = list(results)
    header = "| principal geodesics | " + " | ".join(f"{n} Euclidean | {n} Riemannian" for n in names) + " |"
    rule = "|---:|" + "---:|---:|" * len(names)
    unit = ", ".join(f"{n} in {units.get(n, 'mm')}" for n in names)

    def table(key, title):
        rows = [
            f"| {d} | "
            + " | ".join(f"{results[n][key]['euclidean'][i]:.2f} | {results[n][key]['riemannian'][i]:.2f}" for n in names)
            + " |"
            for i, d in enumerate(results[names[0]]["dims"])
        ]
        return [title, "", header, rule, *rows]

    full = "| all coefficients | " + " | ".join(f"{results[n]['mae_all_coefficients']:.2f} | " for n in names) + " |"
    paper = table(
        "mae",
        f"Paper's protocol: leave-one-out mean absolute error ({unit}), {n_samples} bodies, PCA (Euclidean) vs PGA "
        "(learned metric); clusters, metrics and PGA from all bodies, so the left-out target shapes its own metric",
    )
    clean = table(
        "mae_cross_validated",
        f"Leakage-free: {n_folds}-fold cross-validated mean absolute error ({unit}); whitening, clusters (from training "
        "targets only), metrics, PGA, PCA and regression fitted on each training fold",
    )
    return "\n".join([*paper, full, "", *clean])


# The plots are matplotlib Figures outside pyplot: the user's backend is left alone.
def plot_errors(result):
    """Mean absolute error against the number of principal geodesics, both protocols, one panel per measurement."""
    names = list(result["measurements"])
    units = result.get("units", {})
    figure = Figure(figsize=(4.5 * len(names), 3.6), layout="constrained")
    axes = figure.subplots(1, len(names), squeeze=False)
    for ax, name in zip(axes[0], names):
        entry = result["measurements"][name]
        for key, protocol, style in (
            ("mae", "leave-one-out, paper", "-"),
            ("mae_cross_validated", f"{result['settings']['n_folds']}-fold, leakage-free", ":"),
        ):
            ax.plot(entry["dims"], entry[key]["euclidean"], "o" + style, color="C0", label=f"Euclidean PCA ({protocol})")
            ax.plot(entry["dims"], entry[key]["riemannian"], "s" + style, color="C1", label=f"learned metric PGA ({protocol})")
        ax.set(
            title=f"regression of {name}",
            xlabel="number of principal geodesics",
            ylabel=f"mean absolute error ({units.get(name, 'mm')})",
        )
    figure.legend(*axes[0][0].get_legend_handles_labels(), loc="outside lower center", ncols=2, fontsize=8)
    return figure


def plot_embeddings(result):
    """Bodies in the first two principal components and principal geodesics, coloured by the measurement."""
    names = list(result["measurements"])
    units = result.get("units", {})
    figure = Figure(figsize=(9.5, 4 * len(names)), layout="constrained")
    axes = figure.subplots(len(names), 2, squeeze=False)
    for row, name in zip(axes, names):
        arrays = result["arrays"][name]
        for ax, key, label in zip(row, ("euclidean", "riemannian"), ("principal component", "principal geodesic")):
            points = ax.scatter(*arrays[key].T, c=arrays["measurement"], cmap="viridis", s=6)
            unit = "(data units)" if key == "euclidean" else "(whitened units)"
            title = "bodies by Euclidean PCA" if key == "euclidean" else f"bodies by PGA, metric from {name} clusters"
            ax.set(xlabel=f"1st {label} {unit}", ylabel=f"2nd {label} {unit}")
            ax.set_title(title, fontsize=10)
        figure.colorbar(points, ax=row, label=f"{name} ({units.get(name, 'mm')})")
    return figure


def plot_principal_geodesics(result):
    """Measurements predicted along the first principal geodesic / component, in its standard deviations."""
    names = list(result["measurements"])
    measurement_names = result["measurement_names"]
    figure = Figure(figsize=(5 * len(names) + 2, 3.8), layout="constrained")
    axes = figure.subplots(1, len(names), squeeze=False)
    for ax, name in zip(axes[0], names):
        along = result["measurements"][name]["along_first_direction"]
        for key, style in (("euclidean", "--"), ("riemannian", "-")):
            values = np.asarray(along[key])
            values = (values - values[len(values) // 2]) / np.asarray(result["measurement_std"])
            for j, label in enumerate(measurement_names):
                ax.plot(along["t"], values[:, j], style, color=f"C{j}", label=f"{label} ({'PCA' if key == 'euclidean' else 'PGA'})")
        ax.set(
            title=f"metric from {name} clusters",
            xlabel="position along the 1st principal direction (std. dev.)",
            ylabel="change of measurement (std. dev.)",
        )
    figure.suptitle("measurements predicted along the 1st principal geodesic (PGA, solid) and component (PCA, dashed)")
    axes[0][-1].legend(fontsize=7, loc="center left", bbox_to_anchor=(1.0, 0.5))
    return figure


def run_bodyshape(
    quick=False,
    seed=0,
    n_jobs=None,
    verbose=True,
    out=None,
    data=None,
    measurements=None,
    n_clusters=5,
    rho=1.0,
    max_dim=10,
    n_folds=None,
    thorough=False,
):
    """Run the body-shape experiment and return its numbers and markdown table.

    Parameters
    ----------
    quick : bool, default=False
        3 clusters and 3 folds; synthetic data: 300 bodies (about a minute).
    seed : int, default=0
        Seed of the synthetic data, of LMNN and of the folds.
    n_jobs : int, default=None
        Workers (joblib, one BLAS thread each) for the fits: per measurement, all bodies and each fold.
    verbose : bool, default=True
        One progress bar over every fit, naming the one just finished (measurement, protocol, fold).
    out : str or Path, default=None
        Directory receiving ``bodyshape.md``, ``bodyshape.json`` and the PNG figures.
    data : Bunch, default=None
        ``data``, ``target``, ``measurement_names`` and optionally ``units``
        (e.g. :func:`~riemlocal.datasets.load_body_measurements` or
        :func:`~riemlocal.datasets.load_body_shapes_csv`); ``None`` draws
        :func:`~riemlocal.datasets.make_body_shapes`.
    measurements : sequence of str, default=None
        Measurements that define the clusters and are predicted; ``None``:
        shoulder-to-wrist and shoulder breadth on the synthetic bodies, else
        the first two measurements of ``data``.
    n_clusters : int, default=5
    rho : float, default=1.0
        Sharpness of the smooth field; with the learned metrics the nearest and
        second-nearest cluster then get comparable weights (about :math:`e^{-0.4}`
        apart at a median body on the synthetic data).
    max_dim : int, default=10
        Largest PGA / PCA dimension; at most the number of coefficients.
    n_folds : int, default=None
        Folds of the leakage-free protocol: 5, 10 with ``thorough``, 3 with ``quick``.
    thorough : bool, default=False
        The thorough leakage-free protocol, 10 folds (twice the default's time).

    Returns
    -------
    dict
        ``measurements``: per measurement, ``dims``, ``mae`` (paper's protocol,
        leave-one-out: ``euclidean`` and ``riemannian`` lists),
        ``mae_cross_validated`` (leakage-free protocol), ``mae_all_coefficients``,
        ``std``, explained variance ratios, iteration counts, predicted
        measurements along the first principal geodesic
        (``along_first_direction``) and ``timings`` (s); ``units``; ``markdown``;
        ``arrays`` (2-D embeddings, measurement and cluster labels, not
        written to JSON); ``settings``.
    """
    if data is None:
        data = make_body_shapes(n_samples=300 if quick else 986, random_state=seed)
        measurements = ("shoulder_to_wrist", "shoulder_breadth") if measurements is None else measurements
    names = list(data.measurement_names)
    measurements = names[:2] if measurements is None else list(measurements)
    unknown = [name for name in measurements if name not in names]
    if unknown:
        raise ValueError(f"measurements {unknown} are not in the data (available: {names})")
    if n_folds is None:
        n_folds = 10 if thorough else 5
    n_clusters, n_folds = (3, 3) if quick else (n_clusters, n_folds)
    n_samples, n_features = data.data.shape
    if n_samples < 2 * n_features or n_samples < n_folds * n_clusters * 2:
        raise ValueError(
            f"data has {n_samples} bodies and {n_features} coefficients: whitening and {n_folds}-fold cross-validation "
            f"with {n_clusters} clusters need at least {max(2 * n_features, 2 * n_folds * n_clusters)} bodies"
        )
    max_dim = min(max_dim, n_features)
    units = dict(getattr(data, "units", {}))
    targets = {name: data.target[:, names.index(name)] for name in measurements}
    folds = list(KFold(n_folds, shuffle=True, random_state=seed).split(data.data))
    plan = [(name, k) for name in measurements for k in range(n_folds + 1)]  # k = 0: all bodies; k >= 1: fold k
    tasks = [(data.data, targets[name], folds[k - 1] if k else None, n_clusters, rho, max_dim, seed) for name, k in plan]
    fits = []
    description = f"bodyshape: {len(measurements)} measurements x (all bodies + {n_folds} folds)"
    with tqdm(total=len(plan), desc=description, unit="fit", disable=not verbose) as bar:
        for (name, k), fit in zip(plan, parallel_imap(_fit, tasks, n_jobs)):
            fits.append(fit)
            stage = f"fold {k}/{n_folds} (leakage-free)" if k else "all bodies (paper's protocol)"
            bar.set_postfix_str(f"fitted LMNN, Frechet mean, PGA: {name}, {stage}")
            bar.update()
    results, arrays = {}, {}
    for i, name in enumerate(measurements):
        full, *fold_results = fits[i * (n_folds + 1) : (i + 1) * (n_folds + 1)]
        results[name], arrays[name] = _summary(data, targets[name], full, folds, fold_results, max_dim)
    settings = {
        "n_samples": n_samples,
        "n_coefficients": n_features,
        "n_clusters": n_clusters,
        "n_folds": n_folds,
        "max_dim": max_dim,
        "rho": rho,
        "seed": seed,
        "quick": quick,
        "thorough": thorough,
    }
    result = {
        "measurements": results,
        "measurement_names": names,
        "measurement_std": data.target.std(axis=0).tolist(),
        "units": units,
        "markdown": _markdown(results, n_samples, units, n_folds),
        "settings": settings,
        "arrays": arrays,
    }
    if out is not None:
        out = Path(out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "bodyshape.md").write_text(result["markdown"] + "\n")
        numbers = {key: value for key, value in result.items() if key != "arrays"}
        (out / "bodyshape.json").write_text(json.dumps(numbers, indent=2))
        for filename, plot in (
            ("bodyshape_errors.png", plot_errors),
            ("bodyshape_embeddings.png", plot_embeddings),
            ("bodyshape_principal_geodesic.png", plot_principal_geodesics),
        ):
            plot(result).savefig(out / filename, dpi=110)
    return result
