r"""Matplotlib helpers to look at a metric field and at curves in it.

* :func:`plot_metric_ellipses` -- the unit ball :math:`\{v : v^T M(x) v \le s^2\}`
  drawn at grid points of a 2-D field;
* :func:`plot_volume` -- the log volume element :math:`\tfrac12 \log\det M(x)`
  of a 2-D field as a background image (cells of a piecewise-constant field
  show up as flat patches);
* :func:`plot_curves` -- curves in the plane (straight line, geodesic, ...);
* :func:`plot_coordinates` -- coordinates along curves against the curve
  parameter, for fields of any dimension.

Every function takes an optional ``ax`` and returns it.
"""

import numpy as np

from .utils.validation import check_int

__all__ = ["plot_metric_ellipses", "plot_volume", "plot_curves", "plot_coordinates"]


def _axes(ax):
    if ax is None:
        import matplotlib.pyplot as plt

        ax = plt.gca()
    return ax


def _check_2d(field):
    if getattr(field, "dim", None) != 2:
        raise ValueError(f"field must be a 2-D MetricField, got dim={getattr(field, 'dim', None)!r}")


def _check_bounds(bounds):
    bounds = np.asarray(bounds, dtype=float)
    if bounds.shape != (4,) or not np.all(np.isfinite(bounds)) or bounds[0] >= bounds[1] or bounds[2] >= bounds[3]:
        raise ValueError(f"bounds must be (xmin, xmax, ymin, ymax) with xmin < xmax and ymin < ymax, got {bounds}")
    return bounds


def _grid(bounds, n_grid):
    check_int(n_grid, "n_grid")
    xs = np.linspace(bounds[0], bounds[1], n_grid)
    ys = np.linspace(bounds[2], bounds[3], n_grid)
    return np.stack(np.meshgrid(xs, ys), axis=-1)


def plot_metric_ellipses(field, bounds, n_grid=10, scale=None, ax=None, **kwargs):
    r"""Draw the metric's unit ellipses :math:`\{x + v : v^T M(x) v = s^2\}` on a grid.

    A large ellipse means distances are short there (small metric), a thin
    one that moving across it is expensive.

    Parameters
    ----------
    field : MetricField
        A field with ``dim == 2``.
    bounds : tuple of 4 floats
        ``(xmin, xmax, ymin, ymax)`` of the grid.
    n_grid : int, default=10
        Number of ellipse centers per axis.
    scale : float, default=None
        Radius :math:`s`; ``None`` makes the largest ellipse fill about 90 %
        of a grid cell.
    ax : matplotlib Axes, default=None
        Axes to draw into (``None``: the current axes).
    **kwargs
        Passed to :class:`matplotlib.collections.EllipseCollection`
        (``facecolors``, ``edgecolors``, ``alpha``, ...).

    Returns
    -------
    ax : matplotlib Axes
    """
    from matplotlib.collections import EllipseCollection

    _check_2d(field)
    bounds = _check_bounds(bounds)
    points = _grid(bounds, n_grid).reshape(-1, 2)
    eigvals, eigvecs = np.linalg.eigh(field.metric_matrix(points))
    semi_axes = 1.0 / np.sqrt(eigvals)  # along the eigenvectors, for s = 1
    if scale is None:
        cell = min(bounds[1] - bounds[0], bounds[3] - bounds[2]) / max(n_grid - 1, 1)
        scale = 0.45 * cell / semi_axes.max()
    angles = np.degrees(np.arctan2(eigvecs[:, 1, 0], eigvecs[:, 0, 0]))
    kwargs.setdefault("facecolors", "none")
    kwargs.setdefault("edgecolors", "tab:blue")
    ax = _axes(ax)
    collection = EllipseCollection(
        2 * scale * semi_axes[:, 0],
        2 * scale * semi_axes[:, 1],
        angles,
        units="xy",
        offsets=points,
        offset_transform=ax.transData,
        **kwargs,
    )
    ax.add_collection(collection)
    ax.set_xlim(bounds[0] - scale * semi_axes.max(), bounds[1] + scale * semi_axes.max())
    ax.set_ylim(bounds[2] - scale * semi_axes.max(), bounds[3] + scale * semi_axes.max())
    ax.set_aspect("equal")
    return ax


