r"""Generative local metric learning (GLML): a metric field from class Gaussians.

Noh, Zhang & Lee choose, at every point :math:`x`, the metric :math:`A` that
cancels the finite-sample bias of the nearest-neighbour error. With joint class
densities :math:`p_c(x)`, the error of the 1-NN rule whose neighbour lies at
squared :math:`A`-distance :math:`d^2` from :math:`x` is, to first order in
:math:`d^2`, the asymptotic error plus a term proportional to
:math:`\operatorname{tr}(A^{-1} B(x))` with (their eq. 11, eq. 9 for two classes)

.. math::
    B = \sum_c \nabla\nabla p_c \Big(\sum_{j \ne c} p_j^2 - p_c \sum_{j \ne c} p_j\Big)
      = \sum_c \nabla\nabla p_c \, (q - p_c S),
    \qquad S = \sum_c p_c, \; q = \sum_c p_c^2 .

(Expanding :math:`E = \int \sum_i p_i (1 - \tilde p_i / \tilde S)` in the
neighbourhood-averaged densities :math:`\tilde p_c = p_c + \tfrac{d^2}{2D}
\operatorname{tr}(A^{-1}\nabla\nabla p_c)` gives :math:`\partial E / \partial
\tilde p_c = (q - p_c S) / S^2`.) The bias vanishes for every :math:`A` with
:math:`\operatorname{tr}(A^{-1}B) = 0`; the paper's closed form (eq. 10) keeps the
eigenvectors :math:`U` of :math:`B = U \Lambda U^T` and takes

.. math::
    A_{\mathrm{opt}} \propto U \operatorname{diag}\big(d_+ \lambda_i \,[\lambda_i > 0]
        - d_- \lambda_i \,[\lambda_i < 0]\big) U^T,

where :math:`d_\pm` count the positive / negative eigenvalues, so that
:math:`A_{\mathrm{opt}}^{-1} B` has eigenvalues :math:`1/d_+` (:math:`d_+` times) and
:math:`-1/d_-` (:math:`d_-` times), whose sum is zero. Fixing :math:`|A| = 1`
(the paper's normalization, which fixes :math:`E[d_N^2]`) removes the scale of
:math:`B`, so only the posteriors matter: with :math:`\pi_c = p_c / S`,

.. math::
    B / S^3 = \sum_c \pi_c (\textstyle\sum_i \pi_i^2 - \pi_c)\, G_c, \qquad
    G_c = \nabla\nabla p_c / p_c = \Sigma_c^{-1}(x-\mu_c)(x-\mu_c)^T\Sigma_c^{-1} - \Sigma_c^{-1}

(their eq. 14 for a Gaussian), which is what :meth:`GLMLField.bias_matrix`
evaluates, in log space, so points far from every class neither underflow nor
give 0/0. The field is the paper's surrogate :math:`M(x) = \gamma I + A_{\mathrm{opt}}(x)`.

References
----------
.. [1] Y.-K. Noh, B.-T. Zhang and D. D. Lee, "Generative local metric learning
   for nearest neighbor classification", NIPS 2010.
"""

import numpy as np
from scipy.special import softmax

from ..utils.validation import check_labels, check_points, check_positive, check_spread, is_positive_definite
from ._base import MetricField
from ._local import SmoothLocalField

__all__ = ["GLMLField"]


