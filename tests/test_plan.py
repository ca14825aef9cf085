"""The plan: constant evaluation, dead nodes, and a workspace that never lets a value
be overwritten while it is still read."""
import numpy as np
import pytest
from onnx import helper

import aotc
from aotc.onnx_import import import_model
from aotc.plan import make_plan
from aotc.ops.base import stores_fast
from aotc.plan.memory import ALIGN, COOL_STEPS, STAGGER, Slab
from oracle import assert_matches_ort, make_model, random


def test_slab_takes_the_best_fitting_free_block_and_coalesces():
    slab = Slab()
    a, b, c = slab.alloc(100), slab.alloc(300), slab.alloc(100)
    assert (a, b, c) == (0, 128, 448)
    slab.release(a, 100)
    slab.release(c, 100)
    assert slab.alloc(64) == a            # both fit; the first of the two smallest
    slab.release(0, 64)
    slab.release(b, 300)                  # joins the blocks on both sides
    assert slab.free == [(0, 576)]
    assert slab.alloc(500) == 0


def test_slab_grows_a_free_block_at_the_top_instead_of_leaving_it():
    slab = Slab()
    slab.alloc(64)
    top = slab.alloc(64)
    slab.release(top, 64)
    assert slab.alloc(256) == top
    assert slab.top == top + 256


def test_slab_keeps_recently_released_blocks_from_cold_requests():
    slab = Slab()
    a = slab.alloc(256)
    slab.alloc(64)                        # keeps a off the top
    slab.release(a, 256, step=5)
    slab.age(5 + COOL_STEPS)              # still recent
    top = slab.top
    assert slab.alloc(256, cold=True) == top
    assert slab.alloc(256) == a           # a warm request takes a recent block
    slab.release(a, 256, step=5)
    slab.age(6 + COOL_STEPS)
    assert slab.alloc(256, cold=True) == a


