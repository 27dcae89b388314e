"""Distance rules: the exact line integral against the paper's algorithm, closed forms, batching, errors."""

import re

import numpy as np
import pytest
from helpers import random_spd
from joblib import parallel_config

from riemlocal.distances import distance, pairwise_distances
from riemlocal.fields import (
    ConstantField,
    MetricField,
    NearestLocalField,
    RBFLocalField,
    SmoothLocalField,
    _envelope,
)
from riemlocal.fields._envelope import _lower_envelope
from riemlocal.utils.arrays import quadratic_forms


def paper_line_integral(field, x, y):
    """Ramanan & Baker Sec. II-E, written independently: all pairwise boundary roots on [0, 1],
    sorted, and each segment's cell looked up at its midpoint. Returns (energy, length)."""
    d = y - x
    proximity = field.metrics if field.proximity is None else np.array([field.proximity] * field.n_centers)
    offsets = x - field.centers
    a = np.einsum("i,rij,j->r", d, proximity, d)
    b = 2 * np.einsum("i,rij,rj->r", d, proximity, offsets)
    c = np.einsum("ri,rij,rj->r", offsets, proximity, offsets)
    r, s = np.triu_indices(field.n_centers, 1)
    qa, qb, qc = a[r] - a[s], b[r] - b[s], c[r] - c[s]  # boundary: qa t^2 + qb t + qc = 0
    disc = qb**2 - 4 * qa * qc
    quadratic = (qa != 0) & (disc >= 0)
    root = np.sqrt(np.where(quadratic, disc, 0.0))
    with np.errstate(divide="ignore", invalid="ignore"):
        roots = np.r_[
            ((-qb + root) / (2 * qa))[quadratic],
            ((-qb - root) / (2 * qa))[quadratic],
            (-qc / qb)[(qa == 0) & (qb != 0)],
        ]
    breaks = np.unique(np.r_[0.0, 1.0, roots[(roots > 0) & (roots < 1)]])
    cells = field.nearest_center(x + 0.5 * (breaks[1:] + breaks[:-1])[:, None] * d)
    speed2 = np.einsum("i,pij,j->p", d, field.metrics[cells], d)
    return np.sum(np.diff(breaks) * speed2), np.sum(np.diff(breaks) * np.sqrt(speed2))


def assert_matches_paper(field, X, Y, rtol=1e-10):
    energy = pairwise_distances(field, X, Y, rule="line", squared=True)
    length = pairwise_distances(field, X, Y, rule="line_length")
    expected = np.array([[paper_line_integral(field, x, y) for y in Y] for x in X])
    np.testing.assert_allclose(energy, expected[..., 0], rtol=rtol)
    np.testing.assert_allclose(length, expected[..., 1], rtol=rtol)


@pytest.mark.parametrize("own_metric", [True, False])
@pytest.mark.parametrize("dim, n_centers", [(2, 8), (3, 15), (6, 30)])
def test_exact_line_integral_matches_paper_algorithm(own_metric, dim, n_centers):
    rng = np.random.default_rng(dim * n_centers + own_metric)
    proximity = None if own_metric else random_spd(rng, 1, dim)[0]
    field = NearestLocalField(rng.normal(size=(n_centers, dim)), random_spd(rng, n_centers, dim), proximity)
    X, Y = 2.0 * rng.normal(size=(2, 6, dim))
    assert_matches_paper(field, X, Y)


def test_lines_cross_many_cells():
    """The oracle comparison is only meaningful if lines really cross several cells."""
    rng = np.random.default_rng(3)
    field = NearestLocalField(rng.normal(size=(30, 2)), random_spd(rng, 30, 2, condition=30.0))
    x, y = np.array([-3.0, -2.0]), np.array([3.0, 2.5])
    lam = np.linspace(0, 1, 20001)
    assert len(np.unique(field.nearest_center(x + lam[:, None] * (y - x)))) >= 5
    assert_matches_paper(field, x[None], y[None])


def circle_field():
    """Cell 1 (center (0, 3), metric 4I) is the disk |p - (0, 4)| < 2 inside cell 0 (center 0, metric I).

    All data are dyadic, so an exact tangent stays exact in floating point.
    """
    return NearestLocalField([[0.0, 0.0], [0.0, 3.0]], [np.eye(2), 4.0 * np.eye(2)])


@pytest.mark.parametrize("offset", [0.0, 1e-5, 1e-8, -1e-8, 0.5])
def test_near_tangent_line_closed_form(offset):
    """The line at height 2 + offset grazes the disk: exact touch, thin chords and a miss."""
    field = circle_field()
    x, y = np.array([-3.0, 2.0 + offset]), np.array([3.0, 2.0 + offset])
    half_chord = np.sqrt(max(0.0, 4.0 - (2.0 - offset) ** 2))
    inside = 2.0 * half_chord / 6.0  # fraction of the segment in cell 1
    energy = distance(field, x, y, rule="line", squared=True)
    np.testing.assert_allclose(energy, 36.0 * (1 - inside) + 144.0 * inside, rtol=1e-12)
    length = distance(field, x, y, rule="line_length")
    np.testing.assert_allclose(length, 6.0 * (1 - inside) + 12.0 * inside, rtol=1e-12)
    if offset >= 1e-5:
        assert_matches_paper(field, x[None], y[None])


