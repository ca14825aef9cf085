"""The GEMM engine on every kernel path: AVX-512, AVX2 and generic C builds.

One model holds many products (ragged M, N, K; K past one 256-row block; K = 1; N = 1;
M = 1; transposed operands; run-time and compile-time B; an A that the kernel packs)
and a Linear with each activation in its tile epilogue, so one compile per target and
mode checks them all: against a float64 reference, fast-mode bits for 1 and 2 threads,
and exact-mode bits equal across the three paths, the thread counts and the unfused
operators. The compile-time packing is checked byte for byte against the C packer.
"""
import importlib.util
import math

import numpy as np
import pytest
from onnx import helper

import aotc
from aotc import build, resources
from aotc.ops.matmul import PANEL_ROWS, pack_a, pack_b
from oracle import make_model, random

TARGETS = ["avx512", "avx2", "generic"]
NATIVE = build.resolve_target("native")

# (M, N, K, form): form "b" run-time B, "const" compile-time packed B, "gemm_tt"
# Gemm with transA, transB and a bias row.
PRODUCTS = [
    (37, 45, 300, "b"),      # ragged everywhere, K past one block
    (15, 33, 257, "b"),      # 15 rows: one full panel + a short one, merged and split
    (70, 1, 300, "b"),       # N = 1: runs as a row of C^T
    (9, 70, 1, "b"),         # K = 1
    (1, 70, 513, "b"),       # M = 1 over row-major B
    (29, 130, 40, "b"),      # more than 4 strips: A read in place (row stride 40)
    (20, 2000, 40, "b"),     # K short, blocks of several strips: each panel's full strips in
    (20, 2000, 40, "const"),    # one run, the ragged one after; from B in place, packed,
    (19, 2000, 40, "gemm_tt"),  # or packed per call with C as the bias
    (20, 200, 512, "b"),     # row stride of 2 KiB: A packed; K two whole blocks
    (300, 150, 512, "b"),    # ... and 22 panels: on AVX-512 with L2 below 2 MiB, each task packs its own
    (17, 2050, 520, "const"),   # long rows of A meeting many strips: A packed (stride 520)
    (33, 600, 530, "b"),     # ... and 19 strips (stride 530)
    (3, 5, 7, "b"),
    (37, 45, 300, "const"),
    (1, 200, 300, "const"),  # M = 1 over packed B (the GEMV strips)
    (33, 150, 260, "const"),
    (23, 48, 70, "b"),       # a last strip of 16 columns: the half-width tiles' widest
    (19, 81, 300, "const"),  # ... and of 17: the whole strip's tiles
    (19, 150, 300, "gemm_tt"),   # transposed A, packed per call
    (1, 40, 33, "gemm_tt"),
    (70, 40, 600, "b"),      # more rows than columns, K past two blocks: on AVX-512 each
    (70, 40, 600, "const"),  # tile runs over all of K (A read in place) ...
    (70, 40, 600, "gemm_tt"),   # ... or transposed in place
]
ACTIVATIONS = [("Relu", {}), ("LeakyRelu", {"alpha": 0.3}), ("HardSigmoid", {}), ("HardSwish", {}),
               ("Sigmoid", {}), ("Tanh", {}), ("Gelu", {}), ("Gelu", {"approximate": "tanh"}),
               ("Clip", {})]
EXACT_OPS = {"Relu", "Sigmoid", "Tanh", "Gelu", "Clip"}   # standalone ops with exact kernels
LINEAR = (23, 45, 300)   # M, N, K of each activation's branch


