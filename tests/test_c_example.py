"""examples/c: `make` compiles the example model with aotc, links main.c against the
generated C with -Werror, runs it; its numbers must be the Python Session's."""
import math
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest

import aotc

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLES = os.path.join(REPO, "examples")
sys.path.insert(0, EXAMPLES)
from example_input import example_input  # noqa: E402

LINE = re.compile(r"^(\S+)\[(\d+)\] = (\S+)$")

pytestmark = pytest.mark.skipif(
    not shutil.which("make") or not shutil.which(os.environ.get("CC", "cc")),
    reason="needs make and a C compiler")


def printed_values(stdout):
    """'name[i] = value' lines -> {name: [values in index order]}."""
    values = {}
    for line in stdout.splitlines():
        m = LINE.match(line.strip())
        if m:
            values.setdefault(m.group(1), []).append((int(m.group(2)), float(m.group(3))))
    return {name: [v for _, v in sorted(pairs)] for name, pairs in values.items()}


def last_digit_unit(value, significant=6):
    """One unit in the last place of value printed with %.6g."""
    if value == 0.0:
        return 1e-45
    return 10.0 ** (math.floor(math.log10(abs(value))) - (significant - 1))


def test_printed_outputs_match_the_python_session(tmp_path):
    build = tmp_path / "build"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [REPO, os.environ.get("PYTHONPATH")])))
    result = subprocess.run(
        ["make", "-C", os.path.join(EXAMPLES, "c"), f"AOTC={sys.executable} -m aotc.cli", f"BUILD={build}"],
        capture_output=True, text=True, env=env, timeout=600)
    assert result.returncode == 0, f"make failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"

    sess = aotc.load(build / "tiny_cnn")
    want = sess.run(example_input(sess.inputs[0].shape))
    printed = printed_values(result.stdout)
    assert list(printed) == [sess.outputs[0].name], result.stdout
    got = np.array(printed[sess.outputs[0].name])
    assert got.shape == (want.size,)
    for i, (p, w) in enumerate(zip(got, want.reshape(-1).tolist())):
        assert abs(p - w) <= last_digit_unit(p), f"output {i}: C printed {p}, Python gives {w:.9g}"
    assert f"class {int(np.argmax(want))}" in result.stdout
    assert abs(float(want.sum()) - 1.0) < 1e-5      # softmax probabilities
