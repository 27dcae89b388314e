r"""Global routes: starting polylines for the energy solver on hard pairs.

The energy solver refines one discrete curve from the straight segment, so it finds the
geodesic of the route it starts on. Where a sharp field offers a shorter way around
(the other side of a center, a detour through a cheaper region), other starts expose it.
Graph searches give them: nodes are the pair's endpoints and a lattice over its
neighbourhood (two dimensions) or the field's centers (any dimension), edges straight
segments weighted by their length (:func:`~riemlocal.numerics.polyline_length`), and
Dijkstra's algorithm gives the shortest polyline; on the lattice, via-routes give the other
routes nearly as short (:func:`lattice_alternatives`). Detours through single centers (those
whose straight legs are shortest) and through a few random waypoints are candidates too. A route's own length says little about the geodesic of its homotopy
class (a straight detour through a center can be three times the geodesic it leads to,
at D = 5 on nearly piecewise-constant blends), so the solver minimizes every candidate
before it compares them.
"""

import functools

import numpy as np
from scipy.sparse import coo_array
from scipy.sparse.csgraph import dijkstra
from scipy.spatial import KDTree

from ..utils.arrays import unique_rows
from ..utils.parallel import map_chunks
from ._energy import polyline_length, segment_lengths, segment_quadratics

__all__ = ["FieldLattice", "FIELD_LATTICE_MARGIN", "LATTICE_NODES", "CHECK_LATTICE_NODES", "SHARP_BLEND", "SHARP_OUTLIERS", "CHECK_BLEND", "REACH_CONTRAST", "REACH_FRACTION", "WAYPOINTS", "DETOURS", "GRAPH_NEIGHBOURS", "RESAMPLE_PIECES", "blend_sharpness", "center_graph", "center_legs", "cheap_reach", "detour_routes", "graph_routes", "lattice_alternatives", "lattice_routes", "resample", "sharp_blend", "shortest_path"]

#: nodes per side of the lattice of :func:`lattice_routes`, and its neighbours: the 16 directions of steps
#: (1, 0), (1, 1), (1, 2) and their symmetries (angles within 13 degrees of any direction)
LATTICE_NODES = 65
#: ... of the coarse lattice that checks every pair of a sharp two-dimensional field, and of :class:`FieldLattice`
CHECK_LATTICE_NODES = 33
#: :class:`FieldLattice` spans the centers' bounding box widened by this fraction of its diagonal on every side
FIELD_LATTICE_MARGIN = 0.5
#: routes of :func:`lattice_alternatives` per pair, within this fraction of the shortest, and their via nodes
#: more than this many lattice steps from every route taken. On the condition-1000 fields of
#: ``benchmarks/bench_hard_geometry.py``: 4 routes within 5% missed three geodesics 0.45--22% shorter on 180 pairs
#: (seeds 0 and 2), which 8 within 15% found; on 180 pairs of seeds 3 and 4, 16 routes within 30% found no geodesic
#: shorter than these 8 did
VIA_ROUTES = 8
VIA_SLACK = 0.15
VIA_SEPARATION = 2.0
_STEPS = ((0, 1), (1, 0), (1, 1), (1, -1), (1, 2), (2, 1), (1, -2), (2, -1))