def _model(activations):
    nodes, inputs, outputs, inits = [], [], [], {}
    for i, (M, N, K, form) in enumerate(PRODUCTS):
        a, b, y = f"a{i}", f"b{i}", f"y{i}"
        if form == "gemm_tt":
            inputs += [(a, np.float32, (K, M)), (b, np.float32, (N, K))]
            inits[f"c{i}"] = random((N,), seed=500 + i)
            nodes.append(helper.make_node("Gemm", [a, b, f"c{i}"], [y], transA=1, transB=1))
        else:
            inputs.append((a, np.float32, (M, K)))
            if form == "const":
                inits[b] = random((K, N), seed=300 + i)
            else:
                inputs.append((b, np.float32, (K, N)))
            nodes.append(helper.make_node("MatMul", [a, b], [y]))
        outputs.append((y, np.float32, None))
    M, N, K = LINEAR
    inputs.append(("x", np.float32, (M, K)))
    for i, (op, attrs) in enumerate(activations):
        inits[f"w{i}"], inits[f"bias{i}"] = random((K, N), seed=600 + i), random((N,), seed=700 + i)
        nodes += [helper.make_node("MatMul", ["x", f"w{i}"], [f"p{i}"]),
                  helper.make_node("Add", [f"p{i}", f"bias{i}"], [f"s{i}"])]
        if op == "Clip":
            inits["lo"], inits["hi"] = np.array(-0.25, np.float32), np.array(1.0, np.float32)
            nodes.append(helper.make_node("Clip", [f"s{i}", "lo", "hi"], [f"act{i}"]))
        else:
            nodes.append(helper.make_node(op, [f"s{i}"], [f"act{i}"], **attrs))
        outputs.append((f"act{i}", np.float32, None))
    return make_model(nodes, inputs, outputs, inits, opset=20), inits


MODEL, INITS = _model(ACTIVATIONS)
# exact mode, comparable with the unfused operators
EXACT_ACTIVATIONS = [a for a in ACTIVATIONS if a[0] in EXACT_OPS]
EXACT_MODEL, _ = _model(EXACT_ACTIVATIONS)
LINEARS = sum(form == "const" for *_, form in PRODUCTS)   # const-B MatMuls become Linear too


def _feeds():
    feeds = {}
    for i, (M, N, K, form) in enumerate(PRODUCTS):
        feeds[f"a{i}"] = random((K, M) if form == "gemm_tt" else (M, K), seed=100 + i)
        if form != "const":
            feeds[f"b{i}"] = random((N, K) if form == "gemm_tt" else (K, N), seed=200 + i)
    feeds["x"] = random(LINEAR[::2], seed=99)
    return feeds


FEEDS = _feeds()


def _reference(i):
    """Product i in float64."""
    M, N, K, form = PRODUCTS[i]
    a = FEEDS[f"a{i}"].astype(np.float64)
    b = (INITS if form == "const" else FEEDS)[f"b{i}"].astype(np.float64)
    if form == "gemm_tt":
        return a.T @ b.T + INITS[f"c{i}"]
    return a @ b


def _bits(outputs):
    return {k: v.view(np.uint32) for k, v in outputs.items()}


def _skip_unless_runnable(target):
    if target == "avx512" and NATIVE != "avx512" or target == "avx2" and NATIVE == "generic":
        pytest.skip(f"this machine does not run {target} code")


def _exact_bits(target, threads):
    session = aotc.compile(EXACT_MODEL, mode="exact", target=target, threads=threads)
    return _bits(session.run(FEEDS))


@pytest.mark.parametrize("target", TARGETS)
def test_path_matches_float64_and_threads_agree(target):
    _skip_unless_runnable(target)
    one = aotc.compile(MODEL, target=target, threads=1)
    assert one.report["target"] == target
    got = one.run(FEEDS)
    for i, (M, N, K, _) in enumerate(PRODUCTS):
        np.testing.assert_allclose(got[f"y{i}"], _reference(i), rtol=1e-5, atol=2e-6 * K,
                                   err_msg=f"product {PRODUCTS[i]}")
    two = aotc.compile(MODEL, target=target, threads=2).run(FEEDS)
    for name in got:
        np.testing.assert_array_equal(got[name].view(np.uint32), two[name].view(np.uint32),
                                      err_msg=f"{name}: 2 threads differ from 1")


def test_exact_mode_bits_are_the_same_on_every_path_and_thread_count():
    runnable = [t for t in TARGETS if not (t == "avx512" and NATIVE != "avx512" or
                                           t == "avx2" and NATIVE == "generic")]
    unfused = _bits(aotc.compile(EXACT_MODEL, mode="exact", target="generic", opt_level="none",
                                 threads=1).run(FEEDS))
    fused = aotc.compile(EXACT_MODEL, mode="exact", target="generic", threads=1)
    assert fused.report["nodes_after"].get("Linear") == LINEARS + len(EXACT_ACTIVATIONS), \
        fused.report["nodes_after"]
    for target in runnable:
        for threads in (1, 2):
            got = _exact_bits(target, threads)
            for name, want in unfused.items():   # the fused epilogue gives the separate ops' bits
                np.testing.assert_array_equal(got[name], want, err_msg=f"{target}, {threads} threads: {name}")
    for i, (M, N, K, _) in enumerate(PRODUCTS):
        np.testing.assert_allclose(unfused[f"y{i}"].view(np.float32), _reference(i), rtol=1e-5,
                                   atol=2e-6 * K)


