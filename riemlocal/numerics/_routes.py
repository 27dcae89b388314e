r"""Global routes in two dimensions: shortest lattice polylines, starts for the energy solver on hard pairs.

The energy solver refines one discrete curve from the straight segment, so it finds the
geodesic of the route it starts on. Where a sharp field offers a shorter way around
(the other side of a center), a graph search exposes it: nodes are the pair's endpoints
and a lattice over its neighbourhood, edges straight segments weighted by their length
(:func:`~riemlocal.numerics.polyline_length`), and Dijkstra's algorithm gives the
shortest polyline, a real curve, so an upper bound on the distance. (Polylines through
the centers of a field, tried for higher dimensions, were never shorter than the
solver's curve on random fields at D = 5 and 10: 0 of 80 hard pairs.)
"""

import numpy as np
from scipy.sparse import coo_array
from scipy.sparse.csgraph import dijkstra

from ._energy import polyline_length

__all__ = ["LATTICE_NODES", "lattice_routes", "resample"]

#: nodes per side of the lattice of :func:`lattice_routes`, and its neighbours: the 16 directions of steps
#: (1, 0), (1, 1), (1, 2) and their symmetries (angles within 13 degrees of any direction)
LATTICE_NODES = 65
_STEPS = ((0, 1), (1, 0), (1, 1), (1, -1), (1, 2), (2, 1), (1, -2), (2, -1))


def lattice_routes(field, base_point, point):
    """Shortest polylines from ``base_point`` to ``point`` (``(n, 2)`` each) on a lattice around each pair.

    The lattice spans the pair's bounding box widened by its diagonal on every side, with
    ``LATTICE_NODES`` nodes per side; the endpoints join the lattice nodes within 2.5 steps.
    Returns a list of ``n`` polylines, each ``(k, 2)`` with its endpoints.
    """
    grid = np.indices((LATTICE_NODES, LATTICE_NODES)).reshape(2, -1).T
    index = np.arange(LATTICE_NODES**2).reshape(LATTICE_NODES, LATTICE_NODES)
    first, second = [], []
    for di, dj in _STEPS:
        rows = slice(0, LATTICE_NODES - di)
        columns = slice(max(0, -dj), LATTICE_NODES - max(0, dj))
        first.append(index[rows, columns].ravel())
        second.append(index[di:, max(0, dj) : LATTICE_NODES + min(0, dj)][: LATTICE_NODES - di].ravel())
    first, second = np.concatenate(first), np.concatenate(second)
    routes = []
    for start, end in zip(base_point, point):
        low, high = np.minimum(start, end), np.maximum(start, end)
        margin = np.linalg.norm(end - start)
        step = (high - low + 2 * margin) / (LATTICE_NODES - 1)
        lattice = low - margin + grid * step
        near_start = np.flatnonzero(np.sum(((lattice - start) / step) ** 2, axis=1) <= 2.5**2)
        near_end = np.flatnonzero(np.sum(((lattice - end) / step) ** 2, axis=1) <= 2.5**2)
        nodes = np.concatenate([start[None], end[None], lattice])
        edge_first = np.concatenate([np.zeros(len(near_start), dtype=int), np.ones(len(near_end), dtype=int), first + 2])
        edge_second = np.concatenate([near_start + 2, near_end + 2, second + 2])
        weights = polyline_length(field, np.stack([nodes[edge_first], nodes[edge_second]], axis=1), 2)
        routes.append(_shortest(nodes, edge_first, edge_second, weights))
    return routes


def _shortest(nodes, first, second, weights):
    """The shortest polyline from node 0 to node 1 of the undirected graph with edges ``(first, second)``."""
    graph = coo_array((weights, (first, second)), shape=(len(nodes), len(nodes))).tocsr()
    _, predecessors = dijkstra(graph, directed=False, indices=0, return_predecessors=True)
    path = [1]
    while path[-1] != 0:
        path.append(predecessors[path[-1]])
    return nodes[path[::-1]]


def resample(polyline, n_nodes):
    """``n_nodes`` points spaced evenly by Euclidean arc length along ``polyline`` ``(k, dim)``, endpoints included."""
    arc = np.r_[0.0, np.cumsum(np.linalg.norm(np.diff(polyline, axis=0), axis=1))]
    targets = np.linspace(0.0, arc[-1], n_nodes)
    return np.stack([np.interp(targets, arc, coordinate) for coordinate in polyline.T], axis=1)
