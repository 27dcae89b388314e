r"""Principal geodesic analysis: tangent PCA at the Fréchet mean in the inner product :math:`M(\mu)`, or exact PGA."""

import warnings

import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.validation import check_array, check_is_fitted, validate_data

from ..utils.optimize import MAX_STALLS
from ..utils.parallel import with_one_blas_thread
from ..utils.validation import check_int, check_not_text, check_params, check_points, check_tolerance, options

from . import _tangent
from ._frechet import FrechetMean, given_mean

__all__ = ["PrincipalGeodesicAnalysis"]

_MAX_TURN = 0.1  # largest step of the direction search, in radians
_STEP = 1e-3  # of the central differences of the distance gradient, relative to the rms distance to the mean
_SLOW_STEPS = 8  # Gauss--Newton steps of a projection before it switches to Newton's method (where the Hessian is positive)
_SLACK = 0.05  # a projection onto one geodesic is global when no point of it is closer to the datum by this fraction of the residual
_MAX_RESTARTS = 3  # direction searches restarted after the scan moved a projection to a closer basin
_MAX_ROUNDS = 40  # rounds of the scan; intervals left after them are reported unscanned


def _value_error(squared, error):
    r"""Bound :math:`(2 d + e) e` on the error of :math:`d^2` from a distance :math:`d` known to :math:`e`."""
    return (2.0 * np.sqrt(squared) + error) * error


def _radii(lengths, errors, certified):
    r"""Distances :math:`d(\mu, x_i)` and their errors (inf where uncertified), shape (n, 2)."""
    return np.column_stack([lengths, np.where(certified, errors, np.inf)])