def test_epilogues_match_the_separate_operators_in_fast_mode():
    fused = aotc.compile(MODEL, threads=1)
    assert fused.report["nodes_after"].get("Linear") == LINEARS + len(ACTIVATIONS), \
        fused.report["nodes_after"]
    plain = aotc.compile(MODEL, threads=1, opt_level="none").run(FEEDS)
    got = fused.run(FEEDS)
    for i in range(len(ACTIVATIONS)):
        np.testing.assert_allclose(got[f"act{i}"], plain[f"act{i}"], rtol=1e-6, atol=1e-6,
                                   err_msg=str(ACTIVATIONS[i]))


@pytest.mark.skipif(NATIVE != "avx512", reason="only the AVX-512 path lets its tasks pack A")
def test_the_blockings_of_two_machines_give_the_same_bits(monkeypatch):
    """The build machine's caches choose (aotc_gemm_kernels.h, aotc_gemm.h) who packs A,
    the tasks below 2 MiB of L2 or one pass first, and over how many K-blocks a packed A
    runs whole, 4 below 48 KiB of L1 data or none: M = 300 spans more than two tasks,
    K = 600 and 1000 are 3 and 4 K-blocks."""
    products = [(300, 150, 600), (300, 40, 1000)]
    model = make_model([helper.make_node("MatMul", [f"a{i}", f"b{i}"], [f"y{i}"]) for i in range(2)],
                       [(f"{x}{i}", np.float32, shape) for i, (M, N, K) in enumerate(products)
                        for x, shape in (("a", (M, K)), ("b", (K, N)))],
                       [(f"y{i}", np.float32, None) for i in range(2)])
    feeds = {f"{x}{i}": random(shape, seed=2 * i + (x == "b"))
             for i, (M, N, K) in enumerate(products) for x, shape in (("a", (M, K)), ("b", (K, N)))}
    runs, builds = {}, set()
    for l1, l2 in ((32 << 10, 1 << 20), (48 << 10, 2 << 20)):
        monkeypatch.setattr(build, "cache_bytes", lambda: {(1, "Data"): l1, (2, "Unified"): l2})
        flags = build.c_flags("avx512", "fast")
        assert f"-DAOTC_L1D_BYTES={l1}" in flags and f"-DAOTC_L2_BYTES={l2}" in flags
        for threads in (1, 2):
            session = aotc.compile(model, target="avx512", threads=threads)
            builds.add(session.out_dir)
            runs[l1, l2, threads] = session.run(feeds)
    assert len(builds) == 2, "the compile cache gave one build to both machines' flags"
    first = runs[32 << 10, 1 << 20, 1]
    for i, (M, N, K) in enumerate(products):
        want = feeds[f"a{i}"].astype(np.float64) @ feeds[f"b{i}"].astype(np.float64)
        np.testing.assert_allclose(first[f"y{i}"], want, rtol=1e-5, atol=2e-6 * K)
        for key, got in runs.items():
            np.testing.assert_array_equal(got[f"y{i}"].view(np.uint32), first[f"y{i}"].view(np.uint32),
                                          err_msg=f"{key}: y{i}")


def test_the_cache_sizes_are_read_from_linux(tmp_path):
    for index, (level, kind, size) in enumerate([("1", "Data", "48K"), ("1", "Instruction", "64K"),
                                                 ("2", "Unified", "2048K"), ("3", "Unified", "480M")]):
        folder = tmp_path / f"index{index}"
        folder.mkdir()
        for field, value in (("level", level), ("type", kind), ("size", size)):
            (folder / field).write_text(value + "\n")
    (tmp_path / "uevent").write_text("")   # (beside the index folders on Linux)
    assert build.cache_bytes(str(tmp_path)) == {(1, "Data"): 48 << 10, (1, "Instruction"): 64 << 10,
                                                (2, "Unified"): 2 << 20, (3, "Unified"): 480 << 20}
    assert build.cache_bytes(str(tmp_path / "missing")) == {}