#: a field is sharp when, between some center and its nearest center, more than this fraction of the change
#: of :math:`\log u^T M u` (u their direction) happens within one sixteenth of the way (:func:`sharp_blend`)
SHARP_BLEND = 0.5
#: ... the cheap lattice check of every pair of a two-dimensional field runs above this sharpness (the smooth
#: blends of ``benchmarks/bench_geodesics.py`` are at 0.11--0.19; a field of ``benchmarks/bench_hard_geometry.py``
#: at 0.46 had a pair certified 1.8% above its shortest route)
CHECK_BLEND = 0.3
#: ... and when that sixteenth changes :math:`\log u^T M u` by more than this (the speed by about 10%)
SHARP_CHANGE = 0.1
#: ... over all but the sharpest this fraction of those segments (none below 100 centers): the per-class LMNN field of
#: digits (1,797 centers) has one sharp segment, an isolated center 12.8 from its nearest center of another class (median
#: 1.6); searching every pair for it changed none of 240 distances, at 24 times their cost
SHARP_OUTLIERS = 0.01
_PROBES = 16
#: :func:`cheap_reach` counts the directions along which one metric is at least this many times cheaper than another
#: (the quadratic forms), ...
REACH_CONTRAST = 4.0
#: ... every pair of a field above this fraction of them is searched (iris' per-class LMNN field: 0.75, wine's: 0.15 at
#: max_condition 10 and 0.31 at 100, the random fields of ``benchmarks/bench_geodesics.py``: 0.4--0.6)
REACH_FRACTION = 0.7
#: ... among at most this many of the field's distinct metrics (a fixed sample of more)
REACH_METRICS = 16
#: random waypoints of :func:`detour_routes` (on the fields of ``benchmarks/bench_hard_geometry.py`` at D = 5,
#: a pair whose best route passes by no center's detour)
WAYPOINTS = 8
#: detours through single centers per pair (:func:`detour_routes`): those whose legs are shortest
DETOURS = 16
#: curves times centers from which the field's own quadratures (:func:`center_graph`, :func:`blend_sharpness`) run over
#: the workers: digits' per-class field (1,797 centers) has 3.2e6 for the sharpness and 3.5e7 for the graph, 0.6 and
#: 1.8 s in one process; iris' 150 centers, 2.2e4 and 2e5
PARALLEL_WORK = 1_000_000
#: neighbours of each center in :func:`center_graph`
GRAPH_NEIGHBOURS = 16
#: pieces of each segment measured by :func:`resample` in a field's arc length
RESAMPLE_PIECES = 8


def sharp_blend(field):
    """Whether the field's metric changes abruptly between its centers: :func:`blend_sharpness` above ``SHARP_BLEND``."""
    return blend_sharpness(field) > SHARP_BLEND


def blend_sharpness(field, n_jobs=None):
    """How abruptly the field's metric changes between its centers (``field.centers``; none: 0), in [0, 1].

    On the segment from each center to its nearest center with another metric (``field.metrics``; a per-class field's
    nearest center mostly shares its class's metric: no change there, while the class boundaries
    can be abrupt), ``log u^T M u`` (``u`` the segment's direction) is sampled at 17 points; the sharpness is the largest, over the
    segments whose largest change exceeds ``SHARP_CHANGE`` (a negligible change is not a
    sharp one, however abrupt), of the largest of the 16 changes over their sum, the sharpest ``SHARP_OUTLIERS`` of the
    segments left out (isolated centers far from the rest). Nearly
    piecewise-constant blends (sparse centers, large ``rho`` or condition) are at
    0.55--1.0 on the fields of ``benchmarks/bench_hard_geometry.py`` at D = 5 and 10;
    the smooth blends of ``benchmarks/bench_geodesics.py`` are at 0.11--0.28.
    """
    centers = getattr(field, "centers", None)
    if centers is None or len(centers) < 2:
        return 0.0
    nearest, gap = _nearest_other_metric(centers, _distinct_metrics(field)[1])
    apart = np.isfinite(gap) & (gap > 0)  # a center whose nearest is a duplicate has no segment (no log(0))
    if not apart.any():
        return 0.0
    segments = np.stack([centers, centers[nearest]], axis=1)[apart]
    speed = np.log(_over_workers(segment_quadratics, field, segments, n_jobs, np.linspace(0.0, 1.0, _PROBES + 1))[:, 0])
    change = np.abs(np.diff(speed, axis=1))
    largest = change.max(axis=1)
    sharpness = np.divide(largest, change.sum(axis=1), out=np.zeros_like(largest), where=largest > SHARP_CHANGE)
    return float(np.sort(sharpness)[-1 - int(SHARP_OUTLIERS * len(sharpness))])


