"""Geodesic distances that never exceed the straight segment, on every call path (issue 20).

The pinned case: the wine pair of the geodesic-vs-line tutorial, where ``distance(rule="geodesic")``
(coarsest level 6 segments) returned 17.02, a minimizer whose first segment jumps across a sharp
blend transition, while the straight segment is 2.96 long and the manifold (8 segments) certified 2.748.
"""

import warnings

import numpy as np
import pytest
from scipy.sparse.csgraph import dijkstra
from sklearn.datasets import load_wine
from sklearn.decomposition import PCA
from sklearn.exceptions import ConvergenceWarning
from sklearn.preprocessing import StandardScaler

from riemlocal import ConstantField, LearnedMetricManifold, SmoothLocalField
from riemlocal.distances import distance
from riemlocal.learners import LDAMetric
from riemlocal.numerics import EXP_ATOL_FACTOR, EnergyLogSolver, integrate_geodesic, polyline_length
from riemlocal.numerics._solvers import CURVE_SUBDIVISIONS, JUMP_FACTOR, RANK_RESOLUTION, REACH_FRACTION, _integrate_states, _object_array, _route_lengths
from riemlocal.numerics import _routes as routes_module
from riemlocal.numerics._routes import CHECK_BLEND, DETOURS, REACH_CONTRAST, GRAPH_NEIGHBOURS, WAYPOINTS, FieldLattice, blend_sharpness, center_graph, center_legs, cheap_reach, detour_routes, graph_routes, lattice_alternatives, resample, sharp_blend
from riemlocal.placement import LocalMetrics
from test_compiled import random_spd


@pytest.fixture(scope="module")
def wine_pair():
    X, y = load_wine(return_X_y=True)
    X = PCA(n_components=5).fit_transform(StandardScaler().fit_transform(X))
    field = LocalMetrics(LDAMetric(), where="reference", n_references=10, random_state=0).fit(X, y).smooth_field(rho=1.0)
    return field, X[75], X[73]  # the tutorial's query 5 and candidate 8


def test_both_call_paths_agree_on_the_wine_pair_and_stay_below_the_line(wine_pair):
    field, a, b = wine_pair
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)  # certified on both paths: no warning
        by_rule = distance(field, a, b, rule="geodesic")
        space = LearnedMetricManifold(field)
        by_manifold = space.metric.dist(a, b)
    line = distance(field, a, b, rule="line_length")
    np.testing.assert_allclose(by_rule, 2.7478134, rtol=1e-6)
    np.testing.assert_allclose(by_rule, by_manifold, rtol=2e-6)
    assert by_rule < line
    result = space.metric.log_solver.last_result_
    assert result.converged and result.length <= polyline_length(field, result.curves[()][None])[0] + 1e-12


def test_the_retry_certifies_the_pair_that_a_six_segment_start_missed(wine_pair):
    field, a, b = wine_pair
    solver = EnergyLogSolver(field, n_segments=6)
    first = solver._solve_chunk(b[None], a[None], np.inf)
    assert first[1][0] > 10  # the jump minimizer of the coarse start: 17.0
    result = solver.solve(b, a, log_rtol=np.inf)
    assert result.converged and abs(result.length - 2.7478134) < 1e-5


def _corrupting(solver, lengths, errors, detour=None):
    """``solver._solve_chunk`` with the returned lengths and error estimates replaced (a solver gone wrong),
    and with ``detour`` its curves replaced by polylines through that point."""
    solve_chunk = solver._solve_chunk

    def corrupted(point, base_point, log_rtol):
        velocity, _, _, log_error, n_segments, optimized, curves, n_iter = solve_chunk(point, base_point, log_rtol)
        if detour is not None:
            for row in range(len(curves)):
                curves[row] = np.stack([base_point[row], detour, point[row]])
        return velocity, np.full(len(point), lengths), np.full(len(point), errors), log_error, n_segments, optimized, curves, n_iter

    return corrupted


CORRUPTED = [(17.0, 1e-2), (-16.79, 0.0), (np.nan, 0.0), (np.inf, np.inf)]
CORRUPTED_IDS = ["longer, uncertified", "negative, estimate 0", "nan", "inf"]


@pytest.mark.parametrize("length, error", CORRUPTED, ids=CORRUPTED_IDS)
def test_an_uncertified_distance_is_the_length_of_its_curve(length, error):
    field = SmoothLocalField([[2.0, 2.0], [4.0, 4.0]], [2 * np.eye(2), np.eye(2)])
    x, y = np.array([1.0, 3.0]), np.array([5.0, 3.0])
    solver = EnergyLogSolver(field, max_segments=32)  # no retry: 4 x 4 x 8 segments exceed the cap
    solver._solve_chunk = _corrupting(solver, length, error)
    with pytest.warns(ConvergenceWarning, match="not certified"):
        result = solver.solve(y, x)
    assert not result.converged
    np.testing.assert_allclose(result.length, polyline_length(field, result.curves[()][None])[0], rtol=1e-14)
    np.testing.assert_allclose(result.length, LearnedMetricManifold(field).metric.dist(x, y), rtol=1e-3)


@pytest.mark.parametrize("length, error", CORRUPTED, ids=CORRUPTED_IDS)
def test_no_distance_above_the_straight_segment(length, error):
    field = SmoothLocalField([[2.0, 2.0], [4.0, 4.0]], [2 * np.eye(2), np.eye(2)])
    x, y = np.array([1.0, 3.0]), np.array([5.0, 3.0])
    solver = EnergyLogSolver(field, max_segments=32)
    solver._solve_chunk = _corrupting(solver, length, error, detour=np.array([3.0, 10.0]))
    with pytest.warns(ConvergenceWarning, match="no shorter than the straight segment"):
        result = solver.solve(y, x)
    straight = distance(field, x, y, rule="line_length")
    np.testing.assert_allclose(result.length, straight, rtol=1e-10)
    assert not result.converged and result.error_estimate == np.inf
    np.testing.assert_array_equal(result.initial_velocity, y - x)
    np.testing.assert_array_equal(result.curves[()], [x, y])


