"""The ``riemlocal`` command line.

::

    riemlocal bodyshape [--dataset bdims | --data CSV] [--quick | --thorough] [--out DIR]  # Hauberg et al. regression + PGA
    riemlocal taxonomy  [--dataset mnist] [--quick] [--out DIR]               # Ramanan & Baker taxonomy
    riemlocal geodesic FIELD.npz --from 2,2 --to 4,4                          # distances by every rule + a plot

Every command takes ``--out DIR`` (markdown table, PNG figures and a JSON of
the numbers), ``--n-jobs`` and ``--no-progress``; the experiments also take
``--quick`` and ``--seed``. Bad arguments and unreadable files end with a message
on stderr and exit status 2, never a traceback.
"""

import argparse
import re
import sys
import tempfile
import zipfile
from pathlib import Path

from . import __version__
from .datasets import MEASUREMENTS, load_body_measurements, load_body_shapes_csv
from .distances import RULES
from .experiments import bodyshape, taxonomy
from .experiments.geodesic import run_geodesic
from .experiments.taxonomy import DATASETS
from .fields import MetricField
from .io import load
from .utils.parallel import one_blas_thread

__all__ = ["main", "build_parser"]


def _common(
    parser, experiment=True, out_default=None, out_help="write a markdown table, PNG figures and a JSON of the numbers to DIR", n_jobs=None
):
    parser.add_argument("--out", metavar="DIR", type=_directory, default=out_default, help=out_help)
    if experiment:
        parser.add_argument("--quick", action="store_true", help="smaller settings that finish in about a minute")
        parser.add_argument("--seed", type=_seed, default=0, help="random seed, a non-negative integer (default: 0)")
    parser.add_argument(
        "--n-jobs",
        type=_n_jobs,
        default=n_jobs,
        metavar="N",
        help=f"parallel jobs through joblib (-1: all cores; default: {'all cores' if n_jobs == -1 else 1})",
    )
    parser.add_argument("--no-progress", action="store_true", help="switch the progress bars off")


def _directory(text):
    if not text:
        raise argparse.ArgumentTypeError(
            "expected a directory name, got an empty string (write --out . for the current directory)"
        )
    return text


def _n_jobs(text):
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value == 0:
        raise argparse.ArgumentTypeError(f"expected a non-zero integer (-1: all cores), got {text!r}")
    return value


def _seed(text):
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0 or value >= 2**32:
        raise argparse.ArgumentTypeError(f"expected an integer in [0, 2**32), got {text!r}")
    return value