def test_depthwise_outputs_avoid_blocks_the_last_steps_freed():
    """A block freed by a step that read it on every thread is not where a depthwise
    conv writes in the next COOL_STEPS steps (aotc/plan/memory.py)."""
    # (output, input, channels in and out, group, kernel): pointwise, depthwise, pointwise ...
    specs = [("a", "x", 8, 32, 1, 1), ("b", "a", 32, 32, 32, 3), ("c", "b", 32, 32, 1, 1),
             ("d", "c", 32, 32, 32, 3), ("f", "d", 32, 8, 1, 1)]
    nodes, weights = [], {}
    for seed, (name, x, cin, cout, group, k) in enumerate(specs):
        nodes.append(helper.make_node("Conv", [x, f"{name}_w"], [name], group=group,
                                      kernel_shape=[k, k], pads=[k // 2] * 4))
        weights[f"{name}_w"] = 0.3 * random((cout, cin // group, k, k), seed=seed)
    model = make_model(nodes, [("x", np.float32, (1, 8, 16, 16))], [("f", np.float32, (1, 8, 16, 16))],
                       weights)
    plan = make_plan(import_model(model))
    last_use = {}
    for i, step in enumerate(plan.steps):
        for v in step.inputs:
            if v is not None and v.storage == "workspace":
                last_use[v.root.name] = (i, v.root.offset, v.root.type.nbytes)
    cold = [(i, step.outputs[0]) for i, step in enumerate(plan.steps) if stores_fast(step.op, step.ctx)]
    assert len(cold) == 2
    checked = 0
    for i, out in cold:
        recent = [(off, size) for end, off, size in last_use.values() if i - COOL_STEPS <= end < i]
        assert all(out.offset + out.type.nbytes <= off or off + size <= out.offset for off, size in recent)
        checked += len(recent)
    assert checked   # d comes right after c's conv freed b, a block d would fit
    assert_matches_ort(model, {"x": random((1, 8, 16, 16), seed=9)}, rtol=1e-4, atol=1e-5)


def test_every_step_s_scratch_lies_in_one_region_past_the_values():
    """Convs of one shape find their scratch where the last one left it (a thread's
    lanes still in its caches), and no value is ever in it (aotc/plan/memory.py)."""
    nodes, weights = [], {}
    for i, k in enumerate([3, 3, 1, 3]):
        x = f"v{i - 1}" if i else "x"
        nodes.append(helper.make_node("Conv", [x, f"w{i}"], [f"v{i}"], kernel_shape=[k, k], pads=[k // 2] * 4))
        weights[f"w{i}"] = 0.1 * random((32, 32, k, k), seed=i)
    model = make_model(nodes, [("x", np.float32, (1, 32, 20, 20))], [("v3", np.float32, (1, 32, 20, 20))],
                       weights)
    plan = make_plan(import_model(model))
    scratch = {step.scratch_offset for step in plan.steps if step.scratch_bytes}
    assert len(scratch) == 1 and len([step for step in plan.steps if step.scratch_bytes]) >= 3
    values = [v for step in plan.steps for v in step.outputs if v is not None and v.storage == "workspace"]
    assert values and all(v.offset + v.type.nbytes <= min(scratch) for v in values)
    assert_matches_ort(model, {"x": random((1, 32, 20, 20), seed=7)}, rtol=1e-4, atol=1e-5)


def _chain(length, shape=(64, 64)):
    nodes, prev = [], "x"
    for i in range(length):
        nodes.append(helper.make_node("Sigmoid", [prev], [f"v{i}"]))
        prev = f"v{i}"
    nodes.append(helper.make_node("Neg", [prev], ["y"]))
    return make_model(nodes, [("x", np.float32, shape)], [("y", np.float32, shape)])


def test_a_chain_of_in_place_operators_needs_one_block():
    sess = aotc.compile(_chain(10))
    block = 64 * 64 * 4
    assert sess.report["intermediate_bytes"] == 10 * block
    assert sess.report["workspace_bytes"] == block + STAGGER


def test_values_sized_in_whole_pages_start_at_different_offsets_modulo_4k():
    """A kernel that reads one value while writing another at the same offsets modulo
    4 KiB stalls its loads on its stores: no step's input and output start so."""
    w = random((64, 64))
    nodes, prev = [], "x"
    for i in range(6):
        nodes.append(helper.make_node("MatMul", [prev, "w"], [f"v{i}"]))
        prev = f"v{i}"
    model = make_model(nodes, [("x", np.float32, (64, 64))], [(prev, np.float32, (64, 64))], {"w": w})
    plan = make_plan(import_model(model))
    pairs = [(v.offset, out.offset) for step in plan.steps for v in step.inputs for out in step.outputs
             if v is not None and out is not None and v.storage == out.storage == "workspace"]
    assert len(pairs) >= 4
    assert all((a - b) % 4096 != 0 for a, b in pairs), pairs


def _random_dag(seed, count=24, shape=(3, 5)):
    """Element-wise nodes reading random earlier values: fan-out, long lives, reuse."""
    rng = np.random.default_rng(seed)
    values, nodes = ["x", "z"], []
    for i in range(count):
        op = rng.choice(["Add", "Mul", "Sub", "Tanh", "Sigmoid", "Max2"])
        a, b = rng.choice(values, 2)
        if op in ("Tanh", "Sigmoid"):
            nodes.append(helper.make_node(op, [a], [f"v{i}"]))
        elif op == "Max2":
            nodes.append(helper.make_node("Where", [f"c{i}", a, b], [f"v{i}"]))
            nodes.insert(len(nodes) - 1, helper.make_node("Greater", [a, b], [f"c{i}"]))
        else:
            nodes.append(helper.make_node(op, [a, b], [f"v{i}"]))
        values.append(f"v{i}")
    outputs = [values[-1], values[len(values) // 2], values[-3]]
    return make_model(nodes, [("x", np.float32, shape), ("z", np.float32, shape)],
                      [(o, np.float32, shape) for o in dict.fromkeys(outputs)])


@pytest.mark.parametrize("seed", range(6))
def test_random_graphs_with_shared_values_match_onnxruntime(seed):
    model = _random_dag(seed)
    assert_matches_ort(model, {"x": random((3, 5), seed=seed), "z": random((3, 5), seed=seed + 100)},
                       rtol=1e-5, atol=1e-6)


def test_constant_subgraphs_fold_and_dead_nodes_go():
    w1, w2 = random((300, 200), seed=1), random((300, 200), seed=2)   # 240 KB each
    nodes = [helper.make_node("Add", ["w1", "w2"], ["w"]),           # folds: not larger than inputs
             helper.make_node("Mul", ["x", "w"], ["y"]),
             helper.make_node("Exp", ["x"], ["unused"])]              # reaches no output
    model = make_model(nodes, [("x", np.float32, (300, 200))], [("y", np.float32, None)],
                       {"w1": w1, "w2": w2})
    sess = aotc.compile(model)
    assert sess.report["nodes_before"] == {"Add": 1, "Mul": 1, "Exp": 1}
    assert sess.report["nodes_after"] == {"Mul": 1}
    x = random((300, 200), seed=3)
    np.testing.assert_array_equal(sess.run(x), x * (w1 + w2))


def test_outputs_that_are_inputs_constants_or_repeated_are_copied():
    nodes = [helper.make_node("Relu", ["x"], ["r"])]
    model = make_model(nodes, [("x", np.float32, (2, 3))],
                       [("r", np.float32, (2, 3)), ("x", np.float32, (2, 3)), ("c", np.float32, (4,))],
                       {"c": np.arange(4, dtype=np.float32)})
    # 'r' twice is not valid ONNX, but the same value as output and as another's input is
    x = random((2, 3))
    out = aotc.compile(model).run({"x": x})
    np.testing.assert_array_equal(out["r"], np.maximum(x, 0))
    np.testing.assert_array_equal(out["x"], x)
    np.testing.assert_array_equal(out["c"], np.arange(4, dtype=np.float32))


def test_workspace_offsets_are_aligned():
    sess = aotc.compile(_random_dag(1, shape=(3, 7)))
    assert sess.report["workspace_bytes"] % ALIGN == 0