def test_points_exactly_on_cell_boundaries():
    # global proximity: cells x1 < 0 (metric I) and x1 > 0 (metric diag(4, 9)); boundary x1 = 0
    field = NearestLocalField([[-1.0, 0.0], [1.0, 0.0]], [np.eye(2), np.diag([4.0, 9.0])], proximity=np.eye(2))
    cases = [
        ([0.0, -1.0], [0.0, 2.0], 9.0),  # along the boundary: equal parabolas, the lowest index wins
        ([0.0, 0.5], [2.0, 0.5], 16.0),  # start on the boundary, go right
        ([0.0, 0.5], [-2.0, 0.5], 4.0),  # start on the boundary, go left
        ([-2.0, 0.5], [0.0, 0.5], 4.0),  # end on the boundary
        ([-1.0, 0.0], [1.0, 0.0], 0.5 * 4.0 + 0.5 * 16.0),
    ]
    for x, y, expected in cases:
        assert distance(field, x, y, rule="line", squared=True) == pytest.approx(expected, rel=1e-14)
    assert_matches_paper(field, np.array([c[0] for c in cases]), np.array([c[1] for c in cases]))

    # own metrics: (2, 0) lies exactly on the circle |p - (4, 0)| = 2 bounding cell 1
    field = NearestLocalField([[0.0, 0.0], [3.0, 0.0]], [np.eye(2), 4.0 * np.eye(2)])
    assert distance(field, [2.0, 0.0], [0.0, 0.0], rule="line", squared=True) == pytest.approx(4.0, rel=1e-14)
    assert distance(field, [2.0, 0.0], [4.0, 0.0], rule="line", squared=True) == pytest.approx(16.0, rel=1e-14)
    assert distance(field, [0.0, 0.0], [6.0, 0.0], rule="line", squared=True) == pytest.approx(36 * (1 / 3 + 4 * 2 / 3))


def test_several_cells_meeting_in_one_point():
    """Four cells meet at the origin; all parabolas tie there and the order of equal roots is arbitrary."""
    centers = np.array([[-1.0, -1.0], [1.0, -1.0], [-1.0, 1.0], [1.0, 1.0]])
    metrics = np.array([1.0, 2.0, 3.0, 4.0])[:, None, None] * np.eye(2)
    field = NearestLocalField(centers, metrics, proximity=np.eye(2))
    X = np.array([[-0.5, -0.5], [-0.5, -0.5], [0.0, 0.0], [-0.5, 0.5]])
    Y = np.array([[0.5, 0.5], [0.0, 0.0], [0.5, 0.5], [0.5, -0.5]])
    energy = distance(field, X, Y, rule="line", squared=True)
    # |d|^2 = 2, 0.5, 0.5, 2; half of the first and last segments in each of two cells
    np.testing.assert_allclose(energy, [0.5 * 2 * (1 + 4), 0.5 * 1, 0.5 * 4, 0.5 * 2 * (3 + 2)], rtol=1e-14)
    assert_matches_paper(field, X, Y)


def test_duplicate_centers_give_equal_parabolas():
    rng = np.random.default_rng(5)
    centers, metrics = rng.normal(size=(6, 3)), random_spd(rng, 6, 3)
    field = NearestLocalField(centers, metrics)
    doubled = NearestLocalField(np.r_[centers, centers], np.r_[metrics, metrics])
    X, Y = 2.0 * rng.normal(size=(2, 5, 3))
    for rule in ("line", "line_length"):
        np.testing.assert_allclose(distance(doubled, X, Y, rule=rule), distance(field, X, Y, rule=rule), rtol=1e-13)


def unpruned_walk(field, X, Y):
    """Energies and lengths from the envelope walk on every center's exact parabola (no pruning),
    coefficients from differences with einsum, independently of the field's own code."""
    d, v = Y - X, X[:, None, :] - field.centers
    proximity = field.metrics if field.proximity is None else np.broadcast_to(field.proximity, field.metrics.shape)
    a = np.einsum("pi,rij,pj->pr", d, proximity, d)
    b = 2 * np.einsum("pi,rij,prj->pr", d, proximity, v)
    c = np.einsum("pri,rij,prj->pr", v, proximity, v)
    pair, cell, span = _lower_envelope(a, b, c)
    speed2 = np.einsum("pi,pij,pj->p", d[pair], field.metrics[cell], d[pair])
    return np.bincount(pair, span * speed2), np.bincount(pair, span * np.sqrt(speed2))