def _nearest_other_metric(centers, metric_of):
    """Each center's nearest center with another metric (``metric_of``, :func:`_distinct_metrics`): index and distance
    (infinite: none)."""
    if metric_of.max() + 1 == len(centers):  # a metric per center: the nearest other center
        distance, index = KDTree(centers).query(centers, 2)
        return index[:, 1], distance[:, 1]
    index, distance = np.zeros(len(centers), dtype=int), np.full(len(centers), np.inf)
    for group in np.unique(metric_of):
        mine, others = np.flatnonzero(metric_of == group), np.flatnonzero(metric_of != group)
        if len(others):
            distance[mine], nearest = KDTree(centers[others]).query(centers[mine])
            index[mine] = others[nearest]
    return index, distance


def cheap_reach(field):
    r"""The largest fraction of directions along which one of the field's metrics is ``REACH_CONTRAST`` times cheaper
    than another (``field.metrics``; none: 0), in [0, 1].

    The smooth blend weighs each center by its proximity in its own metric, so a metric that is cheap along most
    directions dominates far beyond the data there, and a route through that reach can beat every route through the
    data, which the straight start never leaves. On iris' per-class LMNN field (class 0's metric collapses 3 of its 4
    directions; 0.75), 2 and 20 of 1,770 pairs solved from straight starts were certified 6% and up to 22% too long at
    ``max_condition`` 10 and 100; the route search through random waypoints found all of them. The count takes the
    generalized eigenvalues :math:`\lambda_k(M_h, M_g)` of every two of at most ``REACH_METRICS`` distinct metrics.
    """
    metrics = _distinct_metrics(field)[0]
    if len(metrics) < 2:
        return 0.0
    if len(metrics) > REACH_METRICS:
        metrics = metrics[np.sort(np.random.default_rng(0).choice(len(metrics), REACH_METRICS, replace=False))]
    factors = np.linalg.cholesky(metrics)
    whitened = np.linalg.solve(factors[:, None], np.linalg.solve(factors[:, None], metrics[None]).swapaxes(-1, -2))  # L_g^-1 M_h L_g^-T
    cheaper = np.linalg.eigvalsh(whitened) >= REACH_CONTRAST  # M_h / M_g: g cheaper by the factor along these
    return float(cheaper.sum(axis=-1).max() / field.dim)


def _distinct_metrics(field):
    """The field's distinct center metrics ``(k, dim, dim)`` and each center's index among them (no metrics: none)."""
    metrics = getattr(field, "metrics", None)
    if metrics is None:
        return np.empty((0, field.dim, field.dim)), np.arange(len(getattr(field, "centers", ())))
    metrics = np.asarray(metrics)
    distinct, metric_of = np.unique(metrics.reshape(len(metrics), -1), axis=0, return_inverse=True)
    return distinct.reshape(-1, field.dim, field.dim), metric_of.ravel()


def _lattice_edges(shape):
    """The edges ``(first, second)`` of a lattice of ``shape`` nodes (row-major): steps of ``_STEPS``, each edge once,
    grouped by their first node (:func:`~riemlocal.numerics.polyline_length` measures the edges from one node in one
    run: twice as fast as edge by edge)."""
    index = np.arange(shape[0] * shape[1]).reshape(shape)
    first, second = [], []
    for di, dj in _STEPS:
        block = (slice(0, shape[0] - di), slice(max(0, -dj), shape[1] - max(0, dj)))
        first.append(index[block].ravel())
        second.append(index[di:, max(0, dj) : shape[1] + min(0, dj)][: shape[0] - di].ravel())
    first, second = np.concatenate(first), np.concatenate(second)
    order = np.argsort(first, kind="stable")
    return first[order], second[order]