def _runtime_module(name, cdef, source, folder, flags=("-std=c99",)):
    """C source over runtime_c's headers, built through cffi in folder and imported."""
    import cffi
    ffi = cffi.FFI()
    ffi.cdef(cdef)
    ffi.set_source(name, source, include_dirs=[str(resources.runtime_dir())], extra_compile_args=list(flags))
    path = ffi.compile(tmpdir=str(folder), verbose=False)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_python_packing_gives_the_c_packers_bytes(tmp_path):
    cdef = "void pack(int64_t N, int64_t K, const float *B, int trans, float *dst);"
    module = _runtime_module("_aotc_test_gemm_pack", cdef, """
        #include "aotc_gemm.h"
        void pack(int64_t N, int64_t K, const float *B, int trans, float *dst) {
          aotc_sgemm_pack_b(N, K, B, trans ? K : N, trans, dst);
        }""", tmp_path)
    for K, N in [(300, 70), (1, 1), (256, 32), (513, 33), (7, 100)]:
        b = random((K, N), seed=K + N)
        want = pack_b(b)
        for trans, src in ((0, b), (1, np.ascontiguousarray(b.T))):
            got = np.full(want.size + 16, np.nan, np.float32)   # guard past the end
            module.lib.pack(N, K, module.ffi.cast("const float *", src.ctypes.data), trans,
                            module.ffi.cast("float *", got.ctypes.data))
            np.testing.assert_array_equal(got[:want.size].view(np.uint32), want.view(np.uint32))
            assert np.isnan(got[want.size:]).all(), "the C packer wrote past the packed size"


@pytest.mark.parametrize("target", TARGETS)
def test_python_packing_of_a_gives_each_paths_c_packer_bytes(tmp_path, target):
    """pack_a lays A out in the panels of the target's path, as its driver packs A."""
    _skip_unless_runnable(target)
    cdef = "int panel_rows(void); void pack(int64_t M, int64_t K, const float *A, float *dst);"
    module = _runtime_module(f"_aotc_test_gemm_pack_a_{target}", cdef, """
        #include "aotc_gemm.h"
        int panel_rows(void) { return AOTC_SGEMM_MR; }
        void pack(int64_t M, int64_t K, const float *A, float *dst) {
          int64_t pc, p, i0, rows;
          for (pc = 0; pc < K; pc += AOTC_SGEMM_KC)
            for (p = 0; p < aotc_sgemm_panels_(M); p++) {
              aotc_sgemm_panel_(M, 1, p, &i0, &rows);
              aotc_sgemm_pack_a_panel_(dst + aotc_sgemm_a_panel_(M, K, pc, i0), A, K, 0, pc,
                                       AOTC_MIN(AOTC_SGEMM_KC, K - pc), i0, rows);
            }
        }""", tmp_path, build.c_flags(target, "fast"))
    assert module.lib.panel_rows() == PANEL_ROWS[target]
    for M, K in [(70, 300), (1, 1), (14, 256), (33, 513), (100, 7), (16, 2)]:
        a = random((M, K), seed=M + K)
        want = pack_a(a, PANEL_ROWS[target])
        got = np.full(want.size + 16, np.nan, np.float32)   # guard past the end
        module.lib.pack(M, K, module.ffi.cast("const float *", a.ctypes.data),
                        module.ffi.cast("float *", got.ctypes.data))
        np.testing.assert_array_equal(got[:want.size].view(np.uint32), want.view(np.uint32))
        assert want.size == M * K and np.isnan(got[want.size:]).all()