def _sharp_field(seed, condition=1000.0, rho=2.0, n_centers=8):
    """Eight random metrics of condition up to ``condition``, centers uniform in [-2, 2]^2."""
    rng = np.random.default_rng(seed)
    rotations, _ = np.linalg.qr(rng.normal(size=(n_centers, 2, 2)))
    eigenvalues = np.exp(rng.uniform(0, np.log(condition), (n_centers, 2)))
    metrics = np.einsum("rij,rj,rkj->rik", rotations, eigenvalues, rotations)
    return SmoothLocalField(rng.uniform(-2, 2, (n_centers, 2)), metrics, rho=rho)


# (field seed, pair, the straight start's answer, the answer from the lattice route): the straight start is 88%,
# 49% and 19% too long, certified in the last two cases; the lattice route's answer is checked below against
# the Gauss-Legendre length of the curve returned (a fine lattice of 121 x 121 nodes over [-3, 3]^2, a real
# polyline, gave about 19.7, 8.1 and 12.6: shorter than the straight start, longer than the solver's geodesic)
HARD_PAIRS = [
    (3, [-0.478303, 0.901176], [0.791574, -1.485307], 25.569976, 13.621825),
    (3, [0.174677, -1.214812], [0.905894, -0.539971], 9.87852, 6.649048),
    (4, [1.88676, 1.098657], [0.102518, -1.403808], 14.88147, 12.517655),
]


@pytest.mark.parametrize("seed, x, y, straight_start, global_route", HARD_PAIRS)
def test_hard_pairs_take_the_shorter_route(seed, x, y, straight_start, global_route):
    field, x, y = _sharp_field(seed), np.array(x), np.array(y)
    solver = EnergyLogSolver(field)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        alone = solver._solve_chunk(y[None], x[None], np.inf)[1][0]  # the straight start only
        result = solver.solve(y, x, log_rtol=np.inf)
    np.testing.assert_allclose(alone, straight_start, rtol=1e-4)
    np.testing.assert_allclose(result.length, global_route, rtol=1e-5)
    curve_length = polyline_length(field, result.curves[()][None], 4)[0]  # an independent quadrature
    assert result.length <= curve_length + 1e-9 and curve_length - result.length <= 1e-5 * result.length
    assert result.length < distance(field, x, y, rule="line_length")


# pairs of benchmarks/bench_hard_geometry.py (its field generator, here inline), with the length of the
# independent reference curve (lattice of 241 x 241 nodes refined at 512 nodes): the straight start alone
# certified 11.567 (+23%), 21.710 (+5.8%), 5.636 (+4.6%), 4.0384 (+43%) and 7.8165 (+1.8%); the last two were
# certified at 64 segments, so that only the cheap lattice check of a 2-D field finds the detour (the last one on a
# field of sharpness 0.46, where a 17 x 17 lattice still found the longer route and 33 x 33 finds the shorter)
BENCHMARK_PAIRS = [
    (1000.0, 2.0, [0, 2, 1000, 20, 0], [-0.634907, -1.529785], [1.205394, 0.253351], 9.4191058),
    (1000.0, 1.0, [0, 2, 1000, 10, 0], [-0.943936, -1.386419], [1.897607, 0.008773], 20.52479919),
    (100.0, 2.0, [0, 2, 100, 20, 1], [-1.644059, 0.36653], [0.4136, 0.016578], 5.39057369),
    (100.0, 2.0, [1, 2, 100, 20, 1], [-0.368406, 1.48028], [-0.583845, 1.964098], 2.82436872),
    (1000.0, 0.5, [0, 2, 1000, 5, 1], [-0.09654, 0.132823], [-0.55494, 1.739421], 7.67725806),
    # a smooth field (sharpness 0.13: no lattice check) where the straight start certified a route 1.9% too long at 64 segments
    (10.0, 2.0, [0, 2, 10, 20, 1], [1.095128, 1.127576], [-1.73869, 1.817762], 5.93744276),
    # the search's full solves from its candidates ended as jump minimizers (real lengths 15.5 and 15.8) until they were
    # restarted from their curves resampled by the field's arc length; the pair had been uncertified at 13.686 (+2.3%)
    (1000.0, 1.0, [0, 2, 1000, 10, 1], [-0.645882, -1.66364], [1.215999, 1.851199], 13.3746026),
]


def _benchmark_field(condition, rho, seed, dim=2):
    rng = np.random.default_rng(seed)
    n_centers, metrics = int(rng.integers(5, 21)), []
    for _ in range(n_centers):
        rotation, _ = np.linalg.qr(rng.normal(size=(dim, dim)))
        metrics.append((rotation * np.exp(rng.uniform(0.0, np.log(condition), dim))) @ rotation.T)
    return SmoothLocalField(rng.uniform(-2, 2, (n_centers, dim)), np.array(metrics), rho=rho)


@pytest.mark.parametrize("compiled", [True, False])
def test_exp_does_not_step_over_a_blend_transition(compiled):
    """A geodesic of a benchmark field (condition 100, rho 1) whose Exp at ``rtol=1e-6`` took one step across a
    blend transition with an accepted error estimate, quadrupled its squared speed and ended 1.29 away from its end
    point; the speed check of the integrator rejects that step. With 24 random geodesics of the same field."""
    field, rng = _benchmark_field(100.0, 1.0, [6, 99]), np.random.default_rng(0)
    x = np.concatenate([[[-1.5094, 0.9856]], rng.uniform(-2, 2, (24, 2))])
    v = np.concatenate([[[2.6915, 0.5446]], rng.uniform(-3, 3, (24, 2))])
    reference = integrate_geodesic(field, v, x, (1.0,), rtol=1e-12, atol=1e-14)[:, 0]
    states = _integrate_states(field, np.hstack([x, v]), np.array([1.0]), 1e-6, 1e-6 * EXP_ATOL_FACTOR, np.inf, compiled)[:, 0]
    assert np.linalg.norm(states[:, :2] - reference, axis=1).max() < 1e-4  # 1.9e-5 (the first: 1.29 without the check)
    squared_speed = np.einsum("bi,bij,bj->b", v, field.metric_matrix(x), v)
    end_speed = np.einsum("bi,bij,bj->b", states[:, 2:], field.metric_matrix(states[:, :2]), states[:, 2:])
    np.testing.assert_allclose(end_speed, squared_speed, rtol=1e-4)


