"""The ``riemlocal geodesic`` command: one pair of points, every registered distance rule, one plot."""

import json
import time
from pathlib import Path

import numpy as np

from ..distances import RULES, distance, rules_for
from ..manifold import LearnedMetricManifold
from ..plotting import plot_coordinates, plot_curves, plot_metric_ellipses
from ..utils.validation import check_points

__all__ = ["run_geodesic"]


def _markdown(field, point_a, point_b, rows):
    lines = [
        f"Distances from {np.array2string(point_a, separator=', ')} to {np.array2string(point_b, separator=', ')}",
        "",
        "| rule | value | seconds | quantity |",
        "|---|---:|---:|---|",
    ]
    lines += [f"| {rule} | {value:.6g} | {seconds:.3g} | {RULES[rule].quantity} |" for rule, value, seconds in rows]
    left_out = [rule for rule in RULES if rule not in rules_for(field.structure)]
    if left_out:
        rules = ", ".join(left_out)
        lines += ["", f"The field is {field.structure.replace('_', '-')}, so the {rules} rule does not apply."]
    return "\n".join(lines)


def _figure(field, curves):
    """The 2-D plot over the metric ellipses, or the coordinates along the curves in higher dimensions."""
    from matplotlib.figure import Figure
    from matplotlib.patches import Ellipse

    drawn = " and the ".join(curves)  # the straight line, and the geodesic of a smooth field
    if field.dim == 2:
        fig = Figure(figsize=(6, 6.8), layout="constrained")
        ax = fig.add_subplot()
        nodes = np.concatenate(list(curves.values()))
        middle = 0.5 * (nodes.min(axis=0) + nodes.max(axis=0))
        half = 0.65 * max(np.ptp(nodes, axis=0).max(), 1e-9)  # a square window around both curves
        bounds = (middle[0] - half, middle[0] + half, middle[1] - half, middle[1] + half)
        plot_metric_ellipses(field, bounds, n_grid=12, ax=ax, alpha=0.6)
        plot_curves(curves, ax=ax)
        handles, labels = ax.get_legend_handles_labels()
        handles.append(Ellipse((0, 0), 1, 0.6, facecolor="none", edgecolor="tab:blue", alpha=0.6))
        labels.append(r"metric ellipses $v^T M(x)\, v = s^2$, one $s$ fitted to the grid")
        ax.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, -0.09), ncols=2, fontsize=9)  # below the axes
        title = f"the {drawn} over the scaled metric ellipses"
        if not field.is_smooth:
            title += "\n(no geodesic: the field is not smooth)"
        ax.set(xlabel="$x_1$", ylabel="$x_2$", title=title)
    else:
        fig = Figure(figsize=(12, 2.4 * -(-field.dim // 4) + 0.6), layout="constrained")
        plot_coordinates(curves, figure=fig)
        fig.suptitle(f"coordinates along the {drawn}, from the first point ($t = 0$) to the second ($t = 1$)")
    return fig


def run_geodesic(field, point_a, point_b, out=".", n_points=101, n_jobs=None, verbose=False):
    """Distances between two points by every registered rule that serves the field, and a plot of the curves.

    Parameters
    ----------
    field : MetricField
    point_a, point_b : array-like of shape (dim,)
    out : str or path-like or None, default="."
        Directory for ``geodesic.md``, ``geodesic.json`` and ``geodesic.png``;
        ``None`` writes nothing.
    n_points : int, default=101
        Points per plotted curve.
    n_jobs : int, default=None
        Passed to :class:`~riemlocal.manifold.LearnedMetricManifold`.
    verbose : bool, default=False
        Passed to :class:`~riemlocal.manifold.LearnedMetricManifold`.

    Returns
    -------
    result : dict
        ``"distances"`` and ``"seconds"`` (``{rule: float}``), ``"markdown"``
        (the table) and ``"files"`` (paths written).
    """
    point_a = check_points(point_a, field.dim, "point_a")
    point_b = check_points(point_b, field.dim, "point_b")
    space = LearnedMetricManifold(field, n_jobs=n_jobs, verbose=verbose) if field.is_smooth else field
    rows = []
    for rule in rules_for(field.structure):
        start = time.perf_counter()
        value = float(distance(space, point_a, point_b, rule=rule))
        rows.append((rule, value, time.perf_counter() - start))
    t = np.linspace(0.0, 1.0, n_points)
    curves = {"straight line": point_a + t[:, None] * (point_b - point_a)}
    if field.is_smooth:
        curves["geodesic"] = space.metric.geodesic(point_a, end_point=point_b)(t)
    result = {
        "distances": {rule: value for rule, value, _ in rows},
        "seconds": {rule: seconds for rule, _, seconds in rows},
        "markdown": _markdown(field, point_a, point_b, rows),
        "files": [],
    }
    if out is not None:
        out = Path(out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "geodesic.md").write_text(result["markdown"] + "\n")
        numbers = {"point_a": point_a.tolist(), "point_b": point_b.tolist(), "field": repr(field)}
        numbers.update({key: result[key] for key in ("distances", "seconds")})
        (out / "geodesic.json").write_text(json.dumps(numbers, indent=2) + "\n")
        _figure(field, curves).savefig(out / "geodesic.png", dpi=120)
        result["files"] = [str(out / name) for name in ("geodesic.md", "geodesic.json", "geodesic.png")]
    return result