def lattice_routes(field, base_point, point, n_nodes=LATTICE_NODES):
    """Shortest polylines from ``base_point`` to ``point`` (``(n, 2)`` each) on a lattice around each pair.

    The lattice spans the pair's bounding box widened by its diagonal on every side, with
    ``n_nodes`` nodes per side; the endpoints join the lattice nodes within 2.5 steps.
    Returns a list of ``n`` polylines, each ``(k, 2)`` with its endpoints.
    """
    return [_shortest(*_pair_lattice(field, start, end, n_nodes)[:4]) for start, end in zip(base_point, point)]


def lattice_alternatives(field, start, end, n_nodes=LATTICE_NODES, n_routes=VIA_ROUTES, slack=VIA_SLACK):
    r"""The shortest route from ``start`` to ``end`` (``(2,)`` each) on the lattice of :func:`lattice_routes` and up to
    ``n_routes - 1`` distinct others: via-routes, the shortest paths through a node :math:`v`, of length
    :math:`d(s, v) + d(v, t)` (two Dijkstra searches), shortest first, within ``1 + slack`` of the shortest. A via
    node must lie on a plateau, an edge shared by the shortest-path trees of both ends (so that the route is locally
    shortest there, not a bump off another route), more than ``VIA_SEPARATION`` lattice steps from every route
    taken. Two routes on either side of a sharp feature can be within a percent of each other, and which one a
    lattice's shortest path takes depends on its resolution; each minimizes to its own geodesic.
    """
    nodes, first, second, weights, step = _pair_lattice(field, start, end, n_nodes)
    graph = coo_array((weights, (first, second)), shape=(len(nodes), len(nodes))).tocsr()
    distances, predecessors = dijkstra(graph, directed=False, indices=[0, 1], return_predecessors=True)
    through = distances.sum(axis=0)
    toward = np.where(predecessors >= 0, predecessors, np.arange(len(nodes)))  # a tree's next node toward its root
    plateau = (toward[1][toward[0]] == np.arange(len(nodes))) | (toward[0][toward[1]] == np.arange(len(nodes)))
    routes, taken = [], np.empty((0, 2))
    for node in np.flatnonzero(plateau)[np.argsort(through[plateau])]:
        if len(routes) == n_routes or not through[node] <= (1.0 + slack) * through[1]:
            break
        if len(routes) and np.min(np.sum(((taken - nodes[node]) / step) ** 2, axis=1)) <= VIA_SEPARATION**2:
            continue
        path = shortest_path(predecessors[0], node)[:-1] + shortest_path(predecessors[1], node)[::-1]
        routes.append(nodes[path])
        taken = np.concatenate([taken, nodes[path]])
    return routes


def _pair_lattice(field, start, end, n_nodes):
    """The graph of :func:`lattice_routes` for one pair: nodes (``start``, ``end``, then the lattice), edges
    ``(first, second)``, their lengths and the lattice's step."""
    grid = np.indices((n_nodes, n_nodes)).reshape(2, -1).T
    first, second = _lattice_edges((n_nodes, n_nodes))
    low, high = np.minimum(start, end), np.maximum(start, end)
    margin = np.linalg.norm(end - start)
    step = (high - low + 2 * margin) / (n_nodes - 1)
    lattice = low - margin + grid * step
    near_start = np.flatnonzero(np.sum(((lattice - start) / step) ** 2, axis=1) <= 2.5**2)
    near_end = np.flatnonzero(np.sum(((lattice - end) / step) ** 2, axis=1) <= 2.5**2)
    nodes = np.concatenate([start[None], end[None], lattice])
    edge_first = np.concatenate([np.zeros(len(near_start), dtype=int), np.ones(len(near_end), dtype=int), first + 2])
    edge_second = np.concatenate([near_start + 2, near_end + 2, second + 2])
    weights = polyline_length(field, np.stack([nodes[edge_first], nodes[edge_second]], axis=1), 2)
    return nodes, edge_first, edge_second, weights, step