class PrincipalGeodesicAnalysis(TransformerMixin, BaseEstimator):
    r"""Principal geodesic analysis (Fletcher et al. 2004) in its tangent-space form.

    With :math:`\mu` the Fréchet mean, :math:`v_i = \mathrm{Log}_\mu(x_i)` and
    :math:`M(\mu) = L L^T` (Cholesky), the whitened tangent vectors
    :math:`z_i = L^T v_i` have Euclidean inner products equal to the
    Riemannian ones at :math:`\mu`. PCA of the second-moment matrix
    :math:`C = \frac{1}{n-1} \sum_i z_i z_i^T` (about the mean, where
    :math:`\sum_i v_i = 0`; the ``n - 1`` matches :class:`sklearn.decomposition.PCA`)
    gives eigenpairs :math:`(\lambda_k, u_k)`, and the principal directions
    :math:`e_k = L^{-T} u_k` are orthonormal in :math:`M(\mu)`. The principal
    geodesics are :math:`t \mapsto \mathrm{Exp}_\mu(t e_k)` (Hauberg et al.
    eq. 13).

    **Exact PGA** (``method="exact"``; Sommer, Lauze, Hauberg & Nielsen
    2010): component :math:`k` maximizes the variance of the projections onto
    the geodesic subspace :math:`S_k = \mathrm{Exp}_\mu(\mathrm{span}(e_1, \dots, e_k))`,

    .. math::
        e_k = \arg\max_{\|e\|_{M(\mu)} = 1,\ e \perp e_{<k}} \sum_i d^2\big(\mu, \pi_{S_k}(x_i)\big),
        \qquad \pi_{S}(x) = \mathrm{Exp}_\mu(E a^*), \quad a^* = \arg\min_a d^2(\mathrm{Exp}_\mu(E a), x),

    where :math:`d(\mu, \mathrm{Exp}_\mu(E a)) = |a|` for the orthonormal
    :math:`E = [e_1, \dots, e_k]`. The projections are found by Gauss--Newton
    with the exact gradient :math:`-2 (\partial_v \mathrm{Exp}\, E)^T M r`
    (Jacobi fields, ``space.metric.jacobi_field``; a LearnedMetricManifold),
    batched over the points and warm started from the previous step's; a step counts as a
    decrease to within the Log solver's error estimates, and a point whose Gauss--Newton steps
    crawl along a flat direction switches to Newton's method (:meth:`_project`). Those are local minima:
    for the first component each projection is then checked against the whole geodesic by a Lipschitz
    scan (:meth:`_scan`: no point of it closer by 5% of the residual, short of its cut point), moved to the
    closer basin the scan finds, and the direction search resumes; a scan stopped by an uncertified Log
    is reported. Projections onto later subspaces stay local (warm started from the previous ones).
    The direction :math:`e_k` is found by gradient ascent over the unit sphere
    of the complement (coordinates :math:`c` in an :math:`M(\mu)`-orthonormal frame,
    renormalized after each step; Barzilai--Borwein step lengths, at most 0.1 rad),
    started at the tangent-PCA direction. The gradient comes from the implicit
    function theorem at the projection optimum (:meth:`_variance_gradient`): two
    Jacobi fields per point (the end velocity and an adjoint field) give the gradient
    of :math:`d^2` in the tangent vector, central differences of it along
    :math:`e_1, \dots, e_k` its Hessian (cost: :math:`2k + 1` such batches per step). The
    ascent uses no variance values: they carry the projections' error (``tol``),
    far above the changes near the maximum.

    Parameters
    ----------
    space : geomstats-style space
        See :class:`FrechetMean`.
    n_components : int, default=None
        Components kept; ``None`` keeps ``min(n_samples, dim)``.
    method : {"tangent", "exact"}, default="tangent"
        Tangent PCA at the mean (Fletcher et al. 2004) or exact PGA (Sommer et al. 2010).
    mean : array-like of shape (dim,) or FrechetMean, default=None
        A precomputed Fréchet mean of ``X`` (a point or a fitted
        :class:`FrechetMean`), used instead of computing one; ``None`` computes it.
    max_iter, tol, n_jobs, verbose
        Passed to :class:`FrechetMean`; ``n_jobs`` also splits the Log and
        Exp batches of ``transform`` / ``inverse_transform``. Exact PGA also
        uses ``tol`` for its projections (Gauss--Newton decrement at most
        ``tol**2`` times :math:`d^2 + |a|^2`) and directions (gradient norm at most
        ``tol`` times the projected variance), and ``max_iter`` for the direction search.

    Attributes
    ----------
    mean_ : ndarray of shape (dim,)
        Fréchet mean :math:`\mu`.
    metric_matrix_ : ndarray of shape (dim, dim)
        :math:`M(\mu)`.
    components_ : ndarray of shape (n_components, dim)
        Tangent vectors :math:`e_k` at the mean, orthonormal in :math:`M(\mu)`
        (``components_ @ metric_matrix_ @ components_.T == I``), by
        decreasing variance; each sign is fixed so that the largest entry
        of :math:`u_k` is positive.
    explained_variance_ : ndarray of shape (n_components,)
        :math:`\lambda_k`; for exact PGA the increase of the projected variance
        :math:`\frac{1}{n-1}\sum_i d^2(\mu, \pi_{S_k}(x_i))` from :math:`S_{k-1}` to :math:`S_k`.
    explained_variance_ratio_ : ndarray of shape (n_components,)
        :math:`\lambda_k / \sum_j \lambda_j` (over all ``dim`` eigenvalues).
    n_iter_ : int
        Iterations of the Fréchet mean (0 for a ``mean`` given as a point).
    direction_n_iter_ : ndarray of shape (n_components,)
        Exact PGA only: gradient steps per direction.
    converged_ : bool
        Exact PGA only: whether every direction and projection met ``tol``; otherwise a
        ConvergenceWarning gives the gradient norm.
    n_uncertified_ : int
        Log maps from the mean to the data that the space's Log solver did not certify
        (``space.metric.log_solver.last_result_.converged``; a warning says so). Each keeps its
        direction and is scaled to the solver's distance, so the variances never exceed the total
        :math:`\frac{1}{n-1}\sum_i d^2(\mu, x_i)`.
    n_features_in_ : int

    References
    ----------
    .. [1] P. T. Fletcher, C. Lu, S. M. Pizer and S. Joshi, "Principal
       geodesic analysis for the study of nonlinear statistics of shape",
       IEEE TMI 23(8), 2004.
    .. [3] S. Sommer, F. Lauze, S. Hauberg and M. Nielsen, "Manifold valued
       statistics, exact principal geodesic analysis and the effect of linear
       approximations", ECCV 2010.
    .. [2] S. Hauberg, O. Freifeld and M. J. Black, "A geometric take on
       metric learning", NIPS 2012, sec. 3.1.1.
    """

    def __init__(
        self, space, n_components=None, *, method="tangent", max_iter=100, tol=1e-5, mean=None, n_jobs=None, verbose=False
    ):
        self.space = space
        self.n_components = n_components
        self.method = method
        self.max_iter = max_iter
        self.tol = tol
        self.mean = mean
        self.n_jobs = n_jobs
        self.verbose = verbose

    @with_one_blas_thread
    def fit(self, X, y=None):
        """Fit on points ``X`` of shape (n_samples, dim); ``y`` is ignored."""
        self._fit(X)
        return self

    @with_one_blas_thread
    def fit_transform(self, X, y=None):
        """Fit and return the tangent coordinates of ``X`` (one batch of Log maps)."""
        logs, radii = self._fit(X)
        if self.method == "exact":
            return self._exact_coordinates(logs @ self.metric_matrix_ @ self.components_.T, X, radii)
        return logs @ self.metric_matrix_ @ self.components_.T

    _parameter_checks = {"method": options("tangent", "exact"), "max_iter": check_int, "tol": check_tolerance}

    def _fit(self, X):
        method = check_params(self, self._parameter_checks)["method"]
        if method == "exact" and not callable(getattr(self.space.metric, "jacobi_field", None)):
            raise ValueError("method='exact' needs space.metric.jacobi_field (a LearnedMetricManifold)")
        X = validate_data(self, check_not_text(X, "X"), dtype=float, ensure_min_samples=2)
        n_samples, dim = X.shape
        n_components = min(n_samples, dim) if self.n_components is None else self.n_components
        if isinstance(n_components, bool) or not isinstance(n_components, (int, np.integer)):
            raise TypeError(f"n_components must be an int or None, got {self.n_components!r}")
        if not 1 <= n_components <= dim:
            raise ValueError(f"n_components must be in [1, {dim}], got {n_components}")
        given = given_mean(self.mean, dim)
        if given is None:
            mean = FrechetMean(self.space, max_iter=self.max_iter, tol=self.tol, n_jobs=self.n_jobs, verbose=self.verbose)
            given = mean.fit(X).estimate_, mean.n_iter_
        self.mean_, self.n_iter_ = given
        logs, lengths, errors, certified = _tangent.certified_log(self.space, X, self.mean_, self.n_jobs)
        radii = _radii(lengths, errors, certified)
        self.metric_matrix_ = _tangent.metric_matrix(self.space, self.mean_)
        # an uncertified Log keeps its direction and takes the solver's distance as its length
        norms = np.sqrt(np.maximum(_tangent.squared_norm(logs, self.metric_matrix_), 0.0))
        logs[~certified] *= (lengths / np.maximum(norms, np.finfo(float).tiny))[~certified, None]
        self.n_uncertified_ = int((~certified).sum())
        _tangent.warn_uncertified("PrincipalGeodesicAnalysis", self.n_uncertified_, n_samples, "from the mean to the data", 2)
        factor = np.linalg.cholesky(self.metric_matrix_)
        whitened = logs @ factor
        eigvals, eigvecs = np.linalg.eigh(whitened.T @ whitened / (n_samples - 1))
        eigvals, eigvecs = np.clip(eigvals[::-1], 0.0, None), eigvecs[:, ::-1]
        signs = np.sign(eigvecs[np.argmax(np.abs(eigvecs), axis=0), np.arange(dim)])
        eigvecs = eigvecs * signs
        self.components_ = np.linalg.solve(factor.T, eigvecs[:, :n_components]).T
        self.explained_variance_ = eigvals[:n_components]
        self.explained_variance_ratio_ = self.explained_variance_ / max(eigvals.sum(), np.finfo(float).tiny)
        self.n_components_ = n_components
        if method == "exact":
            self._fit_exact(X, logs, eigvals.sum(), radii)
        return logs, radii

    def _fit_exact(self, X, logs, total_variance, radii):
        """Replace the tangent components by the exact principal geodesic directions, one at a time."""
        n_samples = len(X)
        step = _STEP * np.sqrt(total_variance)
        basis, variances, previous, self.direction_n_iter_, self.converged_ = [], [], 0.0, [], True
        for k in range(self.n_components_):
            frame = self._frame(basis, self.components_[k])
            warm = [logs @ self.metric_matrix_ @ np.array(basis + [frame[0]]).T]

            def variance(c, frame=frame, warm=warm):  # at the unit vector c of frame coordinates
                components = np.array(basis + [c @ frame])
                warm[0], converged = self._project(warm[0], components, X)
                gradient = frame @ self._variance_gradient(warm[0], components, X, step)
                gradient = (gradient - (gradient @ c) * c) / (n_samples - 1)  # along the sphere
                return np.sum(warm[0] ** 2) / (n_samples - 1), gradient, converged.all()

            c, n_iter, unscanned = np.eye(len(frame))[0], 0, 0
            for _ in range(_MAX_RESTARTS + 1):
                c, value, gradient, projected, n_iter = self._ascend(variance, c, n_iter)
                if k:  # the scan needs a geodesic: projections onto later subspaces stay local
                    break
                warm[0], _, moved, unscanned = self._global_projection(warm[0], np.ones(n_samples, dtype=bool), c @ frame, X, radii)
                if not moved:
                    break
            else:  # the last scan moved projections after the last ascent
                value, gradient, projected = variance(c)
            grad_norm = np.linalg.norm(gradient)
            if not projected or unscanned or grad_norm > self.tol * value:
                self.converged_ = False
                warnings.warn(
                    f"PrincipalGeodesicAnalysis (exact) did not converge on component {k} in {n_iter} iterations: "
                    f"variance gradient norm {grad_norm:.3g} (variance {value:.3g}, tol={self.tol:.3g})"
                    + ("" if projected else "; some projections did not meet the tolerance")
                    + (f"; {unscanned} projections could not be shown global" if unscanned else ""),
                    ConvergenceWarning,
                    stacklevel=5,  # the user's call, past _fit, fit and with_one_blas_thread
                )
            self.direction_n_iter_.append(n_iter)
            basis.append(c @ frame)
            variances.append(value - previous)
            previous = value
        self.components_ = np.array(basis)
        self.explained_variance_ = np.array(variances)
        self.explained_variance_ratio_ = self.explained_variance_ / max(total_variance, np.finfo(float).tiny)
        self.direction_n_iter_ = np.array(self.direction_n_iter_)

    def _ascend(self, variance, c, n_iter):
        """Gradient ascent of ``variance`` over the unit sphere from ``c``; returns ``c``, value, gradient, projected, ``n_iter``."""
        value, gradient, projected = variance(c)
        best, rate, stalls = np.linalg.norm(gradient), 1.0 / max(value, np.finfo(float).tiny), 0
        while best > self.tol * value and n_iter < self.max_iter and stalls < MAX_STALLS:
            move = rate * gradient
            move *= min(1.0, _MAX_TURN / max(np.linalg.norm(move), np.finfo(float).tiny))
            new_c = (c + move) / np.linalg.norm(c + move)
            new_value, new_gradient, projected = variance(new_c)
            s, y = new_c - c, new_gradient - gradient
            rate = (s @ s) / -(s @ y) if s @ y < 0 else 2.0 * rate  # Barzilai--Borwein, or a bolder step where convex
            c, value, gradient, n_iter = new_c, new_value, new_gradient, n_iter + 1
            stalls = 0 if np.linalg.norm(gradient) < best else stalls + 1
            best = min(best, np.linalg.norm(gradient))
        return c, value, gradient, projected, n_iter

    def _global_projection(self, a, converged, direction, X, radii):
        """Projections ``a`` (n, 1) onto the geodesic along ``direction``, moved to the closest basins :meth:`_scan` finds
        (after a move, only the points that moved are scanned again: the others' scans stand).

        Returns the coordinates, whether each projection converged, whether any moved, and how many
        points are not shown global (the last scan did not finish them, or they moved after it).
        """
        a, converged, moved = np.array(a, dtype=float), np.array(converged), False
        finished, rows = np.ones(len(X), dtype=bool), np.arange(len(X))  # rows: the points to scan (again)
        for _ in range(_MAX_RESTARTS):
            start, finished[rows] = self._scan(a[rows, 0], direction, X[rows], radii[rows])
            hits = np.isfinite(start)
            rows = rows[hits]
            if not len(rows):
                break
            a[rows], converged[rows] = self._project(start[hits, None], direction[None], X[rows])
            moved = True
        else:  # the last round moved these, and no scan has checked them since
            finished[rows] = False
        return a, converged, moved, int((~finished).sum())

    def _scan(self, a, direction, X, radii):
        r"""Closer points on the geodesic :math:`\gamma(t) = \mathrm{Exp}_\mu(t e)` than the projections ``a`` (n,).

        :math:`f(t) = d(\gamma(t), x)` is 1-Lipschitz (:math:`e` is a unit vector) and, by the triangle
        inequality through :math:`\mu`, :math:`f(t) \ge d(\mu, x) - |t|` and, where :math:`\gamma` minimizes length up
        to :math:`t` (:math:`d(\mu, \gamma(t)) = |t|`, as the variance :math:`\sum_i |a_i|^2` assumes),
        :math:`f(t) \ge |t| - d(\mu, x)`. So a projection at distance :math:`r` can be beaten only inside the bands
        :math:`\big||t| - d(\mu, x)\big| \le r` or past the geodesic's cut point, which the scan does not search.
        An evaluation :math:`f(m)` rules out
        :math:`|t - m| \le f(m) - r + \epsilon` (less the Logs' error estimates), :math:`\epsilon` = ``_SLACK`` :math:`r / 2`.
        Each round evaluates the midpoint of every interval of the bands not yet ruled out (batched over the
        points; intervals narrower than :math:`\epsilon` are dropped, so no point of the bands is closer than
        :math:`(1 - \text{_SLACK})\, r`), until none is left, a midpoint is closer than :math:`r - \epsilon`, or
        ``_MAX_ROUNDS`` rounds; a point's scan stops, unfinished, at its first uncertified Log. Returns per point
        the closest such midpoint (NaN where there is none) and whether its scan finished (no interval left). ``radii``: :math:`d(\mu, x)` and its error, shape (n, 2).
        """
        n_samples = len(X)
        path = self.space.metric.geodesic(self.mean_, initial_tangent_vec=np.stack([direction, -direction]))

        def distances(owner, t):  # d(gamma(t_j), x_owner_j) and its error (inf where uncertified)
            times, position = np.unique(np.abs(t), return_inverse=True)
            curves = np.asarray(path(times), dtype=float).reshape(2, len(times), -1)  # one curve per sign
            points = np.where((t >= 0)[:, None], curves[0, position], curves[1, position])
            _, lengths, errors, certified = _tangent.certified_log(self.space, X[owner], points, self.n_jobs)
            return lengths, np.where(certified, errors, np.inf)

        everyone = np.arange(n_samples)
        residual, errors = distances(everyone, a)
        bar, slack = residual + errors, 0.5 * _SLACK * residual  # bar: r plus its error
        near, far = np.maximum(radii[:, 0] - bar - radii[:, 1], 0.0), radii[:, 0] + bar + radii[:, 1]
        # the two bands, less (a - slack, a + slack) around the projection
        owner = np.tile(everyone, 4)
        low = np.concatenate([near, np.maximum(near, a + slack), -far, np.maximum(-far, a + slack)])
        high = np.concatenate([np.minimum(far, a - slack), far, np.minimum(-near, a - slack), -near])
        start, unfinished = np.full(n_samples, np.nan), ~np.isfinite(bar + far)
        for _ in range(_MAX_ROUNDS):
            keep = (high - low > slack[owner]) & np.isnan(start[owner]) & ~unfinished[owner]
            owner, low, high = owner[keep], low[keep], high[keep]
            if not len(owner):
                break
            middle = 0.5 * (low + high)
            lengths, errors = distances(owner, middle)
            unfinished[owner[~np.isfinite(errors)]] = True  # an uncertified Log bounds nothing: that scan stops
            closer = np.flatnonzero(lengths + errors < residual[owner] - slack[owner])
            closer = closer[np.argsort(-lengths[closer])]  # the closest midpoint of each point is assigned last
            start[owner[closer]] = middle[closer]
            reach = np.maximum(lengths - errors - bar[owner] + slack[owner], 0.0)
            owner, low, high = np.tile(owner, 2), np.concatenate([low, middle + reach]), np.concatenate([middle - reach, high])
        unfinished[owner[(high - low > slack[owner]) & np.isnan(start[owner])]] = True
        return start, ~unfinished

    def _variance_gradient(self, a, components, X, step):
        r"""Gradient of :math:`\sum_i |a^*_i|^2` in the last direction :math:`e` of ``components`` :math:`E`.

        With :math:`h_i(v) = d^2(\mathrm{Exp}_\mu(v), x_i)` and the projection optimum
        :math:`E^T \nabla h_i(E a^*_i) = 0`, the implicit function theorem gives
        :math:`-2 \sum_i \big(a^*_{ik} H_i E w_i + w_{ik} \nabla h_i\big)`,
        :math:`w_i = (E^T H_i E)^{-1} a^*_i`, :math:`H_i` the Hessian of :math:`h_i` at :math:`E a^*_i`.
        :math:`H_i E` is a central difference of the exact :math:`\nabla h_i` (:meth:`_distance_gradient`)
        with ``step`` along each :math:`e_j`.
        """
        v = a @ components
        hessian, reduced = self._distance_hessian(v, components, X, step)
        w = np.linalg.solve(reduced, a[..., None])[..., 0]
        gradient = a[:, -1:] * np.einsum("ndk,nk->nd", hessian, w) + w[:, -1:] * self._distance_gradient(v, X)
        return -2.0 * gradient.sum(axis=0)

    def _distance_hessian(self, v, components, X, step):
        r""":math:`H_i E` ``(n, D, k)`` and the symmetrized :math:`E^T H_i E` ``(n, k, k)``, :math:`H_i` the Hessian of
        :math:`d^2(\mathrm{Exp}_\mu(v), x_i)` at :math:`v_i`: central differences of the exact gradient
        (:meth:`_distance_gradient`) with ``step`` along each row :math:`e_j` of ``components``."""
        columns = [self._distance_gradient(v + step * e, X) - self._distance_gradient(v - step * e, X) for e in components]
        hessian = np.stack(columns, axis=-1) / (2.0 * step)
        reduced = np.einsum("kd,ndl->nkl", components, hessian)
        return hessian, 0.5 * (reduced + reduced.transpose(0, 2, 1))

    def _distance_gradient(self, tangent_vecs, X):
        r""":math:`\nabla_v d^2(\mathrm{Exp}_\mu(v_i), x_i) = -2 B_i^T M(p_i) r_i`, shape (n, D).

        :math:`B_i` is the differential of Exp at :math:`v_i`, :math:`p_i = \mathrm{Exp}_\mu(v_i)`,
        :math:`r_i = \mathrm{Log}_{p_i}(x_i)`. :math:`B^T M(p) r = M(\mu) J(1)` for the Jacobi field
        :math:`J(0) = 0`, :math:`J'(0) = r` along the geodesic back from :math:`p` to :math:`\mu` (the
        Wronskian of two Jacobi fields is constant), whose velocity :math:`-B v` is the Jacobi field
        with :math:`J'(0) = v` at :math:`t = 1`.
        """
        points = _tangent.exp(self.space, tangent_vecs, self.mean_, self.n_jobs)
        residuals = _tangent.log(self.space, X, points, self.n_jobs)
        velocities = _tangent.jacobi_end(self.space, tangent_vecs, self.mean_, tangent_vecs, self.n_jobs)
        return -2.0 * _tangent.jacobi_end(self.space, -velocities, points, residuals, self.n_jobs) @ self.metric_matrix_

    def _frame(self, basis, direction):
        r"""Rows orthonormal in :math:`M(\mu)` spanning the complement of ``basis``, the first along ``direction`` projected on it."""
        factor = np.linalg.cholesky(self.metric_matrix_)  # whitened coordinates y = L^T x
        dim = len(factor)
        complement = np.linalg.svd(np.array(basis) @ factor)[2][len(basis) :] if basis else np.eye(dim)
        first = complement.T @ (complement @ (factor.T @ direction))
        first /= np.linalg.norm(first)
        rest = complement - np.outer(complement @ first, first)
        rest = np.linalg.svd(rest)[2][: len(complement) - 1] if len(complement) > 1 else np.zeros((0, dim))
        return np.linalg.solve(factor.T, np.vstack([first, rest]).T).T

    def _project(self, coordinates, components, X, max_iter=50):
        r"""Coordinates :math:`a^*_i` of the closest points :math:`\mathrm{Exp}_\mu(E a)` to ``X`` (batched Gauss--Newton).

        Starts from ``coordinates``; the step :math:`\delta` solves
        :math:`\min_\delta \|r_i - B_i E \delta\|^2_{M(\hat x_i)}` with the Jacobi fields
        :math:`B_i E = \partial_v \mathrm{Exp}_\mu(E a_i)\, E`; :math:`\lambda = g^T \delta` is its
        decrement. Far from the data the residual's curvature makes the full step overshoot, so each
        point takes a fraction :math:`s` of it: the minimizer :math:`\lambda s^2 / (d^2(s) - d^2 + 2 \lambda s)`
        of the parabola through :math:`d^2`, its slope :math:`-2\lambda` and the last trial :math:`d^2(s)`,
        within [0.1, 1] (the same fraction again where the values cannot resolve the change). A step is
        accepted when :math:`d^2` decreases to within the error of its two evaluations
        (:math:`(2 d + e) e`, :math:`e` the Log solver's estimate): below that, the values cannot rank
        two points. A point not converged after ``_SLOW_STEPS`` steps (a residual curvature that the
        Gauss--Newton matrix misjudges: its steps shrink slowly along a flat direction) takes Newton
        steps instead, with half the Hessian of :math:`d^2` in :math:`a` (:meth:`_distance_hessian`, step ``_STEP``
        times the rms of :math:`|a|`) where it is positive definite. A point
        converges when :math:`\sqrt{\lambda}` is below ``tol`` times :math:`\sqrt{d^2 + |a|^2}` plus
        :math:`e` and its Log is certified; it stops unconverged after four rejected steps in a row or
        ``max_iter`` steps. Returns the coordinates and whether each converged.
        """

        def evaluate(a, points_x):
            points = _tangent.exp(self.space, a @ components, self.mean_, self.n_jobs)
            residuals, lengths, errors, certified = _tangent.certified_log(self.space, points_x, points, self.n_jobs)
            errors = np.where(certified, errors, np.inf)
            return lengths**2, errors, residuals, _tangent.metric_matrix(self.space, points)

        a = np.array(coordinates, dtype=float)
        value, errors, residuals, metrics = evaluate(a, X)
        steps, rejected, n_steps = np.ones(len(a)), np.zeros(len(a), dtype=int), np.zeros(len(a), dtype=int)
        active, done = np.ones(len(a), dtype=bool), np.zeros(len(a), dtype=bool)
        for _ in range(max_iter):
            rows = np.flatnonzero(active)
            if not len(rows):
                break
            jacobians = _tangent.exp_derivative(self.space, a[rows] @ components, self.mean_, components, self.n_jobs)
            weighted = metrics[rows] @ jacobians
            gradient = np.einsum("nde,nd->ne", weighted, residuals[rows])
            normal = np.einsum("ndk,ndl->nkl", jacobians, weighted)
            slow = n_steps[rows] >= _SLOW_STEPS
            if slow.any():  # Newton where the Gauss--Newton matrix misjudges the curvature
                scale = _STEP * np.sqrt(np.mean(np.sum(a[rows[slow]] ** 2, axis=1))) or _STEP  # the rms of |a|
                exact = 0.5 * self._distance_hessian(a[rows[slow]] @ components, components, X[rows[slow]], scale)[1]
                curved = np.linalg.eigvalsh(exact)[:, 0] > 0.0
                steps[rows[slow][curved & (n_steps[rows[slow]] == _SLOW_STEPS)]] = 1.0
                normal[np.flatnonzero(slow)[curved]] = exact[curved]
            delta = np.linalg.solve(normal, gradient[..., None])[..., 0]
            decrement = np.maximum(np.einsum("nk,nk->n", gradient, delta), 0.0)
            bound = self.tol * np.sqrt(value[rows] + np.sum(a[rows] ** 2, axis=1)) + errors[rows]
            converged = (np.sqrt(decrement) <= bound) & np.isfinite(errors[rows])
            step = steps[rows]
            trial = a[rows] + step[:, None] * delta
            new_value, new_errors, new_residuals, new_metrics = evaluate(trial, X[rows])
            noise = np.nan_to_num(_value_error(value[rows], errors[rows]) + _value_error(new_value, new_errors), posinf=0.0)
            change = new_value - value[rows]
            better = (change <= noise) & ~converged
            with np.errstate(divide="ignore", invalid="ignore"):
                best_step = np.where(change + 2.0 * decrement * step > 0, decrement * step**2 / (change + 2.0 * decrement * step), 1.0)
            steps[rows] = np.where(np.abs(change) <= noise, step, np.clip(np.nan_to_num(best_step, nan=1.0), 0.1, 1.0))
            rejected[rows] = np.where(better, 0, rejected[rows] + 1)
            n_steps[rows] += 1
            accepted = rows[better]
            a[accepted], value[accepted], errors[accepted], residuals[accepted], metrics[accepted] = (
                trial[better], new_value[better], new_errors[better], new_residuals[better], new_metrics[better]
            )
            done[rows[converged]] = True
            active[rows[converged | (rejected[rows] >= 4)]] = False
        return a, done

    def _exact_coordinates(self, tangent, X, radii):
        """Projections onto the fitted principal geodesic subspace, started at ``tangent``; warns for those not converged."""
        a, converged = self._project(tangent, self.components_, X)
        unscanned = 0
        if self.n_components_ == 1:
            a, converged, _, unscanned = self._global_projection(a, converged, self.components_[0], X, radii)
        if not converged.all() or unscanned:
            warnings.warn(
                f"PrincipalGeodesicAnalysis (exact): {int((~converged).sum())} of {len(X)} projections did not meet tol={self.tol:.3g}"
                + (f", {unscanned} could not be shown global" if unscanned else ""),
                ConvergenceWarning,
                stacklevel=4,  # the user's call, past transform and with_one_blas_thread
            )
        return a

    @with_one_blas_thread
    def transform(self, X):
        r"""Coordinates, shape (n_samples, n_components).

        Tangent PCA: :math:`\langle e_k, \mathrm{Log}_\mu(x)\rangle_{M(\mu)}`; exact PGA: the
        coordinates :math:`a^*` of the closest point :math:`\mathrm{Exp}_\mu(E a^*)` of the principal geodesic subspace.
        """
        check_is_fitted(self)
        X = validate_data(self, check_not_text(X, "X"), dtype=float, reset=False)
        if self.method != "exact":
            return _tangent.log(self.space, X, self.mean_, self.n_jobs) @ self.metric_matrix_ @ self.components_.T
        logs, lengths, errors, certified = _tangent.certified_log(self.space, X, self.mean_, self.n_jobs)
        return self._exact_coordinates(logs @ self.metric_matrix_ @ self.components_.T, X, _radii(lengths, errors, certified))

    def inverse_transform(self, X):
        r"""Points :math:`\mathrm{Exp}_\mu(\sum_k a_k e_k)` from coordinates ``X`` of shape (n_samples, n_components)."""
        check_is_fitted(self)
        X = check_array(check_not_text(X, "X"), dtype=float, input_name="X")
        if X.shape[1] != self.n_components_:
            raise ValueError(f"X must have n_components={self.n_components_} columns, got shape {X.shape}")
        return _tangent.exp(self.space, X @ self.components_, self.mean_, self.n_jobs)

    def principal_geodesic(self, index, t):
        r"""Points on the ``index``-th principal geodesic, :math:`\mathrm{Exp}_\mu(t \sqrt{\lambda_k}\, e_k)`.

        Parameters
        ----------
        index : int
            Component :math:`k` (0-based).
        t : array-like of shape (n_points,)
            Positions in units of the component's standard deviation
            :math:`\sqrt{\lambda_k}` (e.g. ``np.linspace(-3, 3, 7)``).

        Returns
        -------
        ndarray of shape (n_points, dim)
            Computed from two geodesics (``space.metric.geodesic``), one per
            direction, each evaluated at all :math:`|t|`.
        """
        check_is_fitted(self)
        if isinstance(index, bool) or not isinstance(index, (int, np.integer)) or not 0 <= index < self.n_components_:
            raise ValueError(f"index must be an int in [0, {self.n_components_}), got {index!r}")
        t = check_points(t, name="t", min_ndim=0).reshape(-1)
        if not t.size:
            return np.empty((0, len(self.mean_)))
        direction = np.sqrt(self.explained_variance_[index]) * self.components_[index]
        times, position = np.unique(np.abs(t), return_inverse=True)
        path = self.space.metric.geodesic(self.mean_, initial_tangent_vec=np.stack([direction, -direction]))
        both = np.asarray(path(times), dtype=float).reshape(2, len(times), -1)[:, position]  # one curve per sign
        return np.where((t >= 0)[:, None], both[0], both[1])