def plot_volume(field, bounds, resolution=200, ax=None, **kwargs):
    r"""Show :math:`\tfrac12 \log\det M(x)` (log of the Riemannian volume element) as an image.

    Parameters
    ----------
    field : MetricField
        A field with ``dim == 2``.
    bounds : tuple of 4 floats
        ``(xmin, xmax, ymin, ymax)``.
    resolution : int, default=200
        Pixels per axis.
    ax : matplotlib Axes, default=None
    **kwargs
        Passed to :meth:`matplotlib.axes.Axes.imshow` (default ``cmap="Greys"``).

    Returns
    -------
    ax : matplotlib Axes
    """
    _check_2d(field)
    bounds = _check_bounds(bounds)
    grid = _grid(bounds, resolution)
    _, logdet = np.linalg.slogdet(field.metric_matrix(grid.reshape(-1, 2)))
    kwargs.setdefault("cmap", "Greys")
    kwargs.setdefault("alpha", 0.5)
    ax = _axes(ax)
    ax.imshow(0.5 * logdet.reshape(grid.shape[:2]), origin="lower", extent=tuple(bounds), **kwargs)
    return ax


def _check_curves(curves, dim=None):
    if not isinstance(curves, dict) or not curves:
        raise TypeError("curves must be a non-empty dict {label: array of shape (n_points, dim)}")
    checked = {}
    for label, curve in curves.items():
        curve = np.asarray(curve, dtype=float)
        if curve.ndim != 2 or (dim is not None and curve.shape[1] != dim):
            want = f"(n_points, {dim})" if dim is not None else "(n_points, dim)"
            raise ValueError(f"curve {label!r} must have shape {want}, got {curve.shape}")
        checked[label] = curve
    return checked


def plot_curves(curves, ax=None, endpoints=True, **kwargs):
    """Draw planar curves, one line per entry, with a legend.

    Parameters
    ----------
    curves : dict
        ``{label: array of shape (n_points, 2)}``.
    ax : matplotlib Axes, default=None
    endpoints : bool, default=True
        Mark the first and last points of the first curve.
    **kwargs
        Passed to every :meth:`matplotlib.axes.Axes.plot` call.

    Returns
    -------
    ax : matplotlib Axes
    """
    curves = _check_curves(curves, dim=2)
    ax = _axes(ax)
    for label, curve in curves.items():
        ax.plot(curve[:, 0], curve[:, 1], label=label, **kwargs)
    if endpoints:
        first = next(iter(curves.values()))
        ax.plot(*first[[0, -1]].T, "ko", ms=4)
    ax.legend()
    return ax


def plot_coordinates(curves, figure=None):
    """Plot each coordinate along each curve against the curve parameter :math:`t \\in [0, 1]`.

    For fields of dimension > 2, where the curve cannot be drawn directly.

    Parameters
    ----------
    curves : dict
        ``{label: array of shape (n_points, dim)}``, all of the same ``dim``.
    figure : matplotlib Figure, default=None
        Figure to fill with one panel per coordinate (at most 4 columns) and
        a legend below them (room for it needs ``layout="constrained"``);
        ``None`` makes a new pyplot figure.

    Returns
    -------
    axes : ndarray of matplotlib Axes
        One per coordinate.
    """
    curves = _check_curves(curves)
    dim = next(iter(curves.values())).shape[1]
    curves = _check_curves(curves, dim=dim)
    n_cols = min(dim, 4)
    n_rows = -(-dim // n_cols)
    if figure is None:
        import matplotlib.pyplot as plt

        figure = plt.figure(figsize=(3 * n_cols, 2.4 * n_rows + 0.4), layout="constrained")
    axes = figure.subplots(n_rows, n_cols, squeeze=False).ravel()
    for k in range(dim):
        for label, curve in curves.items():
            axes[k].plot(np.linspace(0.0, 1.0, len(curve)), curve[:, k], label=label)
        axes[k].set(title=f"coordinate {k + 1}", xlabel="$t$", ylabel=f"$x_{{{k + 1}}}(t)$")
    for ax in axes[dim:]:
        ax.set_visible(False)
    figure.legend(*axes[0].get_legend_handles_labels(), loc="outside lower center", ncols=len(curves))
    return axes[:dim]
