"""runtime_c/aotc_math.h: aotc's own exp, log, tanh, erf and sigmoid.

tests/c/math_sweep.c evaluates them over float bit patterns against a float64 libm
reference. The exact functions must stay within 2 ulp and give the same bits from every
build: with and without fused multiply-add contraction, at every optimisation level, with
every compiler found. The fast functions must stay within the bound stated next to each in
the header, in every build, and their loops must vectorize."""
import os
import re
import shutil
import subprocess

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RUNTIME = os.path.join(REPO, "runtime_c")
HEADER = os.path.join(RUNTIME, "aotc_math.h")
DRIVER = os.path.join(REPO, "tests", "c", "math_sweep.c")

NAMES = ["exp", "log", "tanh", "erf", "sigmoid"]
EXACT_MAX_ULP = 2

# name: (compiler, flags). The baseline evaluates every operation as written.
BASELINE = "gcc-O0-no-contract"
BUILDS = {
    BASELINE: ("gcc", ["-O0", "-ffp-contract=off"]),
    "gcc-O2": ("gcc", ["-O2"]),
    "gcc-O3-native-contract": ("gcc", ["-O3", "-march=native", "-ffp-contract=fast"]),
    "clang-O2": ("clang", ["-O2"]),
    "clang-O3-native-contract": ("clang", ["-O3", "-march=native", "-ffp-contract=fast"]),
}
OPTIMIZED = [name for name in BUILDS if name != BASELINE]

# The sample every build evaluates for the checksums (small enough for -O0), and the
# denser one for accuracy: every COARSE-th bit pattern plus every DENSE-th float of each
# function's busy range.
SHARED_SWEEP = ("8209", "1031")
ACCURACY_SWEEP = ("4099", "127")

LINE = re.compile(r"^(\w+) max_ulp=(\d+) worst=0x([0-9a-f]+) max_frac=([\d.]+) checksum=([0-9a-f]+) "
                  r"count=(\d+) bad_class=(\d+) first_bad=0x([0-9a-f]+)$")

_binaries = {}
_sweeps = {}


def compile_driver(build, out_dir):
    compiler, flags = BUILDS[build]
    if not shutil.which(compiler):
        pytest.skip(f"{compiler} is not installed")
    exe = os.path.join(out_dir, f"math_sweep_{build}")
    cmd = [compiler, "-std=c99", "-Wall", "-Wextra", "-Werror", *flags, "-I", RUNTIME, DRIVER, "-o", exe, "-lm"]
    result = subprocess.run(cmd, capture_output=True, text=True)
    assert result.returncode == 0, f"{' '.join(cmd)}\n{result.stderr}"
    return exe


@pytest.fixture(scope="session")
def sweep_dir(tmp_path_factory):
    return str(tmp_path_factory.mktemp("math_sweep"))


def binary(build, out_dir):
    if build not in _binaries:
        _binaries[build] = compile_driver(build, out_dir)
    return _binaries[build]


def run(exe, *args, timeout=300):
    result = subprocess.run([exe, *args], capture_output=True, text=True, timeout=timeout)
    return result


def sweep(build, out_dir, params):
    """{function: stats} for one build and sample."""
    key = (build, params)
    if key not in _sweeps:
        result = run(binary(build, out_dir), "sweep", *params)
        assert result.returncode == 0, result.stderr
        stats = {}
        for line in result.stdout.splitlines():
            m = LINE.match(line.strip())
            assert m, f"unexpected driver output: {line!r}"
            stats[m.group(1)] = {"max_ulp": int(m.group(2)), "worst": m.group(3), "max_frac": float(m.group(4)),
                                 "checksum": m.group(5), "count": int(m.group(6)),
                                 "bad_class": int(m.group(7)), "first_bad": m.group(8)}
        assert sorted(stats) == sorted([f"exact_{n}" for n in NAMES] + [f"fast_{n}" for n in NAMES]), stats
        _sweeps[key] = stats
    return _sweeps[key]


def stated_fast_bounds():
    """{fast_<name>: max ulp} from the comment above each aotc_fast_<name>f in the header."""
    text = open(HEADER).read()
    bounds = dict((f"fast_{fn}", int(ulp)) for ulp, fn in re.findall(
        r"/\* \w+, max error (\d+) ulp[^*]*\*/\s*AOTC_INLINE_ALWAYS float aotc_fast_(\w+)f\(", text))
    assert sorted(bounds) == sorted(f"fast_{n}" for n in NAMES), bounds
    return bounds


def describe(name, s):
    return (f"{name}: max {s['max_ulp']} ulp at input 0x{s['worst']}, {s['bad_class']} results of the wrong "
            f"class (first at input 0x{s['first_bad']})")


@pytest.mark.parametrize("build", OPTIMIZED)
def test_exact_functions_are_within_2_ulp(build, sweep_dir):
    stats = sweep(build, sweep_dir, ACCURACY_SWEEP)
    for name in NAMES:
        s = stats[f"exact_{name}"]
        assert s["count"] > 10_000_000
        assert s["bad_class"] == 0 and s["max_ulp"] <= EXACT_MAX_ULP, describe(f"exact_{name}", s)