class GLMLField(MetricField):
    r"""GLML metric field :math:`M(x) = \gamma I + A_{\mathrm{opt}}(x)` (Noh, Zhang & Lee, 2010).

    One Gaussian per class is fitted to ``(X, y)``: the class mean, the
    covariance :math:`\Sigma_c = \hat\Sigma_c + \epsilon I` (the paper's
    regularization, :math:`\hat\Sigma_c` the maximum-likelihood estimate) and
    the prior :math:`n_c / n`, so that :math:`p_c(x) = (n_c/n)\,
    \mathcal N(x; \mu_c, \Sigma_c)` is the joint density of class :math:`c`.
    At a point, :math:`A_{\mathrm{opt}}` is the paper's eq. (10) solution for
    the multiclass :math:`B` of eq. (11), scaled to unit determinant; see the
    module docstring for the formulas.

    Parameters
    ----------
    X : array-like of shape (n_samples, dim)
        Training points.
    y : array-like of shape (n_samples,)
        Class labels; at least two classes, each with at least two points.
    gamma : float, default=1.0
        Isotropic regularization :math:`\gamma > 0` added to the unit-determinant
        :math:`A_{\mathrm{opt}}`; large values approach the Euclidean metric.
        The paper selects it by cross-validation.
    reg_covar : float, default=1e-3
        Covariance ridge :math:`\epsilon \ge 0` (in squared units of ``X``;
        scikit-learn's name in ``GaussianMixture``, the paper's :math:`\alpha`).
        ``reg_covar=0`` is allowed only when every class covariance is
        nonsingular.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    priors_ : ndarray of shape (n_classes,)
    means_ : ndarray of shape (n_classes, dim)
    covariances_ : ndarray of shape (n_classes, dim, dim)
        Regularized class covariances :math:`\hat\Sigma_c + \epsilon I`.
    structure : str
        ``"piecewise_smooth"`` (so ``is_smooth`` is ``False``). :math:`A_{\mathrm{opt}}` is smooth where :math:`B(x)` is
        nonsingular, but when an eigenvalue of :math:`B` changes sign the counts
        :math:`d_\pm` jump, so every other eigenvalue of :math:`A_{\mathrm{opt}}`
        jumps: the field is discontinuous across the hypersurface
        :math:`\det B(x) = 0`. The unit-determinant scaling also grows like
        :math:`|\lambda_{\min}|^{-1/D}` there (the vanishing eigenvalue is floored at
        ``eps * max|lambda|`` so the scaling stays finite; where :math:`B = 0`,
        e.g. far from all but one class, :math:`A_{\mathrm{opt}} = I`). Use the
        field with frozen-metric rules (the query's metric); for geodesics and
        statistics use its smooth form, :meth:`smooth_field`.

    Notes
    -----
    Multiplying :math:`M(x)` by a positive number leaves the neighbour ranking
    at ``x`` unchanged, so what matters is the ratio of :math:`\gamma` to the
    unit-determinant :math:`A_{\mathrm{opt}}`. Evaluating :math:`M` at ``n`` points costs one batched
    ``dim x dim`` eigendecomposition per point.

    Examples
    --------
    >>> import numpy as np
    >>> from riemlocal.fields import GLMLField
    >>> rng = np.random.default_rng(0)
    >>> X = np.vstack([rng.normal(size=(30, 3)), rng.normal(1.0, 2.0, size=(30, 3))])
    >>> y = np.repeat([0, 1], 30)
    >>> field = GLMLField(X, y, gamma=0.5)
    >>> field.metric_matrix(np.zeros((4, 3))).shape
    (4, 3, 3)
    """

    structure = "piecewise_smooth"

    def __init__(self, X, y, gamma=1.0, reg_covar=1e-3):
        X = check_points(X, name="X", min_ndim=2)
        if X.ndim != 2:
            raise ValueError(f"X must have shape (n_samples, dim), got {X.shape}")
        check_spread(X)
        y = check_labels(y)
        if y.shape != (X.shape[0],):
            raise ValueError(f"y must have shape (n_samples,) = ({X.shape[0]},), got {y.shape}")
        self.gamma = check_positive(gamma, "gamma")
        self.reg_covar = check_positive(reg_covar, "reg_covar", strict=False)
        classes, y_index, counts = np.unique(y, return_inverse=True, return_counts=True)
        if classes.size < 2:
            raise ValueError(f"y must contain at least two classes, got {classes.size}")
        if counts.min() < 2:
            raise ValueError(
                f"y: every class needs at least 2 points to estimate its covariance; "
                f"class {classes[counts.argmin()].tolist()!r} has {counts.min()}"
            )
        super().__init__(X.shape[1])
        self.X, self.y = X, y
        self.classes_ = classes
        self.priors_ = counts / counts.sum()
        # class means relative to a training point: x - mu_c = (x - X_0) - (mu_c - X_0) cancels nothing at large offsets
        self._origin = X[0]
        local = X - self._origin
        self._local_means = np.stack([local[y_index == c].mean(axis=0) for c in range(classes.size)])
        self.means_ = self._origin + self._local_means
        self.covariances_ = np.stack(
            [np.cov(local[y_index == c], rowvar=False, bias=True).reshape(self.dim, self.dim) for c in range(classes.size)]
        ) + self.reg_covar * np.eye(self.dim)
        if not np.all(is_positive_definite(self.covariances_)):
            raise ValueError(
                f"reg_covar={self.reg_covar!r} leaves a singular class covariance (a class with fewer "
                f"distinct points than dim={self.dim}?); use reg_covar > 0"
            )
        cholesky = np.linalg.cholesky(self.covariances_)
        self._precisions = np.linalg.inv(self.covariances_)
        self._precisions = 0.5 * (self._precisions + np.swapaxes(self._precisions, -1, -2))
        log_det = 2.0 * np.log(np.diagonal(cholesky, axis1=-2, axis2=-1)).sum(-1)
        self._log_norms = np.log(self.priors_) - 0.5 * log_det  # common -D/2 log(2 pi) dropped

    @property
    def n_classes(self):
        """Number of classes :math:`C`."""
        return self.classes_.size

    def posteriors(self, base_point):
        r"""Class posteriors :math:`\pi_c(x) = p_c(x) / \sum_j p_j(x)`, shape ``(..., n_classes)``."""
        return self._posteriors_and_whitened(self._check(base_point))[0]

    def _posteriors_and_whitened(self, x):
        """Posteriors and :math:`\\Sigma_c^{-1}(x - \\mu_c)`, shape ``(..., C, D)``."""
        diff = (x - self._origin)[..., None, :] - self._local_means
        whitened = np.einsum("cij,...cj->...ci", self._precisions, diff)
        log_joint = self._log_norms - 0.5 * np.einsum("...ci,...ci->...c", diff, whitened)
        if not np.all(np.isfinite(log_joint)):
            raise ValueError("base_point is too far from the class means: its squared distances overflow float64")
        return softmax(log_joint, axis=-1), whitened

    def bias_matrix(self, base_point):
        r"""Bias matrix :math:`B(x) / S(x)^3` of eq. (11), shape ``(..., dim, dim)``.

        .. math::
            \frac{B}{S^3} = \sum_c \pi_c \Big(\sum_i \pi_i^2 - \pi_c\Big)
            \big[\Sigma_c^{-1}(x-\mu_c)(x-\mu_c)^T\Sigma_c^{-1} - \Sigma_c^{-1}\big],

        with :math:`S = \sum_c p_c`. The positive factor :math:`S^{-3}` changes
        neither the eigenvectors nor the signs, hence not :math:`A_{\mathrm{opt}}`.
        """
        return self._bias_matrix(self._check(base_point))

    def _bias_matrix(self, x):
        post, whitened = self._posteriors_and_whitened(x)
        weights = post * (np.sum(post**2, axis=-1, keepdims=True) - post)
        outer = np.einsum("...c,...ci,...cj->...ij", weights, whitened, whitened)
        return outer - np.einsum("...c,cij->...ij", weights, self._precisions)

    def optimal_metric(self, base_point):
        r"""Unit-determinant :math:`A_{\mathrm{opt}}(x)` of eq. (10), shape ``(..., dim, dim)``.

        Positive semidefinite, and positive definite where :math:`B(x)` is
        nonsingular; it commutes with :math:`B(x)` and satisfies
        :math:`\operatorname{tr}(A_{\mathrm{opt}}^{-1} B) = 0` whenever :math:`B`
        has eigenvalues of both signs.
        """
        return self._optimal_metric(self._check(base_point))

    def _optimal_metric(self, x):
        eigvals, eigvecs = np.linalg.eigh(self._bias_matrix(x))
        positive, negative = eigvals > 0, eigvals < 0
        n_positive = positive.sum(-1, keepdims=True)
        n_negative = negative.sum(-1, keepdims=True)
        scaled = np.where(positive, n_positive * eigvals, 0.0) - np.where(negative, n_negative * eigvals, 0.0)
        largest = scaled.max(axis=-1, keepdims=True)
        vanishing = largest == 0.0  # B = 0: no preferred direction
        floored = np.where(vanishing, 1.0, np.maximum(scaled, np.finfo(float).eps * largest))
        log_scale = np.mean(np.log(floored), axis=-1, keepdims=True)  # log det(A)^(1/D)
        diag = np.where(vanishing, 1.0, scaled) * np.exp(-log_scale)
        return np.einsum("...ik,...k,...jk->...ij", eigvecs, diag, eigvecs)

    def metric_matrix(self, base_point):
        r""":math:`M(x) = \gamma I + A_{\mathrm{opt}}(x)`, shape ``(..., dim, dim)``."""
        return self.gamma * np.eye(self.dim) + self._optimal_metric(self._check(base_point))

    def smooth_field(self, centers=None, rho=1.0):
        r"""Smooth form for geodesics: the GLML metrics at ``centers`` blended as in Hauberg et al.

        .. math::
            M_s(x) = \sum_r w_r(x)\, M(x_r), \qquad
            w = \mathrm{softmax}_r\big(-\tfrac{\rho}{2} \|x - x_r\|^2_{M(x_r)}\big).

        :math:`M` itself jumps across :math:`\det B(x) = 0`; the blend is
        smooth (Hauberg, Freifeld & Black, Lemma 1), so it can become a
        :class:`~riemlocal.manifold.LearnedMetricManifold`. It tends to the
        nearest center's GLML metric as ``rho`` grows.

        Parameters
        ----------
        centers : array-like of shape (n_centers, dim), default=None
            Where the GLML metric is evaluated; ``None`` uses the training points.
        rho : float, default=1.0
            Sharpness of the blend (> 0).

        Returns
        -------
        field : SmoothLocalField
        """
        centers = self.X if centers is None else check_points(centers, self.dim, "centers", min_ndim=2)
        return SmoothLocalField(centers, self.metric_matrix(centers), rho)

    def __repr__(self):
        return f"GLMLField(dim={self.dim}, n_classes={self.n_classes}, gamma={self.gamma!r}, reg_covar={self.reg_covar!r})"
