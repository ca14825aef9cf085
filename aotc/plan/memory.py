"""Workspace layout: liveness, best-fit offsets, in-place reuse and views (seed 001, 5).

Every intermediate value lives in one caller-provided workspace at an offset chosen
here. A value is live from the step that makes it to the last step that reads it (a
view keeps its source alive as long as itself). Outputs of a step are placed before
its dying inputs are freed, so a kernel never writes over what it still reads, except
through an in-place alias the operator allows.
"""
from ..ops.base import in_place_inputs

ALIGN = 64
MAX_WORKSPACE = 2 << 30
# Each block (a value's, a step's scratch) runs this far past its end, so that values
# whose sizes are multiples of 4 KiB (most of a CNN's or a transformer's) do not all
# start at the same offset modulo 4 KiB. A load whose address matches an earlier
# store's in those low bits waits for it (4K aliasing): a kernel reading one such value
# while it writes another at the same offsets stalls on every such pair. ResNet-50
# took 0.95x the time at one thread and 0.94x at two with the blocks so staggered,
# BERT-base 0.97x.
STAGGER = 64


def align(n):
    return (n + ALIGN - 1) // ALIGN * ALIGN


class Slab:
    """Best-fit allocator over one growing block; free neighbours coalesce."""

    def __init__(self):
        self.free = []   # sorted (offset, size)
        self.top = 0

    def alloc(self, size):
        size = align(max(size, 1))
        best = None
        for i, (off, sz) in enumerate(self.free):
            if sz >= size and (best is None or sz < self.free[best][1]):
                best = i
        if best is not None:
            off, sz = self.free.pop(best)
            if sz > size:
                self._insert(off + size, sz - size)
            return off
        if self.free and sum(self.free[-1]) == self.top:   # grow the free block at the top
            off, _ = self.free.pop()
        else:
            off = self.top
        self.top = off + size
        return off

    def release(self, off, size):
        self._insert(off, align(max(size, 1)))

    def _insert(self, off, size):
        self.free.append((off, size))
        self.free.sort()
        merged = []
        for o, s in self.free:
            if merged and sum(merged[-1]) == o:
                merged[-1] = (merged[-1][0], merged[-1][1] + s)
            else:
                merged.append((o, s))
        self.free = merged


def assign(steps, values, keep_alive):
    """Give every 'workspace' value an offset; returns the workspace size in bytes.

    steps: Step list in order; values: name -> PlanValue; keep_alive: names that must
    live to the end (sources of copied graph outputs)."""
    last_use = {}
    for i, step in enumerate(steps):
        for v in step.inputs:
            if v is not None:
                last_use[v.root.name] = i
        for v in step.outputs:
            if v is not None:
                last_use.setdefault(v.root.name, i)
    for name in keep_alive:
        last_use[values[name].root.name] = len(steps)

    slab = Slab()
    blocks = {}   # root name -> (offset, size)
    for i, step in enumerate(steps):
        dying = {v.root.name for v in step.inputs
                 if v is not None and v.root.storage == "workspace" and last_use[v.root.name] == i}
        for k, out in enumerate(step.outputs):
            if out is None or out.storage != "workspace":
                continue
            donor = _in_place_donor(step, k, out, dying, blocks) if k == 0 else None
            if donor is not None:
                blocks[out.name] = blocks.pop(donor)
                dying.discard(donor)
                out.offset = blocks[out.name][0]
            else:
                size = out.type.nbytes + STAGGER
                out.offset = slab.alloc(size)
                blocks[out.name] = (out.offset, size)
            if last_use.get(out.name, i) == i and out.name not in keep_alive:
                dying.add(out.name)     # made and never read (an unused output)
        if step.scratch_bytes:
            size = step.scratch_bytes + STAGGER
            step.scratch_offset = slab.alloc(size)
            slab.release(step.scratch_offset, size)
        for name in dying:
            if name in blocks:
                slab.release(*blocks.pop(name))
    return slab.top


def _in_place_donor(step, k, out, dying, blocks):
    for i in in_place_inputs(step.op, step.ctx):
        v = step.inputs[i] if i < len(step.inputs) else None
        if v is None:
            continue
        root = v.root
        # a value that is also another input (a conv of X plus X) is still read elsewhere
        others = {u.root.name for j, u in enumerate(step.inputs) if u is not None and j != i}
        if (root.name in dying and root.name in blocks and root.name not in others
                and v.type.dtype == out.type.dtype
                and tuple(v.type.shape) == tuple(out.type.shape)
                and blocks[root.name][1] >= out.type.nbytes):
            return root.name
    return None