@pytest.mark.parametrize("build", OPTIMIZED)
def test_fast_functions_are_within_their_stated_bound(build, sweep_dir):
    stats = sweep(build, sweep_dir, ACCURACY_SWEEP)
    for name, bound in stated_fast_bounds().items():
        s = stats[name]
        assert s["bad_class"] == 0 and s["max_ulp"] <= bound, describe(name, s) + f" (stated bound {bound})"


@pytest.mark.parametrize("build", OPTIMIZED)
def test_exact_functions_give_the_same_bits_in_every_build(build, sweep_dir):
    want = sweep(BASELINE, sweep_dir, SHARED_SWEEP)
    got = sweep(build, sweep_dir, SHARED_SWEEP)
    for name in NAMES:
        key = f"exact_{name}"
        assert got[key]["count"] == want[key]["count"]
        assert got[key]["checksum"] == want[key]["checksum"], \
            f"{key}: {build} gives other bits than {BASELINE}"


@pytest.mark.parametrize("build", list(BUILDS))
def test_special_values(build, sweep_dir):
    result = run(binary(build, sweep_dir), "specials")
    assert result.returncode == 0 and re.search(r"^specials: \d+ passed, 0 failed$", result.stdout, re.M), \
        result.stdout + result.stderr


@pytest.mark.parametrize("compiler", ["gcc", "clang"])
def test_the_contracting_build_really_fuses_the_exact_functions(compiler, tmp_path):
    """Without fused multiply-adds in the exact functions, the bit comparison proves little."""
    if not shutil.which(compiler):
        pytest.skip(f"{compiler} is not installed")
    flags = BUILDS[f"{compiler}-O3-native-contract"][1]
    macros = subprocess.run([compiler, *flags, "-dM", "-E", "-x", "c", os.devnull], capture_output=True, text=True)
    if "__FMA__" not in macros.stdout:
        pytest.skip("this machine has no fused multiply-add")
    src = tmp_path / "wrap.c"
    src.write_text('#include "aotc_math.h"\n' + "".join(
        f"float wrap_{n}(float x) {{ return aotc_exact_{n}f(x); }}\n" for n in NAMES))
    asm = tmp_path / "wrap.s"
    result = subprocess.run([compiler, "-std=c99", *flags, "-I", RUNTIME, "-S", str(src), "-o", str(asm)],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    fused = {}
    current = None
    for line in asm.read_text().splitlines():
        m = re.match(r"^(wrap_\w+):", line)
        if m:
            current = m.group(1)
        elif current and re.search(r"\bvfn?m(add|sub)", line):
            fused[current] = fused.get(current, 0) + 1
    assert sorted(fused) == sorted(f"wrap_{n}" for n in NAMES), fused


def test_fast_loops_vectorize(tmp_path):
    if not shutil.which("gcc"):
        pytest.skip("gcc is not installed")
    machine = subprocess.run(["gcc", "-dumpmachine"], capture_output=True, text=True).stdout
    if not machine.startswith("x86_64"):
        pytest.skip("checked on x86-64")
    src = tmp_path / "loops.c"
    src.write_text('#include "aotc_math.h"\n' + "".join(
        f"void loop_{n}(const float *x, float *y, int64_t n) {{ aotc_fast_{n}_f32(x, y, n); }}\n" for n in NAMES))
    result = subprocess.run(["gcc", "-std=c99", "-O3", "-march=x86-64-v4", "-fopt-info-vec-optimized", "-I", RUNTIME,
                             "-c", str(src), "-o", str(tmp_path / "loops.o")], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    header_lines = open(HEADER).read().splitlines()
    for n in NAMES:
        line = next(i + 1 for i, text in enumerate(header_lines) if f"y[i] = aotc_fast_{n}f(x[i])" in text)
        assert re.search(rf"aotc_math\.h:{line}:\d+: optimized: loop vectorized", result.stderr), \
            f"aotc_fast_{n}_f32 (aotc_math.h:{line}) is not vectorized:\n{result.stderr}"


def test_clean_under_sanitizers_and_strict_warnings(tmp_path):
    cc = shutil.which(os.environ.get("CC", "cc"))
    if not cc:
        pytest.skip("no C compiler")
    exe = str(tmp_path / "math_sweep_sanitized")
    cmd = [cc, "-std=c99", "-O1", "-g", "-Wall", "-Wextra", "-Werror", "-Wpedantic", "-Wshadow",
           "-fsanitize=address,undefined,float-cast-overflow", "-fno-sanitize-recover=all",
           "-I", RUNTIME, DRIVER, "-o", exe, "-lm"]
    result = subprocess.run(cmd, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    env = dict(os.environ, UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1")
    for args in (["specials"], ["sweep", "65537", "16411"]):
        result = subprocess.run([exe, *args], capture_output=True, text=True, env=env, timeout=300)
        assert result.returncode == 0 and "runtime error" not in result.stderr, result.stdout + result.stderr
