"""NonMaxSuppression: float32 boxes and scores, both box formats (center_point_box),
per-class selection, max_output_boxes_per_class and both thresholds as run-time inputs.

Its output has one row per kept box, a count known only at run time: infer gives the
upper bound (batches x classes x boxes per class), the kernel (runtime_c/aotc_nms.h)
writes the actual shape into the value's dims record.
"""
import numpy as np

from .base import OpDef, TensorType

F32 = np.dtype(np.float32)


def _center_point_box(ctx):
    mode = int(ctx.attr("center_point_box", 0))
    if mode not in (0, 1):
        raise ctx.fail(f"center_point_box {mode} is not 0 or 1")
    return mode


def _const_limit(ctx):
    """max_output_boxes_per_class when known at compile time, else None."""
    if not ctx.has_input(2):
        return 0
    t = ctx.inputs[2]
    return None if t.value is None else max(int(t.value.reshape(-1)[0]), 0)


def _infer(ctx):
    ctx.require_inputs(2, 5)
    boxes, scores = ctx.inputs[:2]
    ctx.require_dtype(0, (F32,))
    ctx.require_dtype(1, (F32,))
    _center_point_box(ctx)
    if boxes.rank != 3 or boxes.shape[2] != 4:
        raise ctx.fail(f"boxes must be [batches, boxes, 4], has shape {list(boxes.shape)}")
    if scores.rank != 3 or scores.shape[0] != boxes.shape[0] or scores.shape[2] != boxes.shape[1]:
        raise ctx.fail(f"scores shape {list(scores.shape)} does not fit boxes {list(boxes.shape)} "
                       "(expected [batches, classes, boxes])")
    for i, dt, what in ((2, np.int64, "max_output_boxes_per_class"), (3, F32, "iou_threshold"),
                        (4, F32, "score_threshold")):
        if ctx.has_input(i):
            t = ctx.inputs[i]
            if np.dtype(t.dtype) != np.dtype(dt) or t.numel != 1:
                raise ctx.fail(f"{what} must be one {np.dtype(dt).name}, is {t.dtype} "
                               f"of shape {list(t.shape)}")
    per_class = boxes.shape[1]
    limit = _const_limit(ctx)
    if limit is not None:
        per_class = min(per_class, limit)
    return [TensorType(np.dtype(np.int64), (boxes.shape[0] * scores.shape[1] * per_class, 3))]


def _iou_suppresses(a, b, center, threshold):
    def corners(box):
        if center:
            return (box[0] - box[2] / 2, box[1] - box[3] / 2, box[0] + box[2] / 2, box[1] + box[3] / 2)
        return (min(box[1], box[3]), min(box[0], box[2]), max(box[1], box[3]), max(box[0], box[2]))
    ca, cb = corners(a), corners(b)
    ix = min(ca[2], cb[2]) - max(ca[0], cb[0])
    iy = min(ca[3], cb[3]) - max(ca[1], cb[1])
    if ix <= 0 or iy <= 0:
        return False
    inter = np.float32(ix) * np.float32(iy)
    area_a = np.float32(ca[2] - ca[0]) * np.float32(ca[3] - ca[1])
    area_b = np.float32(cb[2] - cb[0]) * np.float32(cb[3] - cb[1])
    union = area_a + area_b - inter
    if inter <= 0 or area_a <= 0 or area_b <= 0 or union <= 0:
        return False
    return inter / union > threshold


def _evaluate(ctx, arrays):
    boxes, scores = arrays[0], arrays[1]
    limit = max(int(arrays[2].reshape(-1)[0]), 0) if ctx.has_input(2) else 0
    iou = np.float32(arrays[3].reshape(-1)[0]) if ctx.has_input(3) else np.float32(0)
    threshold = arrays[4].reshape(-1)[0] if ctx.has_input(4) else None
    center = _center_point_box(ctx)
    rows = []
    for b in range(boxes.shape[0]):
        for c in range(scores.shape[1]):
            s = scores[b, c]
            candidates = [i for i in range(len(s)) if threshold is None or s[i] > threshold]
            candidates.sort(key=lambda i: (-s[i], i))
            kept = []
            for i in candidates:
                if len(kept) >= limit:
                    break
                if not any(_iou_suppresses(boxes[b, i], boxes[b, k], center, iou) for k in kept):
                    kept.append(i)
                    rows.append((b, c, i))
    return [np.array(rows, dtype=np.int64).reshape(len(rows), 3)]


def _scratch(ctx):
    return 8 * 3 * max(ctx.inputs[0].shape[1], 1)


def _emit(ctx):
    boxes, scores = ctx.inputs[:2]
    y = ctx.outputs[0]
    dims = ctx.dims(0)
    if dims is None:
        raise ctx.unsupported("NonMaxSuppression needs a data-dependent output shape here")

    def x(i):
        return ctx.x(i) if ctx.has_input(i) else "NULL"
    return "\n".join([
        f"{dims}[1] = 3;",
        f"aotc_nms({x(0)}, {x(1)}, {x(2)}, {x(3)}, {x(4)}, {boxes.shape[0]}, {scores.shape[1]}, "
        f"{boxes.shape[1]}, {_center_point_box(ctx)}, {ctx.y(0)}, {y.shape[0]}, {dims}, "
        f"(int64_t *)(void *){ctx.scratch});"])


OPS = [OpDef("NonMaxSuppression", _infer, _emit, _evaluate, scratch=_scratch, since=10,
             checked_through=28, outputs_data_dependent=True, supports_exact=True)]