@pytest.mark.parametrize("compiled", [True, False])
def test_exp_does_not_step_over_a_thin_wall(compiled):
    """A geodesic of a benchmark field (condition 1000, rho 1) in a region of one metric crosses, at t = 0.58--0.68, a
    thin wall where another center's metric (eigenvalues 19 and 590) takes over and turns it by 100 degrees. The
    integrator's growing steps passed the wall with no stage in it: the metric on both sides is the same, so the
    squared speed did not change either, and the Exp ended 1.9 from the geodesic's end point (17 of 400 random
    geodesics of the field more than 1e-3 off). The chord bound of the field's ``hidden_weight`` rejects such steps.
    The reference takes steps of at most 1e-3, so that no wall goes unsampled whatever the check."""
    field, rng = _benchmark_field(1000.0, 1.0, [6, 99]), np.random.default_rng(0)
    x = np.concatenate([[[-1.61453, 0.89681]], rng.uniform(-2, 2, (60, 2))])
    v = np.concatenate([[[3.20331, 0.59796]], rng.uniform(-4, 4, (60, 2)) * rng.uniform(0.5, 3, (60, 1))])
    reference = integrate_geodesic(field, v, x, (1.0,), rtol=1e-10, max_step=1e-3)[:, 0]
    ends = integrate_geodesic(field, v, x, (1.0,), rtol=1e-7, compiled=compiled)[:, 0]  # a LearnedMetricManifold's default
    error = np.linalg.norm(ends - reference, axis=1) / np.linalg.norm(reference - x, axis=1)
    assert error.max() < 1e-4


# (field seed, pair index, reference) of D = 10 benchmark fields (condition 100, rho 2): the reference is the shortest
# of the straight line, the library's curve and detours through every center and 4 waypoints, refined to 256 nodes
# (an upper bound). Minimized by Newton alone at 32 segments, the first pair's detours all ended on the straight
# route (certified 17.33 at max_segments=2048, uncertified at 1024); by L-BFGS alone, the second's (13.16, certified).
TEN_DIMENSIONAL_PAIRS = [([0, 10, 100, 20, 1], 3, 15.11789376), ([1, 10, 100, 20, 1], 2, 12.09704954)]


@pytest.mark.parametrize("seed, index, reference", TEN_DIMENSIONAL_PAIRS)
def test_ten_dimensional_detours_find_the_reference_route(seed, index, reference):
    x, y = np.random.default_rng(seed + [1]).uniform(-2, 2, (5, 2, 10))[index]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        result = EnergyLogSolver(_benchmark_field(100.0, 2.0, seed, dim=10)).solve(y, x, log_rtol=np.inf)
    assert result.converged
    assert reference * (1 - 1e-3) <= result.length <= reference * (1 + 1e-6)


def test_a_certified_pair_s_jump_candidate_is_repaired():
    """A benchmark pair (seed 2, condition 1000, rho 2) certified from its straight start on a route 1.4% too long
    (6.6124, 512 segments): at ``max_segments=1024`` one of the search's full solves stops as a jump (6.7579,
    uncertified), and its restart from the curve resampled by the field's arc length finds the reference's route.
    Restarting only the candidates of uncertified pairs left it at 6.6124."""
    seed = [2, 2, 1000, 20, 1]
    x, y = np.random.default_rng(seed + [1]).uniform(-2, 2, (10, 2, 2))[8]
    result = EnergyLogSolver(_benchmark_field(1000.0, 2.0, seed), max_segments=1024).solve(y, x, log_rtol=np.inf)
    assert result.converged
    np.testing.assert_allclose(result.length, 6.52200862, rtol=1e-4)  # the reference: a real curve


def test_a_lattice_via_route_finds_a_geodesic_the_references_missed():
    """A benchmark pair (seed 2, condition 1000, rho 1) whose lattice route, its independent reference (22.5337) and,
    before via-routes, the solver (22.6917, certified) all followed a route 28% longer than the geodesic of the
    lattice's seventh route (7% longer on the lattice than its shortest path): 17.6682, a real curve."""
    seed = [2, 2, 1000, 10, 2]
    x, y = np.random.default_rng(seed + [1]).uniform(-2, 2, (10, 2, 2))[6]
    field = _benchmark_field(1000.0, 1.0, seed)
    result = EnergyLogSolver(field).solve(y, x, log_rtol=np.inf)
    assert result.converged
    np.testing.assert_allclose(result.length, 17.66826, rtol=1e-5)
    assert polyline_length(field, result.curves[()][None], CURVE_SUBDIVISIONS)[0] == pytest.approx(result.length, rel=1e-5)


@pytest.mark.xfail(strict=True, raises=AssertionError, reason="known limit: a pair certified at 32 segments on a smooth 2-D field is not searched")
def test_a_smooth_field_pair_certified_at_32_segments_takes_the_shorter_route():
    """A benchmark pair (seed 2, condition 10, rho 2, sharpness 0.18): the straight start settles on the edge of a
    costly region and is certified at 32 segments (2.75807); the route around it, from the lattice, is 2.68955. A check
    of every such pair would cost 20 to 100 times its solve (docs/concepts.rst); strict, so that a fix shows."""
    seed = [2, 2, 10, 20, 0]
    x, y = np.random.default_rng(seed + [1]).uniform(-2, 2, (10, 2, 2))[8]
    result = EnergyLogSolver(_benchmark_field(10.0, 2.0, seed)).solve(y, x, log_rtol=np.inf)
    assert result.converged and result.length <= 2.68955509 * (1 + 1e-4)


@pytest.mark.parametrize("condition, rho, seed, x, y, reference", BENCHMARK_PAIRS)
def test_benchmark_hard_pairs_reach_the_independent_reference(condition, rho, seed, x, y, reference):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        result = EnergyLogSolver(_benchmark_field(condition, rho, seed)).solve(np.array(y), np.array(x), log_rtol=np.inf)
    assert result.length <= reference * (1 + 1e-4)  # the reference is a real curve: at most round-off above it
    assert result.length >= reference * (1 - 1e-4)  # and the solver's curve is real too


