"""Workspace layout: liveness, best-fit offsets, in-place reuse and views (seed 001, 5).

Every intermediate value lives in one caller-provided workspace at an offset chosen
here, and every step's scratch in one region after the values. A value is live from
the step that makes it to the last step that reads it (a view keeps its source alive
as long as itself). Outputs of a step are placed before its dying inputs are freed, so
a kernel never writes over what it still reads, except through an in-place alias the
operator allows.
"""
from ..ops.base import in_place_inputs, stores_fast

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
# A block freed by a step is not given to the output of a fast-storing kernel
# (ops.base.stores_fast: a depthwise conv) by the next COOL_STEPS steps. The block's
# last reader may have run on every thread (a GEMM reads all of its input's channels),
# leaving its lines in both cores' caches, and a kernel that stores a line every few
# cycles then waits on each line's copies elsewhere being dropped: MobileNetV2's
# depthwise convs writing where their block's pointwise conv had just read took twice
# the time at two threads. Other kernels compute long enough per line stored (and
# fetch their tiles' lines for writing ahead), and reuse what is hot: with every
# block so cooled, MobileNetV2 took 1.008x the time at one thread, ResNet-50 1.007x
# at two.
COOL_STEPS = 2
# Every step's scratch lies in one region past the values, rather than in blocks freed
# by values: consecutive convs of one shape then put each lane's scratch (Winograd's
# transformed tiles, written and read by the thread that runs the lane) where that lane
# had it in the conv before, still in that thread's caches. Where the host puts the two
# CPUs on two L3s, every line a thread finds in the other's cache costs a crossing:
# there ResNet-50 took 0.96x the time at two threads with the 28x28 Winograd convs in
# blocks (WINOGRAD_IMAGE_BLOCK_BYTES), its 56x56 ones going from 1130 to 800 us each;
# on one L3 1.005x, at one thread 1.001x. The workspace grows by the largest scratch
# less what the values' blocks had lent it (ResNet-50 +64 KiB, MobileNetV2 +1.8 MiB,
# BERT-base -0.7 MiB: its scratch had kept values from a better fit).


def align(n):
    return (n + ALIGN - 1) // ALIGN * ALIGN


class Slab:
    """Best-fit allocator over one growing block; free neighbours coalesce. A block
    released at step i is also kept as recent through step i + COOL_STEPS: a cold
    request takes no part of it."""

    def __init__(self):
        self.free = []     # sorted (offset, size)
        self.recent = []   # (offset, size, last step it is recent)
        self.top = 0

    def age(self, step):
        """Forget the blocks no longer recent at `step`."""
        self.recent = [r for r in self.recent if r[2] >= step]

    def alloc(self, size, cold=False):
        """An offset for `size` bytes: the first of the smallest free blocks that fit
        (outside the recent ones if `cold`), else the top grows."""
        size = align(max(size, 1))
        blocks = [piece for block in self.free for piece in self._usable(block, cold)]
        fits = [(sz, off) for off, sz in blocks if sz >= size]
        if fits:
            off = min(fits)[1]
        elif blocks and sum(blocks[-1]) == self.top:   # grow the free block at the top
            off = blocks[-1][0]
        else:
            off = self.top
        self._take(off, size)
        self.top = max(self.top, off + size)
        return off

    def release(self, off, size, step=None):
        """Free a block; released at `step`, it is recent through step + COOL_STEPS."""
        size = align(max(size, 1))
        self._insert(off, size)
        if step is not None:
            self.recent.append((off, size, step + COOL_STEPS))

    def _usable(self, block, cold):
        """The pieces of a free block a request may take: all of it, or if `cold` what
        lies outside the recent blocks."""
        pieces = [block]
        for hole_off, hole_size, _ in self.recent if cold else ():
            pieces = [part for piece in pieces for part in _outside(piece, hole_off, hole_size)]
        return pieces

    def _take(self, off, size):
        """[off, off + size) leaves the free blocks (its part below the top)."""
        for i, (o, s) in enumerate(self.free):
            if o <= off < o + s:
                del self.free[i]
                if off > o:
                    self._insert(o, off - o)
                if o + s > off + size:
                    self._insert(off + size, o + s - off - size)
                return

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


def _outside(piece, hole_off, hole_size):
    """The parts of block `piece` (offset, size) before and after the hole, if any."""
    off, size = piece
    before = (off, min(off + size, hole_off) - off)
    start = max(off, hole_off + hole_size)
    after = (start, off + size - start)
    return [part for part in (before, after) if part[1] > 0]


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
        slab.age(i)
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
                out.offset = slab.alloc(size, cold=k == 0 and stores_fast(step.op, step.ctx))
                blocks[out.name] = (out.offset, size)
            if last_use.get(out.name, i) == i and out.name not in keep_alive:
                dying.add(out.name)     # made and never read (an unused output)
        for name in dying:
            if name in blocks:
                slab.release(*blocks.pop(name), step=i)
    scratch = max((step.scratch_bytes + STAGGER for step in steps if step.scratch_bytes), default=0)
    for step in steps:
        if step.scratch_bytes:
            step.scratch_offset = slab.top
    return slab.top + align(scratch)


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