@pytest.fixture(scope="module")
def split(tmp_path_factory):
    """aotc_sgemm_split_ of runtime_c/aotc_gemm.h through cffi: for an M x N product (and
    whether rows go first), its panels, strips, tasks, row groups and column groups, whether
    the tasks in order never return to an earlier group of rows, whether they cover each
    tile of C once, and the most and fewest tiles a task has."""
    cdef = "void split(int64_t M, int64_t N, int rows_first, int64_t *out);"
    module = _runtime_module("_aotc_test_gemm_split", cdef, """
        #define AOTC_NO_THREADS
        #include <string.h>
        #include "aotc_gemm.h"
        void split(int64_t M, int64_t N, int rows_first, int64_t *out) {
          static unsigned char seen[1024][1024];
          aotc_sgemm_job_ j;
          int64_t t, p, s, p0, p1, s0, s1, last = 0;
          memset(&j, 0, sizeof j);
          memset(seen, 0, sizeof seen);
          j.M = M, j.N = N, j.K = 64;
          j.panels = aotc_sgemm_panels_(M);
          j.strips = aotc_sgemm_div_up_(N, AOTC_SGEMM_NR);
          j.rows_first = rows_first;
          aotc_sgemm_split_(&j);
          if (j.panels > 1024 || j.strips > 1024) return;   /* (out stays zero: no cover) */
          out[0] = j.panels;
          out[1] = aotc_sgemm_tasks_(&j);
          out[2] = j.panel_tasks;
          out[3] = j.strip_tasks;
          out[4] = 1;
          out[5] = 1;
          out[6] = 0, out[7] = j.panels * j.strips;
          out[8] = j.strips;
          for (t = 0; t < out[1]; t++, last = p0) {
            aotc_sgemm_task_at_(&j, t, &p0, &p1, &s0, &s1);
            if (p0 < last) out[4] = 0;
            for (p = p0; p < p1; p++)
              for (s = s0; s < s1; s++) seen[p][s]++;
            out[6] = AOTC_MAX(out[6], (p1 - p0) * (s1 - s0));
            out[7] = AOTC_MIN(out[7], (p1 - p0) * (s1 - s0));
          }
          for (p = 0; p < j.panels; p++)
            for (s = 0; s < j.strips; s++) out[5] &= seen[p][s] == 1;
        }""", tmp_path_factory.mktemp("split"))

    def cut(M, N, rows_first):
        out = module.ffi.new("int64_t[9]")   # (zeroed)
        module.lib.split(M, N, rows_first, out)
        return dict(zip(("panels", "tasks", "row_groups", "column_groups", "rows_in_order",
                         "covers_once", "most_tiles", "fewest_tiles", "strips"), out))
    return cut


@pytest.mark.parametrize("M, N", [(196, 576), (128, 768), (3136, 64), (49, 960), (16, 12544), (1024, 1024)])
@pytest.mark.parametrize("rows_first", [0, 1])
def test_a_products_tasks_cover_c_once_in_ranges_that_differ_by_one_at_most(split, M, N, rows_first):
    """Two threads take the tasks from the two ends of their order: tasks of unequal
    size leave one waiting (MobileNetV2's 96 -> 576 convs at 14x14, 14 panels: in groups
    of 4, 4, 4 and 2, 1.70x faster at two threads than at one; of 3, 4, 3 and 4, 1.93x)."""
    cut = split(M, N, rows_first)
    assert cut["covers_once"] == 1, cut
    panels_each, strips_each = cut["panels"] / cut["row_groups"], cut["strips"] / cut["column_groups"]
    most = math.ceil(panels_each) * math.ceil(strips_each)
    fewest = math.floor(panels_each) * math.floor(strips_each)
    assert (cut["most_tiles"], cut["fewest_tiles"]) == (most, fewest), cut


@pytest.mark.parametrize("M, N", [(49, 960), (196, 144), (784, 32), (3136, 144), (1, 1000)])
def test_a_product_cut_rows_first_has_more_groups_of_rows_and_fewer_of_columns(split, M, N):
    """A channels-last pointwise conv's pixels are its product's rows: cut by them first,
    each end of the task order that a pool thread takes from is a run of the image's rows
    (aotc_conv_pointwise_nhwc)."""
    by_rows, default = split(M, N, 1), split(M, N, 0)
    assert by_rows["rows_in_order"] == default["rows_in_order"] == 1
    assert by_rows["row_groups"] >= default["row_groups"], (by_rows, default)
    assert by_rows["column_groups"] <= default["column_groups"], (by_rows, default)
    if (M, N) == (49, 960):   # the default cuts its 30 strips of columns more, its rows less
        assert default["row_groups"] < by_rows["row_groups"], (by_rows, default)
