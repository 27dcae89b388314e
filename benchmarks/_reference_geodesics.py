"""Reference geodesic distances, independent of riemlocal's Log solver (for bench_hard_geometry.py).

Only ``field.metric_matrix`` and ``field.metric_derivative`` are used. Every
reference is the length of a real polyline, integrated per segment by
Gauss--Legendre quadrature of :math:`\\sqrt{d^T M(x(s)) d}`, hence an upper
bound on the true distance. Routes come from a Dijkstra search on a lattice
(D = 2) or from several starting curves (any D), each refined by minimizing the
discrete energy of a long chain of nodes with scipy's L-BFGS.
"""

import numpy as np
from scipy.fft import dst
from scipy.optimize import minimize
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import dijkstra

GAUSS_NODES, GAUSS_WEIGHTS = np.polynomial.legendre.leggauss(8)
# lattice steps of the 16-neighbour graph (each undirected edge once)
STEPS = np.array([(1, 0), (0, 1), (1, 1), (1, -1), (2, 1), (1, 2), (2, -1), (1, -2)])


def segment_lengths(field, nodes):
    """Length of each segment of the polyline ``nodes`` (n_nodes, dim), Gauss--Legendre per segment."""
    step = np.diff(nodes, axis=0)
    s = 0.5 * (GAUSS_NODES + 1.0)
    points = nodes[:-1, None, :] + s[None, :, None] * step[:, None, :]
    metric = field.metric_matrix(points)
    speed = np.sqrt(np.maximum(np.einsum("ni,nqij,nj->nq", step, metric, step), 0.0))
    return 0.5 * speed @ GAUSS_WEIGHTS


def curve_length(field, nodes):
    """Length of the polyline ``nodes`` (n_nodes, dim): an upper bound on the distance of its ends."""
    return float(segment_lengths(field, np.asarray(nodes, dtype=float)).sum())


def resample(field, nodes, n_nodes):
    """``n_nodes`` points along the polyline ``nodes``, equally spaced in the field's arc length."""
    arc = np.concatenate([[0.0], np.cumsum(segment_lengths(field, nodes))])
    if arc[-1] <= 0.0:
        arc = np.linspace(0.0, 1.0, len(nodes))
    targets = np.linspace(0.0, arc[-1], n_nodes)
    return np.stack([np.interp(targets, arc, column) for column in nodes.T], axis=1)


def chain_energy(field, nodes):
    """Discrete energy ``N sum_k d_k^T M(m_k) d_k`` (midpoints ``m_k``) and its gradient in the nodes."""
    step = np.diff(nodes, axis=0)
    middle = 0.5 * (nodes[:-1] + nodes[1:])
    metric = field.metric_matrix(middle)
    derivative = field.metric_derivative(middle)
    n_segments = len(step)
    metric_step = np.einsum("nij,nj->ni", metric, step)
    energy = n_segments * np.einsum("ni,ni->", step, metric_step)
    along = 0.5 * np.einsum("ni,nijk,nj->nk", step, derivative, step)  # half of d/dm of d^T M(m) d
    gradient = np.zeros_like(nodes)
    gradient[1:] += 2.0 * metric_step + along
    gradient[:-1] += -2.0 * metric_step + along
    return energy, n_segments * gradient


def refine(field, nodes, n_nodes=256, max_iter=5000, gtol=1e-9):
    """Minimize the chain energy over the interior nodes, from ``nodes`` resampled to ``n_nodes``.

    L-BFGS runs in the sine-transform coordinates that make the energy of a
    constant metric the identity (the chain's Laplacian diagonalized), so
    its iterations do not grow with ``n_nodes``.
    """
    nodes = resample(field, np.asarray(nodes, dtype=float), n_nodes)
    ends, start = nodes[[0, -1]], nodes[1:-1]
    k = np.arange(1, n_nodes - 1)[:, None]
    scale = 1.0 / np.sqrt(2.0 * (n_nodes - 1) * 4.0 * np.sin(0.5 * np.pi * k / (n_nodes - 1)) ** 2)

    def chain(flat):
        return np.concatenate([ends[:1], start + dst(scale * flat.reshape(start.shape), type=1, axis=0, norm="ortho"), ends[1:]])

    def objective(flat):
        energy, gradient = chain_energy(field, chain(flat))
        return energy, (scale * dst(gradient[1:-1], type=1, axis=0, norm="ortho")).ravel()

    result = minimize(objective, np.zeros(start.size), jac=True, method="L-BFGS-B",
                      options={"maxiter": max_iter, "maxcor": 20, "gtol": gtol, "ftol": 1e-15})
    return chain(result.x)