def test_a_pair_whose_candidates_rank_wrongly_at_32_segments_is_not_silently_wrong():
    """A benchmark pair (condition 1000, rho 0.5) whose shorter route ranked only third at 32 segments, behind two
    starts that lead to the same longer geodesic (21.60, certified, +0.42%): the distinct routes refined to 64
    segments rank it first. Its curve is then within 5e-4 of the reference: uncertified at ``max_segments=1024``,
    certified at the default 2048 (21.5192, +4.9e-4: a neighbouring local minimum, under the benchmark's 1e-3)."""
    x, y, reference = np.array([1.745999, -1.950166]), np.array([-1.305101, 0.223677]), 21.50874707
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        result = EnergyLogSolver(_benchmark_field(1000.0, 0.5, [0, 2, 1000, 5, 0])).solve(y, x, log_rtol=np.inf)
    assert reference * (1 - 1e-4) <= result.length <= reference * (1 + 5e-4)
    assert result.converged or result.error_estimate >= (result.length - reference) / reference


def _sharp_field_5d(seed):
    """Eight random metrics of condition up to 100 at centers uniform in [-2, 2]^5, rho = 2: a nearly piecewise-constant blend."""
    rng = np.random.default_rng(seed)
    rotations, _ = np.linalg.qr(rng.normal(size=(8, 5, 5)))
    eigenvalues = np.exp(rng.uniform(0, np.log(100.0), (8, 5)))
    return SmoothLocalField(rng.uniform(-2, 2, (8, 5)), np.einsum("rij,rj,rkj->rik", rotations, eigenvalues, rotations), rho=2.0)


# (field seed, pair, the straight start's answer, the reference): the reference is the Gauss-Legendre length of a
# 512-node chain minimized by scipy's L-BFGS (benchmarks/_reference_geodesics.py, independent of the solver) from the
# best of the straight line, the solver's curves, the detours through the centers and through 8 random waypoints
HARD_PAIRS_5D = [
    (100, [-0.075, -1.645, -1.907, -0.095, -0.305], [-1.096, -0.594, 0.995, 0.226, -0.364], 8.679580, 8.07461597),
    (103, [0.335, -0.596, 1.447, -0.194, 0.135], [0.573, -0.447, -0.012, 1.655, -1.231], 8.263520, 7.74121929),
    (104, [-1.366, 0.856, 1.493, 1.129, 0.208], [1.08, -1.922, -1.286, 0.445, 0.771], 11.604304, 8.75707861),
]


@pytest.mark.parametrize("seed, x, y, straight_start, reference", HARD_PAIRS_5D)
def test_hard_pairs_in_five_dimensions_reach_the_independent_reference(seed, x, y, straight_start, reference):
    field, x, y = _sharp_field_5d(seed), np.array(x), np.array(y)
    solver = EnergyLogSolver(field)
    alone = solver._solve_chunk(y[None], x[None], np.inf)[1][0]  # the straight start only: a longer route
    np.testing.assert_allclose(alone, straight_start, rtol=1e-5)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        result = solver.solve(y, x, log_rtol=np.inf)
    assert result.converged and abs(result.length - reference) <= 1e-3 * reference
    assert result.length < alone and result.length < distance(field, x, y, rule="line_length")


def test_a_jump_minimizer_is_never_certified():
    """A curve with one segment 18 times the mean (a jump across the transition) fails the curve check; spread evenly, it passes."""
    field = SmoothLocalField([[0.0, 0.0], [1.0, 0.0]], [np.eye(2), 100 * np.eye(2)], rho=20.0)
    x, y = np.array([-1.0, 0.5]), np.array([1.5, 0.5])
    even = x + np.linspace(0, 1, 33)[:, None] * (y - x)
    jump = x + np.r_[np.linspace(0, 0.5, 32), 1.0][:, None] * (y - x)
    solver = EnergyLogSolver(field)
    for curve, certified in ((even, True), (jump, False)):
        length = polyline_length(field, curve[None], 8)  # the curve's own length: only the jump fails
        # reported as solved at 128 segments (a hard pair: easy pairs of a smooth field are not checked)
        outputs = (np.zeros((1, 2)), length, np.zeros(1), np.zeros(1), np.array([128]), np.ones(1, dtype=bool), _object_array([curve]), np.zeros(1))
        assert solver._assess(outputs, np.inf)[0][0] == certified


def test_a_jump_minimizer_is_repaired():
    """A solver whose curve jumps into the costly region, with the length its midpoints see and no error estimate: the
    curve check sends the pair to the global search, which returns the geodesic a plain solve finds, certified."""
    field = SmoothLocalField([[0.0, 0.0], [1.0, 0.0]], [np.eye(2), 100 * np.eye(2)], rho=2.0)
    x, y = np.array([-1.0, 0.5]), np.array([1.0, 0.0])  # y at the center of the costly region, inside its transition
    geodesic = EnergyLogSolver(field).dist(x, y)
    jump = x + np.r_[np.linspace(0, 0.5, 8), 1.0][:, None] * (y - x)
    steps, midpoints = np.diff(jump, axis=0), 0.5 * (jump[1:] + jump[:-1])
    seen = np.sqrt(np.einsum("ni,ni->n", steps, field.metric_vector_product(steps, midpoints))).sum()
    assert seen < 0.75 * geodesic  # the last segment's midpoint is outside the costly region
    solver = EnergyLogSolver(field)
    solve_chunk = solver._solve_chunk

    def jumping(point, base_point, log_rtol):
        velocity, _, _, log_error, n_segments, optimized, curves, n_iter = solve_chunk(point, base_point, log_rtol)
        curves[0] = jump
        return velocity, np.full(1, seen), np.zeros(1), log_error, n_segments, optimized, curves, n_iter

    solver._solve_chunk = jumping
    result = solver.solve(y, x, log_rtol=np.inf)
    assert result.converged and abs(result.length - geodesic) <= 1e-6 * geodesic


