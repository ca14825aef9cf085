"""The `aotc` command line: compile, run, inspect, and how errors reach the user."""
import os
import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import helper

from aotc.cli import main
from oracle import make_model

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture
def model_path(tmp_path):
    """y = Relu(x + b), x of shape [N, 3] (N left open), b of shape [3]."""
    model = make_model([helper.make_node("Add", ["x", "b"], ["t"], name="add"),
                        helper.make_node("Relu", ["t"], ["y"], name="relu")],
                       [("x", "float32", ["N", 3]), ("b", "float32", [3])], [("y", "float32", None)])
    path = tmp_path / "addrelu.onnx"
    onnx.save(model, str(path))
    return path


def run_cli(*args, cwd=None):
    """`python -m aotc.cli ARGS` in a real process: exit code, stdout, stderr."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [REPO, os.environ.get("PYTHONPATH")])))
    result = subprocess.run([sys.executable, "-m", "aotc.cli", *map(str, args)], cwd=cwd, env=env,
                            capture_output=True, text=True, timeout=300)
    return result.returncode, result.stdout, result.stderr


def assert_one_error_line(stderr, kind):
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith(f"aotc: error: {kind}: "), stderr
    assert "Traceback" not in stderr


def test_compile_run_inspect(model_path, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["compile", str(model_path), "--shape", "2x3", "-o", str(out), "--report"]) == 0
    printed = capsys.readouterr().out
    assert "input  x: float32 [2, 3]" in printed and "output y: float32 [2, 3]" in printed
    assert "nodes before:  2: Add 1, Relu 1" in printed
    for name in ("addrelu.c", "addrelu.h", "addrelu.weights", "manifest.json", "addrelu.py"):
        assert (out / name).is_file(), name

    x = np.array([[1.0, -2.0, 3.0], [-4.0, 5.0, -6.0]], np.float32)
    b = np.array([0.5, 0.25, -0.125], np.float32)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "b.npy", b)
    saved = tmp_path / "saved"
    assert main(["run", str(out), "--input", f"x={tmp_path / 'x.npy'}", "--input", f"b={tmp_path / 'b.npy'}",
                 "--save", str(saved)]) == 0
    printed = capsys.readouterr().out
    want = np.maximum(x + b, 0)
    assert "output y: float32 [2, 3]" in printed
    assert f"max {want.max():.6g}" in printed and f"min {want.min():.6g}" in printed
    np.testing.assert_array_equal(np.load(saved / "y.npy"), want)

    assert main(["inspect", str(out)]) == 0
    printed = capsys.readouterr().out
    for fact in ("passes fired:", "nodes before:  2: Add 1, Relu 1", "nodes after:", "workspace:",
                 "intermediates:", "weights:", "mode:          fast", "target:", "opt level:     all",
                 "input:         x: float32 [2, 3]"):
        assert fact in printed, fact


def test_run_makes_seeded_inputs_for_missing_ones(model_path, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["compile", str(model_path), "--shape", "x=4x3", "-o", str(out)]) == 0
    capsys.readouterr()
    runs = []
    for _ in range(2):
        assert main(["run", str(out)]) == 0
        runs.append(capsys.readouterr().out)
    assert runs[0] == runs[1]
    assert "seeded random data" in runs[0] and "output y: float32 [4, 3]" in runs[0]
    assert main(["run", str(out), "--seed", "5"]) == 0
    assert capsys.readouterr().out != runs[0]


def test_default_output_folder_is_model_stem(model_path, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["compile", str(model_path), "--shape", "1x3", "--weights", "c", "--name", "tiny"]) == 0
    out = tmp_path / "addrelu_aotc"
    assert (out / "tiny.c").is_file() and (out / "tiny_weights.h").is_file()
    assert not (out / "tiny.weights").exists()


def test_unnamed_shape_goes_to_the_first_input_beside_named_ones(tmp_path, capsys):
    model = make_model([helper.make_node("Add", ["x", "b"], ["y"])],
                       [("x", "float32", ["N", 3]), ("b", "float32", ["M"])], [("y", "float32", None)])
    path = tmp_path / "two.onnx"
    onnx.save(model, str(path))
    assert main(["compile", str(path), "--shape", "b=3", "--shape", "5x3", "-o", str(tmp_path / "o")]) == 0
    printed = capsys.readouterr().out
    assert "input  x: float32 [5, 3]" in printed and "input  b: float32 [3]" in printed


def test_bad_model_file_is_one_error_line_and_exit_2(tmp_path):
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"this is not protobuf \xff\xfe\x00")
    code, stdout, stderr = run_cli("compile", bad, "-o", tmp_path / "o", cwd=tmp_path)
    assert code == 2
    assert_one_error_line(stderr, "InvalidModel")
    assert not (tmp_path / "o").exists()


def test_missing_model_file_is_an_error(tmp_path):
    code, _, stderr = run_cli("compile", tmp_path / "nowhere.onnx", cwd=tmp_path)
    assert code == 2
    assert_one_error_line(stderr, "InvalidModel")


def test_unsupported_operator_is_an_error(tmp_path):
    model = make_model([helper.make_node("Frobnicate", ["x"], ["y"], domain="example.unknown")],
                       [("x", "float32", [2])], [("y", "float32", [2])])
    model.opset_import.append(helper.make_opsetid("example.unknown", 1))
    path = tmp_path / "frob.onnx"
    onnx.save(model, str(path))
    code, _, stderr = run_cli("compile", path, cwd=tmp_path)
    assert code == 2
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("aotc: error: ") and "Frobnicate" in lines[0], stderr


def test_open_dimension_without_shape_is_an_error(model_path, tmp_path, capsys):
    assert main(["compile", str(model_path), "-o", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert_one_error_line(err, "InvalidInput")
    assert "--shape" in err


@pytest.mark.parametrize("shape", ["2xfoo", "=2x3", "-1x3"])
def test_malformed_shape_is_a_usage_error(model_path, tmp_path, capsys, shape):
    assert main(["compile", str(model_path), f"--shape={shape}", "-o", str(tmp_path / "o")]) == 2
    assert_one_error_line(capsys.readouterr().err, "UsageError")


def test_run_rejects_wrong_inputs(model_path, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["compile", str(model_path), "--shape", "2x3", "-o", str(out)]) == 0
    np.save(tmp_path / "x64.npy", np.zeros((2, 3), np.float64))
    capsys.readouterr()
    assert main(["run", str(out), "--input", f"x={tmp_path / 'x64.npy'}"]) == 2
    assert_one_error_line(capsys.readouterr().err, "InvalidInput")
    assert main(["run", str(out), "--input", f"nope={tmp_path / 'x64.npy'}"]) == 2
    assert_one_error_line(capsys.readouterr().err, "InvalidInput")
    assert main(["run", str(out), "--input", "x"]) == 2
    assert_one_error_line(capsys.readouterr().err, "UsageError")


def test_inspect_of_a_folder_that_is_no_output(tmp_path):
    code, _, stderr = run_cli("inspect", tmp_path, cwd=tmp_path)
    assert code == 2
    assert_one_error_line(stderr, "UsageError")


def test_console_script_surface():
    code, stdout, _ = run_cli("--help")
    assert code == 0
    for command in ("compile", "run", "inspect"):
        assert command in stdout
    code, stdout, _ = run_cli("compile", "--help")
    for option in ("--shape", "--mode", "--opt-level", "--target", "--name", "--report", "--weights", "-o"):
        assert option in stdout
