"""Real networks from ../shared/models/make_models.py against onnxruntime.

The models are large and built outside the repository: set AOTC_MODELS_DIR to the
folder make_models.py wrote (CI does); without it, or without a model file, the
test for that model is skipped.
"""
import os

import numpy as np
import pytest

import aotc
from oracle import relative_error

TOLERANCE = 1e-4
BERT_VOCAB = 30522
IMAGE = {"pixel_values": ("float32", (1, 3, 224, 224))}
TEXT = {name: ("int64", (1, 128)) for name in ("input_ids", "attention_mask", "token_type_ids")}
NETWORKS = {      # name: {input: (dtype, shape)}
    "resnet50": IMAGE,
    "mobilenetv2": IMAGE,
    "bert_base": TEXT,
    "mlp": {"input": ("float32", (1, 784))},
    "mlp_b64": {"input": ("float32", (64, 784))},
    "tinycnn": {"input": ("float32", (1, 3, 32, 32))},
}

pytestmark = pytest.mark.slow


def model_path(name):
    folder = os.environ.get("AOTC_MODELS_DIR")
    if not folder:
        pytest.skip("AOTC_MODELS_DIR is not set (see README: real-network tests)")
    path = os.path.join(folder, f"{name}.onnx")
    if not os.path.isfile(path):
        pytest.skip(f"{path} is missing")
    return path


@pytest.fixture
def shared_cache(tmp_path_factory, monkeypatch):
    """One compile cache for all test workers of this run, so a network compiled for one
    test is reused by the next (the cache is safe for concurrent compiles)."""
    base = tmp_path_factory.getbasetemp()
    root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    monkeypatch.setenv("AOTC_CACHE_DIR", str(root / "aotc-network-cache"))


def seeded_inputs(name):
    rng = np.random.default_rng(0)
    feeds = {}
    for input_name, (dtype, shape) in NETWORKS[name].items():
        if input_name == "input_ids":
            feeds[input_name] = rng.integers(0, BERT_VOCAB, size=shape).astype(np.int64)
        elif input_name == "attention_mask":
            feeds[input_name] = np.ones(shape, np.int64)
        elif input_name == "token_type_ids":
            feeds[input_name] = np.zeros(shape, np.int64)
        else:
            feeds[input_name] = rng.standard_normal(shape).astype(dtype)
    return feeds


def compile_network(name):
    shapes = {k: shape for k, (_, shape) in NETWORKS[name].items()}
    return aotc.compile(model_path(name), shapes=shapes)


@pytest.mark.parametrize("name", list(NETWORKS))
def test_network_matches_onnxruntime(name, shared_cache):
    path = model_path(name)
    sess = compile_network(name)
    feeds = seeded_inputs(name)
    got = sess.run(feeds)

    import onnxruntime as ort
    ref = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    want = dict(zip([o.name for o in ref.get_outputs()], ref.run(None, feeds)))
    assert list(got) == list(want)
    errors = {}
    for output, w in want.items():
        g = got[output]
        assert g.dtype == w.dtype and g.shape == w.shape, f"{output}: {g.dtype}{g.shape} != {w.dtype}{w.shape}"
        assert np.all(np.isfinite(g)), f"{output}: non-finite values"
        errors[output] = relative_error(g, w)
    assert all(e <= TOLERANCE for e in errors.values()), f"{name}: max |aotc - ort| / max |ort| = {errors}"


def test_resnet50_workspace_is_a_fraction_of_its_intermediates(shared_cache):
    report = compile_network("resnet50").report
    assert report["workspace_bytes"] < report["intermediate_bytes"] / 4, report