def test_resampling_by_the_field_s_arc_length_spaces_the_nodes_evenly_in_it():
    """Nodes of a 32-segment line across a sharp transition resampled by the field's arc length: segments of equal
    length (Gauss--Legendre) within 1%, their sum the line's; an isotropic constant metric gives the Euclidean nodes."""
    field = SmoothLocalField([[0.0, 0.0], [1.0, 0.0]], [np.eye(2), 100 * np.eye(2)], rho=2.0)
    line = np.linspace([-1.0, 0.5], [1.5, -0.1], 33)
    nodes = resample(line, 17, field)
    pieces = polyline_length(field, np.stack([nodes[:-1], nodes[1:]], axis=1), 8)
    assert np.ptp(pieces) <= 1e-2 * pieces.mean()
    np.testing.assert_allclose(pieces.sum(), polyline_length(field, line[None], 8)[0], rtol=1e-9)
    euclidean = resample(line, 17)
    uneven = polyline_length(field, np.stack([euclidean[:-1], euclidean[1:]], axis=1), 8)
    assert np.ptp(uneven) > pieces.mean()  # evenly spaced Euclidean nodes are far from even in the field
    np.testing.assert_allclose(resample(line, 17, ConstantField(4 * np.eye(2))), resample(line, 17), atol=1e-12)


def test_resampling_a_batch_equals_resampling_each_polyline_as_np_interp_does():
    """A batch of polylines (with repeated nodes, a point, a reversal) resampled at once: each as by np.interp per coordinate."""
    rng = np.random.default_rng(3)
    polylines = rng.normal(size=(6, 5, 3))
    polylines[1, 2] = polylines[1, 1]  # a segment of length zero
    polylines[2] = polylines[2, 0]  # every node the same point
    polylines[3, 3:] = polylines[3, 1::-1]  # back along itself
    batch = resample(polylines, 9)
    for polyline, nodes in zip(polylines, batch):
        arc = np.r_[0.0, np.cumsum(np.linalg.norm(np.diff(polyline, axis=0), axis=1))]
        targets = np.linspace(0.0, arc[-1], 9)
        np.testing.assert_allclose(nodes, np.stack([np.interp(targets, arc, c) for c in polyline.T], axis=1), rtol=0, atol=1e-14)
    np.testing.assert_array_equal(batch[:, [0, -1]], polylines[:, [0, -1]])


# jump minimizers on fields of benchmarks/bench_hard_geometry.py's construction at condition 1000 (seeds 1 and 2;
# the benchmark runs seed 0), with the length of the independent reference curve (a lattice route refined at 512
# nodes): from the straight start, every level keeps a segment across a transition and the pair is uncertified (7.2487
# and the straight segment's 8.2643); restarted from its curves resampled by the field's arc length, it is certified
JUMP_PAIRS = [
    (2.0, [1, 2, 1000, 20, 0], [-1.863488, 0.409431], [0.830503, 0.945652], 6.5732376),
    (2.0, [2, 2, 1000, 20, 0], [-0.181101, 1.69592], [-1.680687, 0.656079], 7.1886468),
]