class LatticeRoutes:
    """Shortest routes on a 16-neighbour lattice over a 2-D box, edge lengths from the metric at edge midpoints.

    Parameters
    ----------
    field : MetricField
        A field on R^2.
    low, high : array-like of shape (2,)
        Corners of the box.
    n_side : int
        Lattice nodes per side.
    """

    def __init__(self, field, low, high, n_side=201):
        self.field, self.n_side = field, n_side
        self.axes = [np.linspace(lo, hi, n_side) for lo, hi in zip(low, high)]
        grid = np.stack(np.meshgrid(*self.axes, indexing="ij"), axis=-1)
        self.nodes = grid.reshape(-1, 2)
        index = np.arange(n_side * n_side).reshape(n_side, n_side)
        rows, cols, weights = [], [], []
        for di, dj in STEPS:
            i0, i1 = max(0, -di), n_side - max(0, di)
            j0, j1 = max(0, -dj), n_side - max(0, dj)
            start = index[i0:i1, j0:j1].ravel()
            end = index[i0 + di:i1 + di, j0 + dj:j1 + dj].ravel()
            step = self.nodes[end] - self.nodes[start]
            metric = field.metric_matrix(0.5 * (self.nodes[start] + self.nodes[end]))
            rows.append(start)
            cols.append(end)
            weights.append(np.sqrt(np.einsum("ni,nij,nj->n", step, metric, step)))
        size = n_side * n_side
        self.graph = coo_matrix((np.concatenate(weights), (np.concatenate(rows), np.concatenate(cols))),
                                shape=(size, size)).tocsr()

    def nearest(self, point):
        """Index of the lattice node nearest to ``point``."""
        i, j = (int(np.abs(axis - value).argmin()) for axis, value in zip(self.axes, point))
        return i * self.n_side + j

    def route(self, point_a, point_b):
        """Polyline from ``point_a`` through the lattice's shortest route to ``point_b``."""
        return self.routes(point_a, point_b, n_routes=1)[0]

    def routes(self, point_a, point_b, n_routes=8, slack=0.3, waypoint_stride=20, separation=0.3):
        """The shortest route and up to ``n_routes - 1`` others through waypoints: every ``waypoint_stride``-th
        lattice node per axis, the shortest path ``a -> w -> b`` within ``1 + slack`` of the shortest route, shortest
        first, their waypoints pairwise more than ``separation`` apart (two Dijkstra searches in all)."""
        ends = [self.nearest(point_a), self.nearest(point_b)]
        distances, predecessors = dijkstra(self.graph, directed=False, indices=ends, return_predecessors=True)

        def path_to(tree, node):
            path = [node]
            while path[-1] != ends[tree]:
                path.append(predecessors[tree, path[-1]])
            return path

        grid = np.arange(0, self.n_side, waypoint_stride)
        waypoints = np.concatenate([[ends[1]], (grid[:, None] * self.n_side + grid[None]).ravel()])
        through = distances[0, waypoints] + distances[1, waypoints]
        order = np.argsort(through, kind="stable")
        taken, routes = [], []
        for w, length in zip(waypoints[order], through[order]):
            if len(routes) == n_routes or not length <= (1.0 + slack) * through[0]:
                break
            if any(np.linalg.norm(self.nodes[w] - self.nodes[t]) <= separation for t in taken):
                continue
            path = path_to(0, w)[::-1] + path_to(1, w)[1:]
            taken.append(w)
            routes.append(np.concatenate([[point_a], self.nodes[path], [point_b]]))
        return routes


def polyline_through(point_a, waypoint, point_b):
    """The two-segment start ``point_a -> waypoint -> point_b``."""
    return np.stack([point_a, waypoint, point_b])


def shortest_of(field, starts, n_coarse=32, n_fine=256, n_best=3):
    """Refine every start at ``n_coarse`` nodes, the ``n_best`` shortest again at ``n_fine``; the shortest curve."""
    coarse = [refine(field, start, n_coarse, max_iter=2000, gtol=1e-7) for start in starts]
    lengths = [curve_length(field, curve) for curve in coarse]
    best = [coarse[k] for k in np.argsort(lengths)[:n_best]]
    fine = [refine(field, curve, n_fine) for curve in best]
    lengths = [curve_length(field, curve) for curve in fine]
    k = int(np.argmin(lengths))
    return lengths[k], fine[k]
