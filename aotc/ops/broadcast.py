"""Broadcast loops for element-wise operators: collapse dims, then one runtime macro."""
from .base import c_ints, strides


def collapse(out_shape, in_shapes):
    """Fewest dims that iterate out_shape with each input's broadcast strides.

    Adjacent output dims merge when every input either spans both contiguously or
    broadcasts both. Returns (shape, [strides per input]), rank >= 1."""
    rank = len(out_shape)
    per_input = []
    for s in in_shapes:
        padded = (1,) * (rank - len(s)) + tuple(s)
        st = strides(padded)
        per_input.append([0 if padded[d] == 1 and out_shape[d] != 1 else st[d] for d in range(rank)])
    dims = [d for d in range(rank) if out_shape[d] != 1]
    shape = [int(out_shape[d]) for d in dims]
    strd = [[p[d] for d in dims] for p in per_input]
    if not shape:
        return [1], [[0] for _ in in_shapes]
    i = len(shape) - 1
    while i > 0:   # merge dim i-1 into dim i where possible
        if all(s[i - 1] == s[i] * shape[i] for s in strd):
            shape[i - 1:i + 1] = [shape[i - 1] * shape[i]]
            for s in strd:
                s[i - 1:i + 1] = [s[i]]
        i -= 1
    return shape, strd


def loop_args(ctx, operands):
    """C arguments after the pointers: rank, shape, strides per operand (C literals)."""
    shape, strd = collapse(ctx.outputs[0].shape, [ctx.inputs[i].shape for i in operands])
    if len(shape) > 16:
        raise ctx.unsupported(f"broadcast over {len(shape)} dimensions (at most 16)")
    return [str(len(shape)), c_ints(shape)] + [c_ints(s) for s in strd]