def count_exact_curvatures(monkeypatch):
    """Spy on the exact float64 curvatures the pruned walk computes: returns the list of batch sizes."""
    sizes = []

    def spy(matrices, index, vectors):
        sizes.append(len(index))
        return quadratic_forms(matrices, index, vectors)

    monkeypatch.setattr(_envelope, "quadratic_forms", spy)
    return sizes


def assert_exact(field, X, Y, rtol=1e-12, paper=True):
    """Pruned walk = unpruned walk (and the paper's algorithm) to ``rtol``; each piece's cell is the
    nearest center at the piece's midpoint."""
    energy = distance(field, X, Y, rule="line", squared=True)
    length = distance(field, X, Y, rule="line_length")
    reference = unpruned_walk(field, X, Y)
    np.testing.assert_allclose(energy, reference[0], rtol=rtol)
    np.testing.assert_allclose(length, reference[1], rtol=rtol)
    if paper:
        expected = np.array([paper_line_integral(field, x, y) for x, y in zip(X, Y)])
        np.testing.assert_allclose(energy, expected[:, 0], rtol=rtol)
        np.testing.assert_allclose(length, expected[:, 1], rtol=rtol)
    pair, span, cell, _ = field.segment_cells(X, Y)
    order = np.argsort(pair, kind="stable")  # pieces of one segment come in order along it
    pair, span, cell = pair[order], span[order], cell[order]
    ends = np.cumsum(span) - np.r_[0.0, np.cumsum(span)][np.searchsorted(pair, pair)]
    middle = ends - 0.5 * span
    wide = span > 1e-6  # a midpoint decides a piece's cell unless the piece is within rounding of a boundary
    points = X[pair] + middle[:, None] * (Y - X)[pair]
    np.testing.assert_array_equal(field.nearest_center(points[wide]), cell[wide])


@pytest.mark.parametrize("dim, n_centers, condition", [(4, 60, 10.0), (12, 120, 100.0), (30, 200, 1e3)])
def test_pruned_envelope_is_exact(dim, n_centers, condition, monkeypatch):
    """Random fields where the float32 bounds prune most centers: same cells and sums as the unpruned walk."""
    rng = np.random.default_rng(dim)
    field = NearestLocalField(rng.normal(size=(n_centers, dim)), random_spd(rng, n_centers, dim, condition))
    X, Y = 1.5 * rng.normal(size=(2, 40, dim))
    sizes = count_exact_curvatures(monkeypatch)
    assert_exact(field, X, Y, paper=dim <= 12)
    assert 0 < sizes[0] < 0.25 * len(X) * n_centers  # pruning is active: most curvatures never formed (one call)


def test_per_query_calls_reuse_candidate_norms(monkeypatch):
    """Per-query calls remember each candidate's float32 norms on the field: computed once per distinct
    candidate, the same values as one batched call (to rounding), and the memo stays within TASK_ELEMENTS numbers."""
    rng = np.random.default_rng(5)
    dim, n_centers = 8, 50
    field = NearestLocalField(rng.normal(size=(n_centers, dim)), random_spd(rng, n_centers, dim, 100.0))
    train, queries = 1.5 * rng.normal(size=(2, 30, dim))
    candidates = train[rng.integers(0, 30, size=(len(queries), 6))]
    computed = []
    packed_norms = _envelope._packed_norms
    monkeypatch.setattr(_envelope, "_packed_norms", lambda arrays, points: computed.append(len(points)) or packed_norms(arrays, points))
    per_query = np.array([distance(field, q, c, rule="line", squared=True) for q, c in zip(queries, candidates)])
    assert sum(computed) == len(field._norm_memo) == len(np.unique(candidates.reshape(-1, dim), axis=0))
    batched = distance(field, queries[:, None], candidates, rule="line", squared=True)
    np.testing.assert_allclose(per_query, batched, rtol=1e-12)  # exact forms summed in another order (quadratic_forms)
    np.testing.assert_allclose(batched, unpruned_walk(field, queries.repeat(6, 0), candidates.reshape(-1, dim))[0].reshape(batched.shape), rtol=1e-12)
    monkeypatch.setattr(_envelope, "TASK_ELEMENTS", 10 * n_centers)  # room for 10 candidates: the memo is cleared
    field._norm_memo.clear()
    for q, c in zip(queries, candidates):
        distance(field, q, c, rule="line")
        assert len(field._norm_memo) * n_centers <= 10 * n_centers