def _point(text):
    try:
        values = [float(item) for item in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers such as 2,2.5, got {text!r}") from None
    if not all(abs(v) < float("inf") for v in values):
        raise argparse.ArgumentTypeError(f"coordinates must be finite, got {text!r}")
    return values


def build_parser():
    """The :class:`argparse.ArgumentParser` of the ``riemlocal`` command."""
    parser = argparse.ArgumentParser(
        prog="riemlocal",
        description="Local metric learning as metric tensor fields: paper experiments and geodesic distances.",
    )
    parser.add_argument("--version", action="version", version=f"riemlocal {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    bodyshape = commands.add_parser(
        "bodyshape",
        help="body-shape regression and PGA with a learned Riemannian metric (Hauberg et al. 2012, sec. 4.1)",
        description="Learn one LMNN metric per measurement cluster, blend them into a smooth field, and compare "
        "Euclidean with tangent-space regression and PGA (leave-one-out errors), on synthetic body shapes or on "
        "your own CSV (--data).",
    )
    _common(bodyshape, n_jobs=-1)  # its fits are independent: one per core
    bodyshape.add_argument(
        "--thorough",
        action="store_true",
        help="the leakage-free protocol with 10 folds instead of 5 (about twice the time)",
    )
    source = bodyshape.add_mutually_exclusive_group()
    source.add_argument(
        "--dataset",
        choices=("synthetic", "bdims"),
        default="synthetic",
        help="synthetic: bodies from riemlocal.datasets.make_body_shapes (default); bdims: 507 real adults "
        "(riemlocal.datasets.load_body_measurements, needs riemlocal[data]), 21 diameters and girths as the shape",
    )
    source.add_argument(
        "--data",
        metavar="CSV",
        help="your own body shapes: a CSV with a header row, shape coefficients in columns named coef_*, "
        "measurements in the others",
    )
    bodyshape.add_argument(
        "--measurements",
        metavar="NAME,NAME",
        type=lambda text: tuple(name.strip() for name in text.split(",") if name.strip()),
        help="measurements that define the clusters and are predicted (default: shoulder_to_wrist,shoulder_breadth "
        "on synthetic bodies, weight,height on bdims, the first two measurement columns of --data)",
    )
    bodyshape.set_defaults(command_parser=bodyshape)
    taxonomy = commands.add_parser(
        "taxonomy",
        help="the local-distance taxonomy (how x where x when) on sampled MNIST or digits and wine (Ramanan & Baker 2011)",
        description="Recognition rate of k-NN for every learner (how), placement (where) and distance rule "
        "(when) of Ramanan & Baker's taxonomy, on scikit-learn's digits and wine data or on their sampled-MNIST "
        "protocol (5,000 images from riemlocal[data]), beside a Euclidean 3-NN baseline.",
    )
    _common(taxonomy)
    taxonomy.add_argument(
        "--dataset",
        choices=DATASETS,
        default=DATASETS[0],
        help="digits-wine: scikit-learn's digits and wine (default); mnist: Ramanan & Baker's sampled MNIST "
        "(needs riemlocal[data])",
    )
    taxonomy.set_defaults(command_parser=taxonomy)
    geodesic = commands.add_parser(
        "geodesic",
        help="distance between two points of a saved field by every rule, with a plot",
        description="Load a metric field saved with riemlocal.io.save, print the distance between two points by "
        f"every registered rule that serves it ({', '.join(RULES)}) and plot the straight line and the "
        "geodesic (2-D: over the field's metric ellipses; higher D: coordinates along both curves).",
    )
    geodesic.add_argument("field", metavar="FIELD.npz", help="a metric field saved with riemlocal.io.save")
    geodesic.add_argument(
        "--from",
        dest="point_a",
        type=_point,
        required=True,
        metavar="X1,X2,...",
        help="first point",
    )
    geodesic.add_argument("--to", dest="point_b", type=_point, required=True, metavar="Y1,Y2,...", help="second point")
    _common(geodesic, experiment=False, out_default=".", out_help="write geodesic.md, geodesic.png, geodesic.json to DIR (default: .)")
    geodesic.set_defaults(command_parser=geodesic)
    return parser


def _bodyshape_data(args, parser):
    """Keyword arguments of ``run_bodyshape`` for ``--dataset``, ``--data`` and ``--measurements``."""
    options = {}
    names = list(MEASUREMENTS)
    try:
        if args.data is not None:
            options["data"] = load_body_shapes_csv(args.data)
        elif args.dataset == "bdims":
            options["data"] = load_body_measurements()
    except (OSError, ValueError, ImportError) as exc:
        parser.error(f"cannot read {'--data' if args.data else '--dataset'}: {exc}")
    if "data" in options:
        names = list(options["data"].measurement_names)
    if args.dataset == "bdims" and args.measurements is None:
        options["measurements"] = ("weight", "height")
    if args.measurements is not None:
        unknown = [name for name in args.measurements if name not in names]
        if not args.measurements or unknown:
            parser.error(f"--measurements must name columns among {names}, got {list(args.measurements)}")
        options["measurements"] = args.measurements
    return options


def _experiment(name, args, parser):
    run = getattr({"bodyshape": bodyshape, "taxonomy": taxonomy}[name], f"run_{name}")
    if name == "bodyshape":
        if args.quick and args.thorough:
            parser.error("--quick and --thorough exclude each other")
        options = {**_bodyshape_data(args, parser), "thorough": args.thorough}
    else:
        options = {"dataset": args.dataset}
    try:
        return run(quick=args.quick, seed=args.seed, n_jobs=args.n_jobs, verbose=not args.no_progress, out=args.out, **options)
    except ImportError as exc:  # a data set of the data extra
        parser.error(str(exc))
    except ValueError as exc:
        if "data" not in options:
            raise
        parser.error(f"cannot run on --data {args.data}: {exc}")


def _geodesic(args, parser):
    if Path(args.field).is_file() and not zipfile.is_zipfile(args.field):
        parser.error(f"cannot read FIELD.npz: {args.field} is not a .npz archive (a file written by riemlocal.io.save)")
    try:
        field = load(args.field)
    except (OSError, ValueError, TypeError) as exc:
        parser.error(f"cannot read FIELD.npz: {exc}")
    if not isinstance(field, MetricField):
        parser.error(f"{args.field} holds a {type(field).__name__}, not a metric field")
    for option, point in (("--from", args.point_a), ("--to", args.point_b)):
        if len(point) != field.dim:
            parser.error(f"{option} has {len(point)} coordinates but the field has dim={field.dim}")
    try:
        return run_geodesic(field, args.point_a, args.point_b, out=args.out, n_jobs=args.n_jobs, verbose=not args.no_progress)
    except ValueError as exc:  # e.g. points so far apart that the curve energy overflows
        parser.error(f"cannot compute the distances between --from and --to: {exc}")


def _attach_negative_points(argv):
    """Write ``--from -1,3`` as ``--from=-1,3``: argparse would take ``-1,3`` for an option."""
    joined = []
    for arg in argv:
        if joined and joined[-1] in ("--from", "--to") and re.match(r"-\.?\d", arg):
            joined[-1] += "=" + arg
        else:
            joined.append(arg)
    return joined


def main(argv=None):
    """Run the ``riemlocal`` command; returns the exit status (0 on success).

    Parameters
    ----------
    argv : list of str, default=None
        Arguments without the program name (``None``: ``sys.argv[1:]``).
    """
    parser = build_parser()
    args = parser.parse_args(_attach_negative_points(sys.argv[1:] if argv is None else argv))
    command = args.command_parser
    if args.out is not None:
        try:
            Path(args.out).mkdir(parents=True, exist_ok=True)
            tempfile.TemporaryFile(dir=args.out).close()
        except OSError as exc:
            command.error(f"cannot create --out directory or write to it: {exc}")
    with one_blas_thread():  # small matrices: BLAS threads would only compete for the cores (--n-jobs parallelizes)
        if args.command == "geodesic":
            result = _geodesic(args, command)
        else:
            result = _experiment(args.command, args, command)
    print(result["markdown"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