class FieldLattice:
    """All shortest routes of one coarse lattice over a two-dimensional field's centers: a cheap screen of every pair.

    The lattice (``n_nodes`` per side, the edges of :func:`lattice_routes` weighted by
    :func:`~riemlocal.numerics.polyline_length`) spans the centers' bounding box widened by
    ``FIELD_LATTICE_MARGIN`` times its diagonal on every side. Dijkstra's algorithm runs from every
    node once, when the lattice is built (33 nodes per side: about 0.25 s); then a route between
    any two points costs a lookup. A point joins the lattice nodes within 2.5 steps by straight legs
    whose lengths take the metric at the point, so route lengths are estimates, not bounds.
    """

    def __init__(self, field, n_nodes=CHECK_LATTICE_NODES):
        centers = np.asarray(field.centers, dtype=float)
        low, high = centers.min(axis=0), centers.max(axis=0)
        spread = np.linalg.norm(high - low)
        margin = FIELD_LATTICE_MARGIN * spread if spread > 0 else 1.0  # one center: a unit box around it
        self.low, self.shape = low - margin, (n_nodes, n_nodes)
        self.step = (high - low + 2 * margin) / (n_nodes - 1)
        self.nodes = self.low + np.indices(self.shape).reshape(2, -1).T * self.step
        first, second = _lattice_edges(self.shape)
        weights = polyline_length(field, np.stack([self.nodes[first], self.nodes[second]], axis=1), 2)
        graph = coo_array((weights, (first, second)), shape=(len(self.nodes),) * 2).tocsr()
        self.lengths, self.predecessors = dijkstra(graph, directed=False, return_predecessors=True)
        self._offsets = np.indices((6, 6)).reshape(2, -1).T - 2  # from the node below-left of a point: all within 2.5 steps

    def near(self, points, metrics):
        """The lattice nodes within 2.5 steps of ``points`` ``(n, 2)`` (metrics there ``(n, 2, 2)``): ``(n, 36)``
        indices and the lengths of the legs to them (infinite for the indices that are none)."""
        position = np.clip((points - self.low) / self.step, -3.0, max(self.shape) + 3.0)  # far points: off the lattice
        grid = np.floor(position).astype(int)[:, None, :] + self._offsets
        inside = np.all((grid >= 0) & (grid < self.shape), axis=2)
        inside &= np.sum((grid - position[:, None]) ** 2, axis=2) <= 2.5**2
        nodes = np.where(inside, grid[..., 0] * self.shape[1] + grid[..., 1], 0)
        legs = self.nodes[nodes] - points[:, None]
        return nodes, np.where(inside, np.sqrt(np.einsum("nkd,nde,nke->nk", legs, metrics, legs)), np.inf)

    def route_lengths(self, start, end):
        """Lengths of the shortest routes between the points of two :meth:`near` results (infinite where a point
        is off the lattice), and the lattice nodes where each route enters and leaves it."""
        (start_nodes, start_legs), (end_nodes, end_legs) = start, end
        totals = start_legs[:, :, None] + self.lengths[start_nodes[:, :, None], end_nodes[:, None, :]] + end_legs[:, None, :]
        best = totals.reshape(len(totals), -1).argmin(axis=1)
        first, last = np.unravel_index(best, totals.shape[1:])
        rows = np.arange(len(totals))
        return totals.reshape(len(totals), -1)[rows, best], start_nodes[rows, first], end_nodes[rows, last]

    def paths(self, start_node, end_node):
        """The node positions of the lattice's shortest paths between nodes, ``(n, k, 2)``, each padded with its end."""
        paths = [shortest_path(self.predecessors[start], end) for start, end in zip(start_node, end_node)]
        longest = max(len(path) for path in paths)
        return self.nodes[np.array([path + path[-1:] * (longest - len(path)) for path in paths])]