def test_one_query_reads_the_packed_triangles(monkeypatch):
    """A call with one query computes its P_r x from the packed triangles (batches use the stacked matrices):
    the pruned walk still equals the unpruned one, and the batched call, which prunes with the other estimates."""
    rng = np.random.default_rng(8)
    dim, n_centers = 20, 150
    field = NearestLocalField(rng.normal(size=(n_centers, dim)), random_spd(rng, n_centers, dim, 1e3))
    queries, candidates = 1.5 * rng.normal(size=(6, dim)), 1.5 * rng.normal(size=(6, 9, dim))
    points = []
    packed_products = _envelope._packed_products
    monkeypatch.setattr(_envelope, "_packed_products", lambda packed, point: points.append(point) or packed_products(packed, point))
    sizes = count_exact_curvatures(monkeypatch)
    per_query = np.array([distance(field, q, c, rule="line", squared=True) for q, c in zip(queries, candidates)])
    assert len(points) == len(queries) and 0 < sum(sizes) < 0.25 * len(queries) * 9 * n_centers  # pruning is active
    unpruned = unpruned_walk(field, queries.repeat(9, 0), candidates.reshape(-1, dim))[0].reshape(6, 9)
    np.testing.assert_allclose(per_query, unpruned, rtol=1e-12)
    np.testing.assert_allclose(distance(field, queries[:, None], candidates, rule="line", squared=True), per_query, rtol=1e-12)
    assert len(points) == len(queries)


@pytest.mark.parametrize("stiffness", [1e2, 1e4])
@pytest.mark.parametrize("loose", [False, True])
def test_pruning_keeps_a_cell_entered_only_inside_the_segment(stiffness, loose, monkeypatch):
    """Center 2 sits on the segment's midpoint with a metric ``s`` times stiffer along it: its parabola
    16 s (t - 1/2)^2 is above the end centers' 16 t^2 and 16 (1 - t)^2 at both ends and lowest on the
    sliver |t - 1/2| < w / 2, w = 1 / (1 + sqrt(s)); the other 60 centers lie off the segment (pruned).
    ``loose``: its metric also has an eigenvalue 1e8 across the segment, which leaves its parabola
    unchanged but its float32 bounds far from it (the lower one must still decide)."""
    rng = np.random.default_rng(7)
    dim = 6
    x, y = np.zeros(dim), np.r_[4.0, np.zeros(dim - 1)]
    stiff = np.eye(dim)
    stiff[0, 0], stiff[3, 3] = stiffness, 1e8 if loose else 1.0
    centers = np.r_[[x, y, 0.5 * (x + y)], rng.normal(size=(60, dim)) + np.r_[0.0, 6.0, np.zeros(dim - 2)]]
    field = NearestLocalField(centers, np.r_[[np.eye(dim), np.eye(dim), stiff], random_spd(rng, 60, dim)])
    sizes = count_exact_curvatures(monkeypatch)
    _, span, cell, _ = field.segment_cells(x, y)
    width = 1.0 / (1.0 + np.sqrt(stiffness))
    assert list(cell) == [0, 2, 1] and sizes[0] < 10
    np.testing.assert_allclose(span, [(1 - width) / 2, width, (1 - width) / 2], rtol=1e-12)
    energy = distance(field, x, y, rule="line", squared=True)
    np.testing.assert_allclose(energy, 16.0 * (1 - width) + 16.0 * stiffness * width, rtol=1e-12)
    offsets = np.array([0.0, 0.25, 0.5, 1.0])[:, None] * np.r_[0.0, 0.0, 1.0, np.zeros(dim - 3)]
    assert_exact(field, x + offsets, y - offsets[::-1])


def test_pruning_with_ties_and_huge_eigenvalue_ratios(monkeypatch):
    """Duplicated centers (identical parabolas, ties everywhere) and metrics with eigenvalue ratios up to
    1e9 (float32 bounds far looser for those centers): the same values as without duplicates, exact."""
    rng = np.random.default_rng(11)
    dim, n_centers = 10, 80
    metrics = random_spd(rng, n_centers, dim, condition=30.0)
    metrics[:8] = random_spd(rng, 8, dim, condition=1e9)
    centers = rng.normal(size=(n_centers, dim))
    field = NearestLocalField(centers, metrics)
    doubled = NearestLocalField(np.r_[centers, centers[::-1]], np.r_[metrics, metrics[::-1]])
    X, Y = 1.5 * rng.normal(size=(2, 30, dim))
    sizes = count_exact_curvatures(monkeypatch)
    assert_exact(field, X, Y)
    assert sizes[0] < 0.5 * len(X) * n_centers
    for rule in ("line", "line_length"):
        np.testing.assert_allclose(distance(doubled, X, Y, rule=rule), distance(field, X, Y, rule=rule), rtol=1e-13)


