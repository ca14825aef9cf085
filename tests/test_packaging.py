"""The wheel: built from the source tree, installed into a fresh venv, `aotc compile` from
an empty folder, and the produced module imported without aotc."""
import glob
import os
import shutil
import site
import subprocess
import sys
import sysconfig
import textwrap
import zipfile

import numpy as np
import onnx
import pytest
from onnx import helper

from oracle import make_model

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NOT_SOURCE = shutil.ignore_patterns(".git", ".venv", "venv", "build", "dist", "*.egg-info", "__pycache__",
                                    ".pytest_cache", ".benchmarks", "*.so", "*.o")

pytestmark = pytest.mark.slow


def run(cmd, **kwargs):
    result = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=900, **kwargs)
    assert result.returncode == 0, f"{' '.join(map(str, cmd))} failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result.stdout


def clean_env(**extra):
    """The environment without anything that would let the checkout leak into a run."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    env.update(extra)
    return env


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    """A wheel built from a copy of the source tree (the checkout itself stays untouched)."""
    tmp = tmp_path_factory.mktemp("wheel")
    source = tmp / "src"
    shutil.copytree(REPO, source, ignore=NOT_SOURCE)
    run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", tmp / "dist", source], env=clean_env())
    wheels = glob.glob(str(tmp / "dist" / "aotc-*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]


@pytest.fixture(scope="module")
def venv(wheel, tmp_path_factory):
    """A fresh venv with the wheel installed and nothing else: numpy, onnx, jinja2 and
    cffi come from the host, and from the environment running these tests (a .pth
    file), which may itself be a venv."""
    path = tmp_path_factory.mktemp("venv") / "venv"
    run([sys.executable, "-m", "venv", "--system-site-packages", path])
    python = path / "bin" / "python"
    # Installed before the .pth exists, or pip would take an aotc visible through it for
    # this one and install nothing.
    run([python, "-m", "pip", "install", "--no-deps", "--no-index", "-q", wheel], env=clean_env())
    purelib = run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).strip()
    host = [p for p in dict.fromkeys(site.getsitepackages() + [sysconfig.get_paths()["purelib"]])
            if os.path.isdir(p)]
    with open(os.path.join(purelib, "host_packages.pth"), "w") as f:
        f.write("\n".join(host) + "\n")
    return path


def test_wheel_holds_templates_and_runtime_headers(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    for template in os.listdir(os.path.join(REPO, "templates")):
        if template.endswith(".j2"):
            assert f"aotc/templates/{template}" in names, template
    headers = [h for h in os.listdir(os.path.join(REPO, "runtime_c")) if h.endswith((".h", ".c"))]
    assert headers
    for header in headers:
        assert f"aotc/runtime_c/{header}" in names, header
    assert "aotc/cli.py" in names and "aotc/ops/base.py" in names
    entry_points = [n for n in names if n.endswith("entry_points.txt")]
    assert entry_points and "aotc = aotc.cli:main" in zipfile.ZipFile(wheel).read(entry_points[0]).decode()


def test_installed_aotc_compiles_from_an_empty_folder(venv, tmp_path):
    work = tmp_path / "empty"
    work.mkdir()
    model = make_model([helper.make_node("Mul", ["x", "s"], ["t"]), helper.make_node("Relu", ["t"], ["y"])],
                       [("x", "float32", [2, 4])], [("y", "float32", None)],
                       initializers={"s": np.array([[1.5], [-2.0]], np.float32)})
    model_path = tmp_path / "scale.onnx"
    onnx.save(model, str(model_path))
    env = clean_env(AOTC_CACHE_DIR=str(tmp_path / "cache"))

    where = run([venv / "bin" / "python", "-c", "import aotc; print(aotc.__file__)"], cwd=work, env=env)
    assert where.strip().startswith(str(venv)), f"aotc imported from {where} instead of the venv"
    out = run([venv / "bin" / "aotc", "compile", model_path, "-o", "out", "--report"], cwd=work, env=env)
    assert "nodes before" in out
    assert (work / "out" / "scale.c").is_file() and (work / "out" / "manifest.json").is_file()

    # The produced module, with only its folder on sys.path and aotc made unimportable.
    script = textwrap.dedent("""
        import sys
        class NoAotc:
            def find_spec(self, name, path=None, target=None):
                if name == "aotc" or name.startswith("aotc."):
                    raise ImportError("aotc is not available here")
        sys.meta_path.insert(0, NoAotc())
        sys.path.insert(0, sys.argv[1])
        import numpy as np
        import scale
        assert scale.__file__.startswith(sys.argv[1]), scale.__file__
        x = np.array([[1, -2, 3, -4], [5, -6, 7, -8]], np.float32)
        y = scale.load(threads=1).run(x)
        assert (y == np.maximum(x * np.array([[1.5], [-2.0]], np.float32), 0)).all(), y
        print("ok", y.shape)
    """)
    printed = run([venv / "bin" / "python", "-I", "-c", script, work / "out"], cwd=tmp_path, env=env)
    assert printed.strip() == "ok (2, 4)"