def center_graph(field, n_jobs=None):
    """The graph of :func:`detour_routes` over the field's centers (``field.centers``; none: empty), built once per solve.

    Each center is joined to its ``GRAPH_NEIGHBOURS`` nearest centers (Euclidean; the complete graph up to
    ``GRAPH_NEIGHBOURS + 1`` centers) by a straight edge weighted by its length (:func:`~riemlocal.numerics.polyline_length`),
    the edges split over ``n_jobs`` workers (joblib). Returns the centers ``(R, dim)``, the edges' ends and their lengths.
    """
    centers = np.asarray(getattr(field, "centers", np.empty((0, field.dim))), dtype=float)
    n_neighbours = min(GRAPH_NEIGHBOURS, len(centers) - 1)
    nearest = KDTree(centers).query(centers, n_neighbours + 1)[1][:, 1:] if n_neighbours > 0 else np.empty((len(centers), 0), dtype=int)
    first, second = np.repeat(np.arange(len(centers)), n_neighbours), nearest.ravel()
    first, second = np.unique(np.sort(np.stack([first, second], axis=1), axis=1), axis=0).T  # each edge once
    edges = np.stack([centers[first], centers[second]], axis=1)
    weights = _over_workers(polyline_length, field, edges, n_jobs, 2) if len(edges) else np.zeros(0)
    return centers, first, second, weights


def _over_workers(function, field, curves, n_jobs, *args):
    """``function(field, curves, *args)`` on one part of the ``curves`` per worker (:func:`~riemlocal.utils.parallel.map_chunks`)
    where there are ``PARALLEL_WORK`` curves times centers; else in this process."""
    n_jobs = n_jobs if len(curves) * len(field.centers) >= PARALLEL_WORK else 1
    return map_chunks(functools.partial(_one_output, function, field, args), (curves,), len(curves), n_jobs, False, None)[0]


def _one_output(function, field, args, curves):
    """``function(field, curves, *args)`` as the one output of a :func:`~riemlocal.utils.parallel.map_chunks` solve."""
    return (function(field, curves, *args),)


def center_legs(field, points, graph):
    """Lengths of the straight legs from each of ``points`` ``(n, dim)`` to every center of ``graph`` (:func:`center_graph`),
    shape ``(n, R)`` (:func:`~riemlocal.numerics.polyline_length`, two pieces each): the legs of :func:`detour_routes`,
    computed once per point for all the pairs it ends."""
    centers = graph[0]
    segments = np.stack([np.repeat(points, len(centers), axis=0), np.tile(centers, (len(points), 1))], axis=1)
    return polyline_length(field, segments, 2).reshape(len(points), len(centers)) if len(segments) else np.zeros((len(points), 0))


def detour_routes(start, end, graph, legs, n_detours=DETOURS):
    """Detours from ``start`` to ``end`` (``(dim,)`` each), ``(n_detours + WAYPOINTS, 3, dim)``: through centers and waypoints.

    The detours through the ``n_detours`` centers of ``graph`` (:func:`center_graph`) whose two legs
    (``legs``, ``(2, R)``: :func:`center_legs` of the two ends) are shortest, and through ``WAYPOINTS`` points drawn
    uniformly (a fixed seed) in the box of the endpoints and the centers, widened by half its diagonal where there
    are no centers.
    """
    centers = graph[0]
    corners = np.concatenate([start[None], end[None], centers])
    low, high = corners.min(axis=0), corners.max(axis=0)
    if not len(centers):
        low, high = low - 0.5 * np.linalg.norm(high - low), high + 0.5 * np.linalg.norm(high - low)
    waypoints = np.random.default_rng(0).uniform(low, high, (WAYPOINTS, len(start)))
    closest = np.argsort(legs[0] + legs[1])[:n_detours]
    middles = np.concatenate([centers[closest], waypoints])
    return np.stack([np.broadcast_to(start, middles.shape), middles, np.broadcast_to(end, middles.shape)], axis=1)