def test_envelope_candidates_keep_every_parabola_that_can_be_lowest():
    """The pruning test never drops a parabola whose lower bound reaches the upper envelope somewhere on a
    fine grid of [0, 1] (the test's soundness), on random brackets with ties, exact parabolas (zero errors),
    touching vertices and rows that are not finite (kept whole); and it does drop some."""
    rng = np.random.default_rng(5)
    shape = (300, 40)
    quadratic, linear, constant = rng.exponential(size=shape), rng.normal(size=shape), rng.exponential(size=shape)
    curvature_error, offset_error = 0.05 * rng.exponential(size=shape), 0.01 * rng.exponential(size=shape)
    quadratic[:20], linear[:20], constant[:20] = quadratic[:20, :1], linear[:20, :1], constant[:20, :1]  # all tied
    curvature_error[20:40], offset_error[20:40], quadratic[40:60] = 0.0, 0.0, 0.0  # exact; lines
    linear[60:80] = -2.0 * quadratic[60:80] * rng.choice([0.0, 0.25, 0.5, 1.0], (20, 1))  # vertices on grid points
    constant[80], quadratic[81, 3], offset_error[82, 5], linear[83, 7] = np.nan, np.inf, np.inf, -np.inf
    t = np.linspace(0.0, 1.0, 2001)[:, None, None]
    finite = np.arange(84, 300)
    lower = (np.maximum(quadratic - curvature_error, 0.0) * t + linear) * t + constant - offset_error
    upper = ((quadratic + curvature_error) * t + linear) * t + constant + offset_error
    reaches = (lower[:, finite] <= upper[:, finite].min(axis=2, keepdims=True)).any(axis=0)
    for n_pieces in (1, 4, 16):
        keep = _envelope._envelope_candidates(quadratic, linear, constant, curvature_error, offset_error, n_pieces)
        assert keep[finite][reaches].all()
        assert 0 < keep.sum() < keep.size and keep[[80, 81, 83]].all() and keep[82, 5]
    assert (_envelope._envelope_candidates(quadratic, linear, constant, curvature_error, offset_error, 16).sum()
            <= _envelope._envelope_candidates(quadratic, linear, constant, curvature_error, offset_error, 1).sum())


def test_envelope_walk_is_the_lower_envelope():
    """The walk's pieces tile [0, 1] along each row, and each piece's parabola is the lowest of all at its midpoint
    (to rounding of the values) and at a fine grid inside it, on random parabolas with ties everywhere,
    near-ties (1e-17 apart) and straight lines."""
    rng = np.random.default_rng(6)
    shape = (300, 40)
    quadratic, linear, constant = rng.exponential(size=shape), rng.normal(size=shape), rng.exponential(size=shape)
    quadratic[:20], linear[:20], constant[:20] = quadratic[:20, :1], linear[:20, :1], constant[:20, :1]  # all tied
    quadratic[20:40, 5:], linear[20:40, 5:] = quadratic[20:40, :1], linear[20:40, :1]
    constant[20:40, 5:] = constant[20:40, :1] + 1e-17
    quadratic[40:60] = 0.0
    pair, cell, span = _lower_envelope(quadratic, linear, constant)
    np.testing.assert_allclose(np.bincount(pair, span, minlength=len(quadratic)), 1.0, rtol=1e-12)
    assert np.all(span >= 0) and len(pair) > 2 * len(quadratic)  # several pieces per row
    start = np.concatenate([[0.0], np.cumsum(span)[:-1]]) - np.concatenate([[0.0], np.cumsum(span)])[np.searchsorted(pair, pair)]
    t = start[:, None] + span[:, None] * np.linspace(0.02, 0.98, 9)
    values = (quadratic[pair][:, None] * t[..., None] + linear[pair][:, None]) * t[..., None] + constant[pair][:, None]
    active = np.take_along_axis(values, np.broadcast_to(cell[:, None, None], values.shape[:2] + (1,)), axis=2)[..., 0]
    scale = np.abs(quadratic[pair]).max(axis=1) + np.abs(linear[pair]).max(axis=1) + np.abs(constant[pair]).max(axis=1)
    assert np.all(active <= values.min(axis=2) + 1e-13 * scale[:, None])


@pytest.mark.parametrize("m", [None, 1, 3])
def test_compiled_quadratic_forms_equal_numpy(m):
    """The compiled pass over the pairs gives the grouped products' forms to 1e-12 (of |v|^T |A| |v|), for
    single vectors and Gram matrices, unsorted and repeated indices, non-symmetric matrices and no pairs."""
    rng = np.random.default_rng(4)
    dim = 7
    matrices = rng.normal(size=(9, dim, dim)) * np.geomspace(1e-3, 1e3, dim)
    index = rng.integers(0, 9, size=40)
    vectors = rng.normal(size=(40, dim) if m is None else (40, m, dim))
    compiled = quadratic_forms(matrices, index, vectors, compiled=True)
    numpy = quadratic_forms(matrices, index, vectors, compiled=False)
    stacked = vectors[:, None] if m is None else vectors
    scale = np.einsum("pai,pij,pbj->pab", np.abs(stacked), np.abs(matrices[index]), np.abs(stacked)).reshape(compiled.shape)
    expected = np.einsum("pai,pij,pbj->pab", stacked, matrices[index], stacked).reshape(compiled.shape)
    assert compiled.shape == numpy.shape == ((40,) if m is None else (40, m, m))
    assert np.all(np.abs(compiled - numpy) <= 1e-12 * scale)
    assert np.all(np.abs(compiled - expected) <= 1e-12 * scale)
    assert quadratic_forms(matrices, index[:0], vectors[:0], compiled=True).shape == compiled[:0].shape