@pytest.mark.parametrize("rho, seed, x, y, reference", JUMP_PAIRS)
def test_a_jump_minimizer_is_restarted_from_its_curve_resampled_by_the_field_s_arc_length(rho, seed, x, y, reference, monkeypatch):
    """Without the route search (whose candidates reach the reference too)."""
    field, x, y = _benchmark_field(1000.0, rho, seed), np.array(x), np.array(y)
    monkeypatch.setattr(EnergyLogSolver, "_search_routes", lambda *args: None)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        result = EnergyLogSolver(field).solve(y, x)
    assert result.converged and reference * (1 - 1e-4) <= result.length <= reference * (1 + 1e-5)
    steps = np.linalg.norm(np.diff(result.curves[()], axis=0), axis=1)
    assert steps.max() <= JUMP_FACTOR * steps.mean()
    monkeypatch.setattr(EnergyLogSolver, "_restart_resampled", lambda *args: None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        without = EnergyLogSolver(field).solve(y, x)
    assert not without.converged and without.length > 1.05 * reference


@pytest.mark.parametrize("scale, rho, sharp", [(1.0001, 30.0, False), (30.0, 30.0, True), (30.0, 0.3, False)])
def test_a_field_is_sharp_when_its_metric_changes_much_and_abruptly(scale, rho, sharp):
    """Only a large change within a sixteenth of the way between centers triggers the global search on every pair."""
    centers = np.array([[0.0, 0.0, 0.0], [1.0, 0.0, 0.0], [0.0, 3.0, 0.0]])
    metrics = np.tile(np.eye(3), (3, 1, 1))
    metrics[1, 0, 0] = scale  # the speed along the first gap changes by the factor sqrt(scale)
    assert sharp_blend(SmoothLocalField(centers, metrics, rho=rho)) is sharp


def test_one_isolated_center_does_not_make_a_field_of_many_centers_sharp():
    """The blend between a far center and the rest is abrupt (as digits' per-class field, 1,797 centers): the sharpest
    ``SHARP_OUTLIERS`` of the segments are left out, so that one does not send every pair of the field to the search,
    while among 20 centers it counts."""
    rng = np.random.default_rng(0)
    centers = np.vstack([rng.normal(size=(150, 3)), [[20.0, 0.0, 0.0]]])
    metrics = np.array([np.eye(3), np.diag([2.0, 1.0, 1.0])] * 75 + [np.diag([4.0, 1.0, 1.0])])
    assert not sharp_blend(SmoothLocalField(centers, metrics))
    assert sharp_blend(SmoothLocalField(centers[-21:], metrics[-21:]))


def test_the_fields_own_quadratures_over_workers_equal_those_in_one_process(monkeypatch):
    """center_graph and blend_sharpness split their curves over the workers above PARALLEL_WORK: same values."""
    rng = np.random.default_rng(5)
    field = SmoothLocalField(rng.uniform(-2, 2, (30, 3)), np.repeat(random_spd(rng, 3, 3, condition=30.0), 10, axis=0), rho=2.0)
    alone, sharpness = center_graph(field), blend_sharpness(field)
    monkeypatch.setattr(routes_module, "PARALLEL_WORK", 0)
    for expected, found in zip(alone, center_graph(field, n_jobs=2)):
        np.testing.assert_allclose(found, expected, rtol=1e-14)
    assert blend_sharpness(field, n_jobs=2) == pytest.approx(sharpness, rel=1e-12) and sharpness > 0.05
    assert [len(part) for part in center_graph(ConstantField(np.eye(3)), n_jobs=2)] == [0, 0, 0, 0]  # no centers


def test_detour_routes_take_the_centers_with_the_shortest_legs_and_graph_routes_are_shortest_paths():
    """With 40 centers: detours through the DETOURS centers whose two legs are shortest, the graph over each
    center's GRAPH_NEIGHBOURS nearest, and its routes, one Dijkstra search per distinct start, as long as the
    shortest path of each pair's own graph (the ends joined to every center and to each other)."""
    rng = np.random.default_rng(11)
    field = SmoothLocalField(rng.uniform(-2, 2, (40, 3)), random_spd(rng, 40, 3), rho=2.0)
    graph = center_graph(field)
    centers, first, second, weights = graph
    assert np.all(np.bincount(np.r_[first, second], minlength=40) >= GRAPH_NEIGHBOURS) and len(first) < 40 * 39 / 2
    start, end = np.array([-2.0, -2.0, 0.0]), np.array([2.0, 2.0, 0.5])
    routes = detour_routes(start, end, graph, center_legs(field, np.stack([start, end]), graph))
    assert routes.shape == (DETOURS + WAYPOINTS, 3, 3)
    legs = polyline_length(field, np.stack([np.stack([start, c, end]) for c in centers]), 2)
    np.testing.assert_array_equal(np.sort(routes[:DETOURS, 1], axis=0), np.sort(centers[np.argsort(legs)[:DETOURS]], axis=0))
    starts = np.concatenate([np.tile(start, (3, 1)), rng.uniform(-3, 3, (3, 3))])  # three pairs share a start
    ends = np.concatenate([end[None], rng.uniform(-3, 3, (4, 3)), start[None]])
    pair_legs = np.stack([center_legs(field, starts, graph), center_legs(field, ends, graph)])
    found = graph_routes(field, starts, ends, graph, pair_legs)
    for k, route in enumerate(found):
        nodes = np.concatenate([starts[k, None], ends[k, None], centers])
        edges = np.zeros((42, 42))
        edges[0, 2:], edges[1, 2:] = pair_legs[:, k]
        edges[0, 1] = polyline_length(field, np.stack([starts[k], ends[k]]), 2)
        edges[first + 2, second + 2] = weights
        shortest = dijkstra(edges, directed=False, indices=0)[1]
        np.testing.assert_array_equal(route[[0, -1]], nodes[:2])
        assert polyline_length(field, np.stack([route[:-1], route[1:]], axis=1), 2).sum() == pytest.approx(shortest, rel=1e-12)
    assert polyline_length(field, np.stack([found[0][:-1], found[0][1:]], axis=1), 2).sum() <= legs.min() * (1 + 1e-12)


def test_a_distance_matrix_has_no_distance_above_a_path_through_its_other_points():
    """A certified distance 30% too long (a solver gone wrong on one pair) is disproved by the path through a
    third point of the same call, and solved again from that path's curves: the true distance, certified."""
    field = SmoothLocalField([[0.0, 0.0], [2.0, 1.0]], [np.diag([1.0, 4.0]), np.diag([3.0, 1.0])], rho=1.0)
    points = np.array([[-1.0, 0.0], [1.0, 0.6], [3.0, 1.0]])
    i, j = np.triu_indices(3, 1)
    truth = EnergyLogSolver(field).solve(points[j], points[i], log_rtol=np.inf)
    solver = EnergyLogSolver(field)
    solve_chunk = solver._solve_chunk

    def too_long(point, base_point, log_rtol):
        outputs = list(solve_chunk(point, base_point, log_rtol))
        far = np.array([{tuple(a), tuple(b)} == {tuple(points[0]), tuple(points[2])} for a, b in zip(point, base_point)])
        outputs[1] = np.where(far, 1.3 * outputs[1], outputs[1])
        return tuple(outputs)

    solver._solve_chunk = too_long
    assert (solver._solve_chunk(points[[2]], points[[0]], np.inf)[1] > 1.29 * truth.length[1]).all()  # the corruption works
    result = solver.solve(points[j], points[i], log_rtol=np.inf)
    assert result.converged.all()
    np.testing.assert_allclose(result.length, truth.length, rtol=1e-6)
    by_hops = truth.length[0] + truth.length[2]
    assert truth.length[1] < by_hops < 1.3 * truth.length[1]  # the path through the middle point is what disproves it


def test_candidate_routes_are_ranked_by_lengths_resolved_where_the_field_needs_it():
    """Two Gauss pieces per segment where they agree with one, ``CURVE_SUBDIVISIONS`` where they do not: here within
    ``RANK_RESOLUTION`` of the fine lengths, while the two-piece length alone is off by more on half the routes."""
    field = _sharp_field(3)
    rng = np.random.default_rng(7)
    walks = np.cumsum(rng.normal(scale=0.15, size=(20, 17, 2)), axis=1)  # routes of 16 segments crossing sharp transitions
    lines = walks[:, :1] + np.linspace(0.0, 1.0, 17)[:, None] * (walks[:, -1:] - walks[:, :1])
    curves = np.concatenate([walks, lines])
    fine, two = polyline_length(field, curves, CURVE_SUBDIVISIONS), polyline_length(field, curves, 2)
    ranked = _route_lengths(field, curves)
    assert np.all(np.abs(ranked - fine) <= RANK_RESOLUTION * fine)
    assert np.sum(np.abs(two - fine) > 2 * RANK_RESOLUTION * fine) >= 10  # the fine quadrature was needed there
    assert np.sum(ranked == two) >= 10  # and not everywhere


def _hill_field():
    """A steep hill (20 I) between two flat centers, a lower ridge (3 I) above it: two routes around the hill."""
    centers = np.array([[0.0, 0.0], [0.0, 1.2], [-2.0, 0.0], [2.0, 0.0], [0.0, -2.0], [0.0, 2.5]])
    metrics = np.array([20.0 * np.eye(2), 3.0 * np.eye(2)] + [np.eye(2)] * 4)
    return SmoothLocalField(centers, metrics, rho=1.0)


def test_the_screen_finds_the_other_side_of_a_hill_on_a_smooth_field(monkeypatch):
    """The straight start, just above the hill, certifies the route over the ridge at 64 segments (4.923); the
    route below the hill is 8% shorter. The field is smooth (no lattice check), so only the screen sees it."""
    field = _hill_field()
    assert blend_sharpness(field) < CHECK_BLEND
    a, b = np.array([-2.0, 0.2]), np.array([2.0, 0.2])
    result = EnergyLogSolver(field).solve(b, a)
    curve = result.curves[()]
    assert result.converged and curve[len(curve) // 2, 1] < -0.5  # below the hill
    np.testing.assert_allclose(result.length, 4.534217, rtol=1e-5)
    assert polyline_length(field, curve[None], CURVE_SUBDIVISIONS)[0] == pytest.approx(result.length, rel=1e-4)
    monkeypatch.setattr(EnergyLogSolver, "_screen_routes", lambda *args: False)
    local = EnergyLogSolver(field).solve(b, a)  # without the screen: the route over the ridge, certified
    assert local.converged and local.n_segments == 64 and local.length > 1.08 * result.length


def test_lattice_alternatives_give_both_sides_of_a_hill_shortest_first():
    """Around the hill of ``_hill_field`` the pair's lattice has two routes, below the hill and over the ridge, 8%
    apart: the shortest path comes first, and a via-route exposes the other; every route joins the pair's ends and is
    within the slack of the shortest; without slack, the shortest path alone."""
    field = _hill_field()
    a, b = np.array([-2.0, 0.2]), np.array([2.0, 0.2])
    routes = lattice_alternatives(field, a, b, n_routes=4, slack=0.12)
    lengths = np.array([polyline_length(field, route[None], 8)[0] for route in routes])
    middles = np.array([route[np.argmin(np.abs(route[:, 0])), 1] for route in routes])
    assert len(routes) >= 2 and all(np.array_equal(r[0], a) and np.array_equal(r[-1], b) for r in routes)
    assert middles[0] < -0.5 and np.any(middles > 0.5)  # the shortest below the hill, another over the ridge
    assert lengths[0] == pytest.approx(lengths.min(), rel=0.02) and np.all(lengths <= 1.12 * lengths[0] * 1.03)
    alone = lattice_alternatives(field, a, b, n_routes=4, slack=0.0)
    assert len(alone) == 1 and np.array_equal(alone[0], routes[0])


def test_the_field_lattice_routes_are_shortest_paths_of_its_graph():
    """On a constant metric the lattice's route lengths are never below the metric lengths and at most the excess
    of its 16 directions (3%) above them, plus the legs to the nearest nodes (half a cell's diagonal at each end,
    itself up to 3% longer by the lattice); its paths run between the nodes it reports, by lattice steps."""
    metric = np.array([[1.0, 0.5], [0.5, 4.0]])
    field = SmoothLocalField(np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 2.0]]), np.array([metric] * 3))
    lattice = FieldLattice(field)
    rng = np.random.default_rng(0)
    a, b = rng.uniform(-0.5, 1.5, (2, 50, 2))
    metrics = np.broadcast_to(metric, (50, 2, 2))
    lengths, start, end = lattice.route_lengths(lattice.near(a, metrics), lattice.near(b, metrics))
    exact = np.sqrt(np.einsum("nd,de,ne->n", b - a, metric, b - a))
    diagonal = np.sqrt(lattice.step @ metric @ lattice.step)
    assert np.all(lengths >= exact * (1 - 1e-12)) and np.all(lengths <= 1.03 * (exact + diagonal))
    paths = lattice.paths(start, end)
    np.testing.assert_array_equal(paths[:, 0], lattice.nodes[start])
    np.testing.assert_array_equal(paths[:, -1], lattice.nodes[end])
    hops = np.diff(paths, axis=1) / lattice.step
    assert np.all(np.abs(np.rint(hops) - hops) < 1e-9) and np.abs(np.rint(hops)).max() == 2  # steps of the lattice
    far = lattice.near(np.array([[50.0, 50.0]]), metric[None])
    assert np.isinf(lattice.route_lengths(far, lattice.near(a[:1], metrics[:1]))[0][0])  # off the lattice: no route