def graph_routes(field, starts, ends, graph, legs):
    """The shortest polyline from each of ``starts`` to its ``ends`` (``(n, dim)`` each) on ``graph`` (:func:`center_graph`)
    joined to the two ends (each end to every center, by the straight legs ``legs``, ``(2, n, R)``:
    :func:`center_legs`, and the ends to each other). One Dijkstra search per distinct start: the shortest route to
    an end leaves the centers by one leg, so it is the shortest over centers :math:`c` of :math:`d(s, c)` plus the leg
    from :math:`c`, or the straight segment.
    """
    centers, first, second, weights = graph
    n = len(centers)
    direct = polyline_length(field, np.stack([starts, ends], axis=1), 2)
    distinct, start_of = unique_rows(starts)
    routes = [None] * len(starts)
    for k, start in enumerate(distinct):
        mine = np.flatnonzero(start_of == k)
        edges = coo_array((np.r_[legs[0, mine[0]], weights], (np.r_[np.zeros(n, dtype=int), first + 1], np.r_[np.arange(n) + 1, second + 1])), shape=(n + 1, n + 1))
        reach, predecessors = dijkstra(edges.tocsr(), directed=False, indices=0, return_predecessors=True)
        through = reach[None, 1:] + legs[1, mine]  # (pairs, R): to each center, then the leg to the end
        last = np.argmin(through, axis=1) if n else np.zeros(len(mine), dtype=int)
        for i, row in enumerate(mine):
            shorter = n and through[i, last[i]] < direct[row]  # else the straight segment
            inner = centers[np.array(shortest_path(predecessors, last[i] + 1)[1:], dtype=int) - 1] if shorter else centers[:0]
            routes[row] = np.concatenate([start[None], inner, ends[row, None]])
    return routes


def _shortest(nodes, first, second, weights):
    """The shortest polyline from node 0 to node 1 of the undirected graph with edges ``(first, second)``."""
    graph = coo_array((weights, (first, second)), shape=(len(nodes), len(nodes))).tocsr()
    _, predecessors = dijkstra(graph, directed=False, indices=0, return_predecessors=True)
    return nodes[shortest_path(predecessors, 1)]


def shortest_path(predecessors, target):
    """The nodes of Dijkstra's shortest path from its source to ``target``, in order, from the source's ``predecessors`` row."""
    path = [target]
    while predecessors[path[-1]] >= 0:  # the source's predecessor is negative
        path.append(predecessors[path[-1]])
    return path[::-1]


def resample(polyline, n_nodes, field=None):
    """``n_nodes`` points spaced evenly by arc length along ``polyline`` ``(..., k, dim)`` (a batch of polylines of ``k``
    nodes), endpoints included: Euclidean, or the ``field``'s (each segment split into ``RESAMPLE_PIECES`` pieces
    measured by :func:`~riemlocal.numerics.polyline_length`), which puts the nodes where the curve is expensive."""
    if field is not None:
        fractions = np.arange(RESAMPLE_PIECES)[:, None] / RESAMPLE_PIECES
        steps = np.diff(polyline, axis=-2)[..., None, :]
        pieces_of = (polyline[..., :-1, None, :] + fractions * steps).reshape(polyline.shape[:-2] + (-1, polyline.shape[-1]))
        polyline = np.concatenate([pieces_of, polyline[..., -1:, :]], axis=-2)
        pieces = segment_lengths(field, polyline)
    else:
        pieces = np.linalg.norm(np.diff(polyline, axis=-2), axis=-1)
    arc = np.concatenate([np.zeros(pieces.shape[:-1] + (1,)), np.cumsum(pieces, axis=-1)], axis=-1)
    targets = np.linspace(0.0, arc[..., -1], n_nodes, axis=-1)
    segment = np.minimum(np.sum(arc[..., None, 1:] <= targets[..., :, None], axis=-1), arc.shape[-1] - 2)  # np.interp's interval
    low, high = (np.take_along_axis(arc, segment + k, axis=-1) for k in (0, 1))
    first, second = (np.take_along_axis(polyline, (segment + k)[..., None], axis=-2) for k in (0, 1))
    with np.errstate(invalid="ignore", divide="ignore"):
        nodes = (second - first) / (high - low)[..., None] * (targets - low)[..., None] + first
    return np.where((targets >= arc[..., -1:])[..., None], polyline[..., -1:, :], nodes)