@pytest.mark.parametrize("magnitude", [1e-30, 1.0, 1e30])
def test_float32_bounds_hold(magnitude):
    """The float32 norms y^T P_r y and products P_r x (from the stacked matrices, and from the packed triangles for one
    point) stay within their stated bounds, at any scale and conditioning."""
    rng = np.random.default_rng(3)
    dim = 40
    metrics = random_spd(rng, 30, dim, condition=1e8) * magnitude
    field = NearestLocalField(rng.normal(size=(30, dim)), metrics)
    arrays = field._envelope_arrays
    points = rng.normal(size=(50, dim)) * np.geomspace(1e-10, 1e10, dim)  # widely spread coordinates
    norms = np.einsum("pi,pi->p", points, points)
    estimate = _envelope._packed_norms(arrays, points)
    single = points[:3].astype(np.float32)  # the compiled triangle products are numpy's, bit for bit
    np.testing.assert_array_equal(_envelope._triangle_products(single), single[:, arrays.rows] * single[:, arrays.cols])
    exact = np.einsum("pi,rij,pj->pr", points, metrics, points)
    assert np.all(np.abs(estimate - exact) <= arrays.norm_error * norms[:, None] * arrays.spread)
    scale = np.ldexp(1.0, np.frexp(np.abs(points).max(axis=1))[1])
    scaled = (points / scale[:, None]).astype(np.float32)
    stacked = (scaled @ arrays.full).reshape(50, 30, dim)  # many points: one product with the stacked matrices
    packed = np.array([_envelope._packed_products(arrays.packed, point).T for point in scaled])  # one point
    bound = arrays.product_error * np.sqrt(norms)[:, None] * arrays.spread
    for products in (stacked, packed):
        products = products.astype(float) * (scale[:, None] * arrays.scale)[:, :, None]
        error = np.linalg.norm(products - np.einsum("rij,pj->pri", metrics, points), axis=2)
        assert np.all(error <= bound)
    difference = np.linalg.norm((packed.astype(float) - stacked) * (scale[:, None] * arrays.scale)[:, :, None], axis=2)
    assert np.all(difference <= 2 * bound) and np.any(difference > 0)  # two summation orders, both within the bound
    assert not arrays.packed.flags.writeable and not arrays.full.flags.writeable


class UserConstantField(MetricField):
    """A constant metric seen only through ``metric_matrix`` (generic code paths)."""

    def __init__(self, metric):
        super().__init__(len(metric))
        self.metric = np.asarray(metric)

    def metric_matrix(self, base_point):
        x = self._check(base_point)
        return np.broadcast_to(self.metric, x.shape[:-1] + self.metric.shape)


@pytest.mark.parametrize("rule", ["test", "train", "line", "line_length", "geodesic"])
def test_constant_field_rules_are_mahalanobis(rule):
    rng = np.random.default_rng(0)
    metric = random_spd(rng, 1, 4)[0]
    X, Y = rng.normal(size=(2, 5, 4))
    d = Y[None] - X[:, None]
    expected = np.sqrt(np.einsum("xyi,ij,xyj->xy", d, metric, d))
    np.testing.assert_allclose(pairwise_distances(ConstantField(metric), X, Y, rule=rule), expected, rtol=1e-12)
    if rule != "geodesic":
        np.testing.assert_allclose(pairwise_distances(UserConstantField(metric), X, Y, rule=rule), expected, rtol=1e-12)
    # a nearest field with a single cell, i.e. the same constant metric
    np.testing.assert_allclose(
        pairwise_distances(NearestLocalField(X[:1], metric[None]), X, Y, rule=rule if rule != "geodesic" else "line"),
        expected,
        rtol=1e-12,
    )


class ExponentialField(MetricField):
    """1-D field M(x) = exp(2x): every rule has a closed form."""

    def __init__(self):
        super().__init__(1)

    def metric_matrix(self, base_point):
        return np.exp(2.0 * self._check(base_point))[..., None]


def test_one_dimensional_closed_forms():
    a = np.array([-1.0, 0.3, 2.0, 0.5])[:, None]
    b = np.array([1.5, -0.7, 2.0 + 1e-6, 0.5])[:, None]
    field, d = ExponentialField(), (b - a)[:, 0]
    ea, eb = np.exp(a[:, 0]), np.exp(b[:, 0])
    np.testing.assert_allclose(distance(field, a, b, rule="test"), np.abs(d) * ea, rtol=1e-13)
    np.testing.assert_allclose(distance(field, a, b, rule="train"), np.abs(d) * eb, rtol=1e-13)
    np.testing.assert_allclose(distance(field, a, b, rule="line_length"), np.abs(eb - ea), rtol=1e-8, atol=0)
    energy = np.where(d != 0, d * (eb**2 - ea**2) / 2, 0.0)
    np.testing.assert_allclose(distance(field, a, b, rule="line", squared=True), energy, rtol=1e-8, atol=0)
    np.testing.assert_allclose(distance(field, a, b, rule="line_length", squared=True), (eb - ea) ** 2, rtol=1e-8)