def test_the_sharpness_skips_duplicate_centers_without_a_warning():
    """Per-class fields put a center at every training point, duplicates included (iris has some)."""
    rng = np.random.default_rng(4)
    centers = rng.normal(size=(6, 2))
    metrics = np.array([np.diag([1.0, 50.0]), np.eye(2)] * 3)
    distinct = SmoothLocalField(centers, metrics, rho=2.0)
    doubled = SmoothLocalField(np.vstack([centers, centers[:1]]), np.vstack([metrics, metrics[:1]]), rho=2.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        value = blend_sharpness(doubled)
        assert blend_sharpness(SmoothLocalField(np.vstack([centers[:1]] * 3), metrics[:3])) == 0.0  # no two centers apart
    assert 0.0 < value <= 1.0 and 0.0 < blend_sharpness(distinct) <= 1.0


#: iris' per-class LMNN metrics (classes 0, 1, 2; standardized features) as ``LocalMetrics(LMNNMetric(), where="class")``
#: learned them (scikit-learn 1.9.1, scipy 1.17.1), rounded to 12 digits. Literal: the optimizer's last digits move with
#: the dependencies' releases, and a test of routes 0.14% apart once failed on them (pinned with LMNN refitted).
IRIS_LMNN_METRICS = np.array(
    [[[0.003323425786, -0.010190760029, 0.062612859185, 0.030534689267], [-0.010190760029, 0.031867951686, -0.195792478429, -0.095459214869], [0.062612859185, -0.195792478429, 1.202974646925, 0.586430424978], [0.030534689267, -0.095459214869, 0.586430424978, 0.286066148343]], [[3.21625414701, 0.423223095946, -0.859657241003, 0.852021161432], [0.423223095946, 1.174086515229, -1.138095923804, 0.61113464213], [-0.859657241003, -1.138095923804, 4.406068079656, -1.815009885518], [0.852021161432, 0.61113464213, -1.815009885518, 5.127245803868]], [[2.160555459678, -0.326217534602, -1.431495767208, -0.618512494474], [-0.326217534602, 1.507599709079, -0.494346004015, -0.401857081221], [-1.431495767208, -0.494346004015, 4.031550134041, 2.934812933235], [-0.618512494474, -0.401857081221, 2.934812933235, 2.250812439893]]]
)


def _iris_field(max_condition):
    """The smooth blend (rho 1) of :data:`IRIS_LMNN_METRICS` bounded at ``max_condition``, and the 60 points of
    ``benchmarks/bench_learned_fields.py``."""
    from sklearn.datasets import load_iris

    from riemlocal.learners._local_fit import bound_condition

    X, y = load_iris(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    field = SmoothLocalField(X, bound_condition(IRIS_LMNN_METRICS, max_condition)[0][y], rho=1.0)
    return field, X[np.random.default_rng(0).choice(150, 60, replace=False)]


def test_cheap_reach_counts_the_directions_along_which_one_metric_is_much_cheaper():
    """Generalized eigenvalues of every two distinct metrics: a metric REACH_CONTRAST times cheaper along 3 of 4
    directions is 0.75; twice as cheap everywhere, 0; shared metrics count once, a single one is 0."""
    centers = np.random.default_rng(0).normal(size=(4, 4))
    rotation = np.linalg.qr(np.random.default_rng(1).normal(size=(4, 4)))[0]
    collapsed = rotation @ np.diag([1.0, 1.0, 1.0, 1.0 / (REACH_CONTRAST * 1.01)]) @ rotation.T
    assert cheap_reach(SmoothLocalField(centers, [np.eye(4), np.eye(4), 5.0 * collapsed, np.eye(4)])) == 0.75
    assert cheap_reach(SmoothLocalField(centers, [np.eye(4), 2.0 * np.eye(4), np.eye(4), 2.0 * np.eye(4)])) == 0.0
    assert cheap_reach(SmoothLocalField(centers, [np.eye(4)] * 4)) == 0.0


def _reach_field():
    """A row of unit metrics along x, and above it (z = 4) two centers whose metric is 100 times cheaper along x, y
    and w: far along those, their proximity in their own metric wins, and a route up through their reach is cheap."""
    xs = np.linspace(-8.0, 8.0, 9)
    centers = np.concatenate([np.stack([xs, 0 * xs, 0 * xs, 0 * xs], axis=1), [[0.0, 0.0, 4.0, 0.0], [1.0, 0.0, 4.0, 0.0]]])
    metrics = np.array([np.eye(4)] * 9 + [np.diag([0.01, 0.01, 1.0, 0.01])] * 2)
    return SmoothLocalField(centers, metrics, rho=1.0)


def test_the_search_takes_the_route_through_a_cheap_metric_s_reach(monkeypatch):
    """The straight start certifies the route along the row (16.008, the line's length); the route through the
    cheap metric's reach is 6.953. Only the search of every pair of a field of wide cheap reach finds it."""
    field = _reach_field()
    assert cheap_reach(field) > REACH_FRACTION and not sharp_blend(field)
    a, b = np.array([-8.0, 0.3, 0.0, 0.0]), np.array([8.0, -0.3, 0.0, 0.2])
    result = EnergyLogSolver(field).solve(b, a, log_rtol=np.inf)
    assert result.converged and result.length == pytest.approx(6.95325008, rel=1e-6)
    assert result.curves[()][:, 2].max() > 2.0  # up into the reach
    assert polyline_length(field, result.curves[()][None], CURVE_SUBDIVISIONS)[0] == pytest.approx(result.length, rel=1e-4)
    monkeypatch.setattr("riemlocal.numerics._solvers.REACH_FRACTION", 1.0)
    local = EnergyLogSolver(field).solve(b, a, log_rtol=np.inf)
    assert local.converged and local.length > 2.3 * result.length  # certified, and wrong: why every pair is searched


@pytest.mark.parametrize("pair, truth", [((8, 36), 5.3150081), ((20, 36), 4.9341389), ((36, 48), 5.2078001)])
def test_pairs_of_iris_at_condition_100_take_the_route_through_class_0_s_reach(pair, truth):
    """Iris' per-class field at max_condition=100 (class 0's metric is 100 times cheaper along 3 directions): from
    the straight start these pairs were certified 19%, 22% and 12% too long (6.3375, 6.0401, 5.8484); the search of
    every pair finds the routes through class 0's reach, beyond the data."""
    field, points = _iris_field(100.0)
    assert cheap_reach(field) == 0.75
    i, j = pair
    result = EnergyLogSolver(field).solve(points[j], points[i], log_rtol=np.inf)
    assert result.converged and result.length == pytest.approx(truth, rel=1e-6)


def test_a_pair_of_iris_at_condition_1000_is_certified_on_its_shortest_route():
    """Solved alone from the straight start, this pair was certified 14% too long (4.812); the 60-point matrix's
    triangle check found 4.141 through other points. The search of every pair finds it alone."""
    field, points = _iris_field(1000.0)
    result = EnergyLogSolver(field).solve(points[38], points[35], log_rtol=np.inf)
    assert result.converged and result.length <= 4.1406 * (1 + 1e-4)


def test_a_distance_matrix_s_triangle_check_finds_the_iris_route_its_search_misses():
    """Iris at max_condition=100, points 32 and 51 (classes 2 and 0): with point 53 (class 0, 0.199 from point 51) in
    the same call, the path through it disproves the pair's searched answer (4.5316) and the pair is solved again from
    the joined curves: 4.39196, 3.1% shorter, certified, a real curve."""
    field, points = _iris_field(100.0)
    a, b, c = points[32], points[51], points[53]
    result = EnergyLogSolver(field).solve(np.stack([b, c, b]), np.stack([a, a, c]), log_rtol=np.inf)
    assert result.converged.all()
    np.testing.assert_allclose(result.length, [4.39195846, 4.21432332, 0.19938263], rtol=1e-6)
    assert polyline_length(field, result.curves[0][None], CURVE_SUBDIVISIONS)[0] == pytest.approx(result.length[0], rel=1e-4)


@pytest.mark.xfail(strict=True, raises=AssertionError, reason="known limit: every candidate of the search minimizes back to the longer route")
def test_the_iris_pair_alone_takes_the_route_through_its_neighbour():
    """The pair of the test above, solved alone: its straight start, its waypoints, its graph route and even the
    straight detour through point 53 minimize (Newton, 32 segments) to a route certified at 4.5316, 3.2% too long;
    the geodesic to point 53 from a straight start lies in the other basin. Strict, so that a fix shows."""
    field, points = _iris_field(100.0)
    result = EnergyLogSolver(field).solve(points[51], points[32], log_rtol=np.inf)
    assert result.converged and result.length <= 4.39195846 * (1 + 1e-4)
