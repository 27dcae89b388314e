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

The bundled data are :func:`~riemlocal.datasets.make_body_shapes` (the CAESAR
scans are not redistributable); :func:`run_bodyshape` accepts a user's own
data loaded with :func:`~riemlocal.datasets.load_body_shapes_csv`.
"""

import json
import time
from pathlib import Path

import numpy as np

from ..datasets import make_body_shapes
from ..fields import SmoothLocalField
from ..learners import LMNNMetric, condition_metric
from ..learning import PrincipalGeodesicAnalysis
from ..manifold import LearnedMetricManifold

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
    """Return ``(X - mean) W`` with identity covariance and the map ``W``."""
    centered = X - X.mean(axis=0)
    _, singular, vt = np.linalg.svd(centered, full_matrices=False)
    whitening = vt.T / singular * np.sqrt(len(X) - 1)
    return centered @ whitening, whitening


def _analyse(data, measurement, n_clusters, rho, max_dim, n_jobs, verbose, seed):
    start = time.perf_counter()
    timings = {}
    whitened, whitening = _whiten(data.data)
    labels = equal_size_clusters(measurement, n_clusters)
    lmnn = LMNNMetric(per_class=True, random_state=seed).fit(whitened, labels)
    metrics = np.array([condition_metric(metric, normalize=False) for metric in lmnn.metrics_])
    centers = np.array([whitened[labels == k].mean(axis=0) for k in range(n_clusters)])
    timings["lmnn"] = time.perf_counter() - start

    start = time.perf_counter()
    space = LearnedMetricManifold(SmoothLocalField(centers, metrics, rho=rho), n_jobs=n_jobs)
    pga = PrincipalGeodesicAnalysis(space, n_components=max_dim, verbose=verbose)  # the manifold splits the Logs
    riemannian = pga.fit_transform(whitened)
    timings["pga"] = time.perf_counter() - start

    centered = data.data - data.data.mean(axis=0)
    _, singular, vt = np.linalg.svd(centered, full_matrices=False)
    euclidean = centered @ vt[:max_dim].T
    dims = list(range(1, max_dim + 1))
    errors = {
        "euclidean": [float(loo_absolute_errors(euclidean[:, :d], measurement).mean()) for d in dims],
        "riemannian": [float(loo_absolute_errors(riemannian[:, :d], measurement).mean()) for d in dims],
    }
    full = float(loo_absolute_errors(data.data, measurement).mean())

    # measurements predicted (linear model on all coefficients) along the first principal directions
    t = np.linspace(-3.0, 3.0, 13)  # the data range; at the paper's ±7 std the geodesics leave the data
    start = time.perf_counter()
    geodesic = pga.principal_geodesic(0, t) @ np.linalg.pinv(whitening) + data.data.mean(axis=0)
    timings["principal_geodesic"] = time.perf_counter() - start
    line = data.data.mean(axis=0) + t[:, None] * (singular[0] / np.sqrt(len(centered) - 1)) * vt[0]
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
        "mae_all_coefficients": full,
        "std": float(measurement.std()),
        "explained_variance_ratio": pga.explained_variance_ratio_.tolist(),
        "frechet_iterations": int(pga.n_iter_),
        "lmnn_iterations": int(lmnn.n_iter_),
        "along_first_direction": along,
        "timings": timings,
    }
    arrays = {"labels": labels, "euclidean": euclidean[:, :2], "riemannian": riemannian[:, :2]}
    return summary, arrays


def _markdown(results, n_samples):
    names = list(results)
    header = "| dim | " + " | ".join(f"{n} Euclidean | {n} Riemannian" for n in names) + " |"
    rule = "|---:|" + "---:|---:|" * len(names)
    rows = [
        f"| {d} | "
        + " | ".join(f"{results[n]['mae']['euclidean'][i]:.1f} | {results[n]['mae']['riemannian'][i]:.1f}" for n in names)
        + " |"
        for i, d in enumerate(results[names[0]]["dims"])
    ]
    full = "| all coefficients | " + " | ".join(f"{results[n]['mae_all_coefficients']:.1f} | " for n in names) + " |"
    title = f"Leave-one-out mean absolute error (mm), {n_samples} bodies, PCA (Euclidean) vs PGA (learned metric)"
    return "\n".join([title, "", header, rule, *rows, full])


def _figure():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_errors(result):
    """Leave-one-out error against the dimension, Euclidean vs Riemannian, one panel per measurement."""
    plt = _figure()
    names = list(result["measurements"])
    figure, axes = plt.subplots(1, len(names), figsize=(4.5 * len(names), 3.5), squeeze=False)
    for ax, name in zip(axes[0], names):
        entry = result["measurements"][name]
        for key, style in (("euclidean", "o--"), ("riemannian", "s-")):
            ax.plot(entry["dims"], entry["mae"][key], style, label=key.capitalize())
        ax.set(title=name, xlabel="dimension", ylabel="LOO mean absolute error (mm)")
        ax.legend()
    figure.tight_layout()
    return figure


def plot_embeddings(result):
    """Bodies in the first two principal components (Euclidean) and principal geodesics, coloured by cluster."""
    plt = _figure()
    names = list(result["measurements"])
    figure, axes = plt.subplots(len(names), 2, figsize=(9, 4 * len(names)), squeeze=False)
    for row, name in zip(axes, names):
        arrays = result["arrays"][name]
        for ax, key in zip(row, ("euclidean", "riemannian")):
            ax.scatter(*arrays[key].T, c=arrays["labels"], cmap="viridis", s=6)
            ax.set(title=f"{name}: {key}", xlabel="1st component", ylabel="2nd component")
    figure.tight_layout()
    return figure


def plot_principal_geodesics(result):
    """Measurements predicted along the first principal geodesic / component, in its standard deviations."""
    plt = _figure()
    names = list(result["measurements"])
    measurement_names = result["measurement_names"]
    figure, axes = plt.subplots(1, len(names), figsize=(5 * len(names), 3.8), squeeze=False)
    for ax, name in zip(axes[0], names):
        along = result["measurements"][name]["along_first_direction"]
        for key, style in (("euclidean", "--"), ("riemannian", "-")):
            values = np.asarray(along[key])
            values = (values - values[len(values) // 2]) / np.asarray(result["measurement_std"])
            for j, label in enumerate(measurement_names):
                ax.plot(along["t"], values[:, j], style, color=f"C{j}", label=f"{label} ({key[:3]})")
        ax.set(title=f"clusters by {name}", xlabel="position (std. dev.)", ylabel="change of measurement (std. dev.)")
    axes[0][-1].legend(fontsize=7, loc="center left", bbox_to_anchor=(1.0, 0.5))
    figure.tight_layout()
    return figure


def run_bodyshape(
    quick=False,
    seed=0,
    n_jobs=None,
    verbose=True,
    out=None,
    data=None,
    measurements=("shoulder_to_wrist", "shoulder_breadth"),
    n_clusters=5,
    rho=1.0,
    max_dim=10,
):
    """Run the body-shape experiment and return its numbers and markdown table.

    Parameters
    ----------
    quick : bool, default=False
        300 bodies and 3 clusters (well under a minute).
    seed : int, default=0
        Seed of the synthetic data.
    n_jobs : int, default=None
        Workers for the Log / Exp batches (joblib).
    verbose : bool, default=True
        Progress messages and bars.
    out : str or Path, default=None
        Directory receiving ``bodyshape.md``, ``bodyshape.json`` and the PNG figures.
    data : Bunch, default=None
        ``data``, ``target``, ``measurement_names`` (e.g. from
        :func:`~riemlocal.datasets.load_body_shapes_csv`); ``None`` draws
        :func:`~riemlocal.datasets.make_body_shapes`.
    measurements : sequence of str
        Measurements that define the clusters and are predicted.
    n_clusters : int, default=5
    rho : float, default=1.0
        Sharpness of the smooth field; with the learned metrics the nearest and
        second-nearest cluster then get comparable weights (about :math:`e^{-0.4}`
        apart at a median body on the synthetic data).
    max_dim : int, default=10
        Largest PGA / PCA dimension.

    Returns
    -------
    dict
        ``measurements``: per measurement, ``dims``, ``mae`` (``euclidean``
        and ``riemannian`` lists, mm), ``mae_all_coefficients``, ``std``,
        explained variance ratios, iteration counts, predicted measurements
        along the first principal geodesic (``along_first_direction``) and
        ``timings`` (s); ``markdown``; ``arrays`` (2-D embeddings and cluster
        labels, not written to JSON); ``settings``.
    """
    if data is None:
        data = make_body_shapes(n_samples=300 if quick else 986, random_state=seed)
    n_clusters = 3 if quick else n_clusters
    names = list(data.measurement_names)
    unknown = [name for name in measurements if name not in names]
    if unknown:
        raise ValueError(f"measurements {unknown} are not in the data (available: {names})")
    results, arrays = {}, {}
    for name in measurements:
        if verbose:
            print(f"bodyshape: {name} ({len(data.data)} bodies, {n_clusters} clusters)", flush=True)
        target = data.target[:, names.index(name)]
        results[name], arrays[name] = _analyse(data, target, n_clusters, rho, max_dim, n_jobs, verbose, seed)
    result = {
        "measurements": results,
        "measurement_names": names,
        "measurement_std": data.target.std(axis=0).tolist(),
        "markdown": _markdown(results, len(data.data)),
        "settings": {"n_samples": len(data.data), "n_clusters": n_clusters, "rho": rho, "seed": seed, "quick": quick},
        "arrays": arrays,
    }
    if out is not None:
        out = Path(out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "bodyshape.md").write_text(result["markdown"] + "\n")
        numbers = {key: value for key, value in result.items() if key != "arrays"}
        (out / "bodyshape.json").write_text(json.dumps(numbers, indent=2))
        plt = _figure()
        for filename, plot in (
            ("bodyshape_errors.png", plot_errors),
            ("bodyshape_embeddings.png", plot_embeddings),
            ("bodyshape_principal_geodesic.png", plot_principal_geodesics),
        ):
            figure = plot(result)
            figure.savefig(out / filename, dpi=110)
            plt.close(figure)
    return result