@pytest.fixture
def smooth_field():
    rng = np.random.default_rng(7)
    return SmoothLocalField(rng.normal(size=(5, 2)), random_spd(rng, 5, 2, condition=20.0), rho=1.5)


def test_smooth_field_line_length_below_line(smooth_field):
    rng = np.random.default_rng(8)
    X, Y = 2.0 * rng.normal(size=(2, 12, 2))
    line = distance(smooth_field, X, Y, rule="line")
    length = distance(smooth_field, X, Y, rule="line_length")
    frozen = distance(smooth_field, X, Y, rule="test")
    assert np.all(length <= line * (1 + 1e-12))
    assert np.mean(length < line * (1 - 1e-3)) > 0.5  # strict in general (Cauchy-Schwarz)
    assert not np.allclose(line, frozen, rtol=1e-3)  # the metric varies along the lines
    # Riemann sums with many nodes agree with the adaptive quadrature
    lam = (np.arange(4000) + 0.5) / 4000
    points = X[:, None] + lam[:, None] * (Y - X)[:, None]
    speed2 = np.einsum("pi,pnij,pj->pn", Y - X, smooth_field.metric_matrix(points), Y - X)
    np.testing.assert_allclose(line, np.sqrt(speed2.mean(axis=1)), rtol=1e-6)
    np.testing.assert_allclose(length, np.sqrt(speed2).mean(axis=1), rtol=1e-6)


def test_geodesic_is_shortest(smooth_field):
    rng = np.random.default_rng(9)
    X, Y = 1.5 * rng.normal(size=(2, 4, 2))
    geodesic = distance(smooth_field, X, Y, rule="geodesic")
    length = distance(smooth_field, X, Y, rule="line_length")
    assert np.all(geodesic <= length * (1 + 1e-6))
    assert np.all(geodesic > 0)
    np.testing.assert_allclose(distance(smooth_field, X, Y, rule="geodesic", squared=True), geodesic**2, rtol=1e-6)


def test_frozen_rules_read_the_metric_at_the_right_end():
    rng = np.random.default_rng(10)
    nearest = NearestLocalField(rng.normal(size=(7, 3)), random_spd(rng, 7, 3))
    rbf = RBFLocalField(nearest.centers, nearest.metrics, sigma=0.7)
    X, Y = rng.normal(size=(2, 9, 3))
    d = Y - X
    for field in (nearest, rbf):
        for rule, base in (("test", X), ("train", Y)):
            expected = np.einsum("pi,pij,pj->p", d, field.metric_matrix(base), d)
            np.testing.assert_allclose(distance(field, X, Y, rule=rule, squared=True), expected, rtol=1e-12)


@pytest.mark.parametrize("rule", ["test", "train", "line", "line_length"])
def test_broadcasting_shortlists_and_pairwise_agree(rule):
    rng = np.random.default_rng(11)
    field = NearestLocalField(rng.normal(size=(10, 3)), random_spd(rng, 10, 3))
    X, train = rng.normal(size=(4, 3)), rng.normal(size=(12, 3))
    table = pairwise_distances(field, X, train, rule=rule)
    assert table.shape == (4, 12)
    np.testing.assert_allclose(distance(field, X[:, None, :], train[None, :, :], rule=rule), table, rtol=1e-13)
    shortlist = rng.integers(0, 12, size=(4, 5))  # with repeated candidates
    np.testing.assert_allclose(
        distance(field, X[:, None, :], train[shortlist], rule=rule),
        np.take_along_axis(table, shortlist, axis=1),
        rtol=1e-13,
    )
    single = distance(field, X[0], train[3], rule=rule)
    assert np.ndim(single) == 0 and single == pytest.approx(table[0, 3], rel=1e-13)
    assert distance(field, X[0], X[0], rule=rule) == 0.0


def test_pairwise_on_one_set_is_symmetric_for_line_rules():
    rng = np.random.default_rng(12)
    field = NearestLocalField(rng.normal(size=(8, 2)), random_spd(rng, 8, 2))
    X = 2 * rng.normal(size=(7, 2))
    for rule in ("line", "line_length"):
        table = pairwise_distances(field, X, rule=rule)
        np.testing.assert_allclose(table, table.T, rtol=1e-12)
        np.testing.assert_array_equal(np.diag(table), 0.0)
    table = pairwise_distances(field, X, rule="test")
    np.testing.assert_allclose(table, pairwise_distances(field, X, rule="train").T, rtol=1e-13)


def test_squared_quantities():
    rng = np.random.default_rng(13)
    field = NearestLocalField(rng.normal(size=(6, 2)), random_spd(rng, 6, 2, condition=50.0))
    X, Y = 2 * rng.normal(size=(2, 10, 2))
    energy = distance(field, X, Y, rule="line", squared=True)
    length = distance(field, X, Y, rule="line_length")
    np.testing.assert_allclose(distance(field, X, Y, rule="line") ** 2, energy, rtol=1e-13)
    np.testing.assert_allclose(distance(field, X, Y, rule="line_length", squared=True), length**2, rtol=1e-13)
    assert np.all(length**2 <= energy * (1 + 1e-12))


def test_n_jobs_and_progress_bar(capsys):
    rng = np.random.default_rng(14)
    field = NearestLocalField(rng.normal(size=(9, 3)), random_spd(rng, 9, 3))
    X, Y = rng.normal(size=(2, 40, 3))
    serial = pairwise_distances(field, X, Y, rule="line")
    with parallel_config(backend="threading"):  # same chunking as processes, without their start-up time
        np.testing.assert_allclose(pairwise_distances(field, X, Y, rule="line", n_jobs=2), serial, rtol=1e-14)
        np.testing.assert_allclose(distance(field, X, Y, rule="line", n_jobs=2), np.diag(serial), rtol=1e-14)
        np.testing.assert_allclose(
            pairwise_distances(field, X, Y, rule="train", n_jobs=2),
            pairwise_distances(field, X, Y, rule="train"),
            rtol=1e-14,
        )
    pairwise_distances(field, X, Y, rule="line", verbose=True)
    assert "line distances" in capsys.readouterr().err


def test_bad_input():
    rng = np.random.default_rng(15)
    nearest = NearestLocalField(rng.normal(size=(3, 2)), random_spd(rng, 3, 2))
    x, y = np.zeros(2), np.ones(2)
    with pytest.raises(ValueError, match="rule must be one of"):
        distance(nearest, x, y, rule="straight")
    with pytest.raises(ValueError, match=re.escape("rule='geodesic' serves fields of structure 'constant' or 'smooth'")):
        distance(nearest, x, y, rule="geodesic")
    with pytest.raises(ValueError, match="rule='geodesic'"):
        pairwise_distances(nearest, x[None], rule="geodesic")
    with pytest.raises(ValueError, match="y must have last axis of length dim=2"):
        distance(nearest, x, np.ones(3))
    with pytest.raises(ValueError, match="x contains NaN"):
        distance(nearest, [np.nan, 0.0], y)
    with pytest.raises(ValueError, match="Y contains NaN"):
        pairwise_distances(nearest, x[None], [[0.0, np.inf]])
    with pytest.raises(ValueError, match="do not broadcast"):
        distance(nearest, np.zeros((3, 2)), np.zeros((4, 2)))
    with pytest.raises(ValueError, match="X must have shape"):
        pairwise_distances(nearest, np.zeros((2, 2, 2)))
    with pytest.raises(TypeError, match="field must be a MetricField"):
        distance(np.eye(2), x, y)


def test_geodesic_matrix_solves_each_unordered_pair_once(smooth_field, monkeypatch):
    from riemlocal import LearnedMetricManifold
    from riemlocal.numerics import EnergyLogSolver

    X = np.random.default_rng(9).normal(size=(7, 2))
    solved, original = [], EnergyLogSolver._solve_chunk

    def counting(self, point, base_point, log_rtol):
        solved.append(len(point))
        return original(self, point, base_point, log_rtol)

    monkeypatch.setattr(EnergyLogSolver, "_solve_chunk", counting)
    matrix = pairwise_distances(smooth_field, X, rule="geodesic")
    assert sum(solved) == 7 * 6 // 2
    np.testing.assert_array_equal(matrix, matrix.T)
    np.testing.assert_array_equal(np.diag(matrix), 0.0)
    metric = LearnedMetricManifold(smooth_field).metric
    i, j = np.triu_indices(7, 1)
    for a, b in ((i, j), (j, i)):  # each direction solved on its own agrees to the solver's tolerance
        one_by_one = np.array([metric.dist(X[p], X[q]) for p, q in zip(a, b)])
        np.testing.assert_allclose(matrix[a, b], one_by_one, rtol=2e-6)


def test_geodesic_matrix_at_dim_10_is_certified_and_equals_the_pairwise_solves():
    """The matrix path (node chart, 6/12/24 segments) against Log's default solves and a tight reference."""
    import sys
    from pathlib import Path

    from riemlocal import LearnedMetricManifold
    from riemlocal.numerics import EnergyLogSolver

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    from bench_geodesics import random_field

    field, rng = random_field(10, seed=5)
    X = 0.5 * rng.normal(size=(12, 10))
    matrix = pairwise_distances(field, X, rule="geodesic")
    i, j = np.triu_indices(12, 1)
    default = LearnedMetricManifold(field).metric.log_solver.solve(X[j], X[i])
    np.testing.assert_allclose(matrix[i, j], default.length, rtol=2e-6)
    tight = EnergyLogSolver(field, 64, rtol=1.0, log_rtol=1.0, max_segments=256, tol=1e-10, max_iter=20000)
    np.testing.assert_allclose(matrix[i, j], tight.dist(X[i], X[j]), rtol=1e-6)
