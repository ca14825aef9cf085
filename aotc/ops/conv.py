"""Conv: NCHW, 1 to 3 spatial dims, any group, strides, pads, auto_pad, dilations.

float32 runs the kernels below; float16 and bfloat16 widen into float32 scratch, run
them and round once on the store (runtime_c/aotc_conv_types.h); double sums each
output directly in double (aotc_conv_f64).

The kernel is chosen here by the shape (runtime_c/aotc_conv.h):
- "direct" when every group has one input channel (depthwise);
- "winograd" in fast mode for 3x3 stride-1 undilated 2-D convs of one group with
  weights known here, enough channels and output tiles (WINOGRAD_*): Winograd's
  F(2x2, 3x3), 16 multiplies per 2x2 outputs where the direct sum takes 36, or on
  larger planes F(4x4, 3x3), 36 per 4x4 outputs, the weights transformed here
  (runtime_c/aotc_conv_winograd.h);
- "pixels" for undilated 2-D convs whose weights are known here and fit
  PIXELS_MAX_WEIGHT_BYTES, wider than 1x1 or 1x1 ones that "rows" would take with one
  K-block, but for strided ones that "rows" takes: tiles of output pixels read the
  unfolded matrix where it lies, in zero-bordered phase planes of X, against W^T
  packed here, and store the output transposed from registers;
- "rows" when the weights outweigh the output pixels (K >= pixels: the deep layers):
  output pixels are the GEMM's rows and W^T, packed here at compile time, its B; each
  pixel tile is unfolded panel by panel as the GEMM goes (or, with fewer pixels than
  channels, into scratch first; 1x1 stride-1 unpadded convs read X itself) and its
  product stored transposed into the NCHW output;
- otherwise channels are the rows and the weights the GEMM's A (read as they are, or
  packed per run, which is cheap next to the pixels): a plain GEMM per image and group
  for 1x1 stride-1 unpadded convs ("pointwise"); for other undilated 2-D convs, the
  tiles read the unfolded matrix where it lies, in zero-bordered phase planes of X
  ("implicit"; a strided or padded 1x1 conv is a plain GEMM over its one plane per
  channel); else (3-D, dilated)
  im2col by column blocks of bounded size written straight into the GEMM's packed-B
  layout ("im2col").
Every other path sums over (input channel, kernel taps) in order, then adds the bias,
then applies the activation, so among them the choice never changes the arithmetic's
order; exact mode never takes "winograd".
"""
from dataclasses import dataclass

import numpy as np

from .. import dtypes
from ..ir import AOTC_DOMAIN
from .base import OpDef, TensorType

MAX_SPATIAL = 3
TYPES = (np.float32, np.float16, dtypes.BFLOAT16, np.float64)
IM2COL_BUDGET_BYTES = 2 << 20     # the unfolded block: about L2-sized
BLOCK_COLUMN_MULTIPLE = 256       # a cut block is a whole number of GEMM column blocks
ROW_TILE_MULTIPLE = 96            # a cut pixel tile is a whole number of GEMM row blocks
ROWS_WEIGHT_RATIO = 1.0           # see ConvGeometry.rows_pay_off
# The pixels kernel streams each strip of the weights past its pixel tiles: with the
# weights in L2 (ResNet-50's 3x3 convs at 56x56 and 28x28) 0.92-0.95x the time of the
# implicit and rows kernels; past it (the 14x14 and 7x7 stages, 2.4 and 9.4 MB) 1.03-1.26x.
PIXELS_MAX_WEIGHT_BYTES = 1 << 20
PIXELS_1X1_MIN_WIDTH = 14      # output columns: whole tiles of 14 pixels on AVX-512
WINOGRAD_PLANE_PAD_FLOATS = 16  # a cache line after each term's V or M (aotc_conv_winograd_plane_)
WINOGRAD_MIN_CHANNELS = 32     # input and output channels, each
WINOGRAD_MIN_TILES = 49        # output tiles per image: 14x14 outputs and up (2x2 tiles),
                               # 28x28 and up for 4x4 tiles
# Smaller images, down to 16 2x2 tiles (7x7 outputs), with this many channels in and out.
# Alone, against the rows kernel at one and two threads: 512 -> 512 at 7x7 0.81x and
# 0.70x, 256 -> 256 0.73x and 0.70x, 128 -> 128 0.85x and 0.86x, 256 -> 256 at 10x10
# 0.62x and 0.61x; 64 -> 64 at 7x7 1.00x and 1.01x, 32 -> 32 1.15x and 2.1x (three
# dispatches for 16 us of work). In benchmarks/builds.py (--conv, blocks of calls after
# a pause: colder caches) 512 -> 512 at 7x7 0.93x and 0.74x, 128 -> 128 0.87x and 0.90x.
# In ResNet-50 its two 512 -> 512 convs at 7x7 took 2350 -> 2050 us each at one thread,
# 1195 -> 1086 and 1193 -> 1044 at two (per-step profiles, one L3), but the model as a
# whole no less time (builds.py: 0.995-1.011x).
WINOGRAD_SMALL_IMAGE_MIN_TILES = 16
WINOGRAD_SMALL_IMAGE_MIN_CHANNELS = 128
# The transformed weights (16/9 or 4 times the weights) are read again for each block of tiles,
# past L2 from L3 or memory: ResNet-50's 256 -> 256 convs at 14x14 (4 MiB) took 0.87x the
# rows kernel's time in the model at one thread in two blocks, 0.85x at two (and less
# in one block: WINOGRAD_IMAGE_BLOCK_WEIGHT_BYTES). In 2x2 tiles up to 16 MiB: alone,
# 512 -> 512 at 14x14 took 0.72x and 0.63x the rows kernel's time, 384 -> 384 at 28x28
# (9 MiB) 0.52x and 0.57x; ResNet-50's convs at 7x7 above. Larger ones are unmeasured, as
# are 4x4 tiles past 4 MiB.
WINOGRAD_MAX_WEIGHT_BYTES = 16 << 20
WINOGRAD_4X4_MAX_WEIGHT_BYTES = 4 << 20
# Runs of tile blocks (or of the products in a conv of one block), each with its own
# scratch: up to this many threads share a conv.
WINOGRAD_LANES = 4
# Transformed weights past this are read once an image: its tiles go in one block, if
# their transformed input and products take at most WINOGRAD_IMAGE_BLOCK_BYTES.
# ResNet-50's 256 -> 256 convs at 14x14 (4 MiB of weights, 2 MiB of V and M) took
# 1766 us at one thread in one block against 1850-1926 in two. Its 128 -> 128 convs at
# 28x28 in 2x2 tiles (1 MiB, 3.5 MiB of V and M) kept their blocks: in one, the threads
# share V and M (aotc_conv_winograd_one_block_), and where the host puts the two CPUs on
# two L3s each conv took 1370-1420 us at two threads against 930 in blocks, the model
# 0.96x the time; on one L3 the model 1.005x (with memory.py's scratch region). In 4x4
# tiles (2.3 MiB, 2.4 MiB of V and M) they go in one: alone, on two L3s, 386 us at two
# threads against 412-422 in blocks of one or two strips, 741 against 740-787 at one.
# Its 64 -> 64 convs at 56x56 (4 MiB of V and M in 4x4 tiles) keep their blocks.
WINOGRAD_IMAGE_BLOCK_WEIGHT_BYTES = 512 << 10
WINOGRAD_IMAGE_BLOCK_BYTES = 3 << 20
# A block's transformed input and products (4 bytes a term per tile and channel):
# about half of L2, beside the weights. Whole strips of the GEMM, at most
# WINOGRAD_MAX_STRIPS: 64 -> 64 at 56x56 took 0.94x the time in blocks of 64 tiles
# (512 KiB) than of 32, 128 -> 128 at 28x28 1.10x.
WINOGRAD_BLOCK_BYTES = 512 << 10
WINOGRAD_MAX_STRIPS = 4
# G ((m + 2) x 3): the weights' transform of Winograd's F(m x m, 3x3), U = G g G^T
WINOGRAD_G = {2: np.array([[1, 0, 0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0, 0, 1]]),
              4: np.array([[1 / 4, 0, 0], [-1 / 6, -1 / 6, -1 / 6], [-1 / 6, 1 / 6, -1 / 6],
                           [1 / 24, 1 / 12, 1 / 6], [1 / 24, -1 / 12, 1 / 6], [0, 0, 1]])}


@dataclass(frozen=True)
class ConvGeometry:
    """One conv as the C kernels see it: spatial tuples padded to 3 dims (leading 1s)."""
    batch: int
    group: int
    cin_g: int
    cout_g: int
    spatial: int            # number of real spatial dims
    in_dims: tuple
    out_dims: tuple
    kernel: tuple
    strides: tuple
    dilations: tuple
    pads_begin: tuple
    const_weights: bool = False
    exact: bool = False

    @property
    def k(self):
        return self.cin_g * int(np.prod(self.kernel))

    @property
    def out_pixels(self):
        return int(np.prod(self.out_dims))

    @property
    def reads_x(self):
        """1x1, stride 1, unpadded: the input itself is the GEMM operand."""
        return (all(d == 1 for d in self.kernel) and all(s == 1 for s in self.strides)
                and self.in_dims == self.out_dims and not any(self.pads_begin))

    def kind(self):
        if self.cin_g == 1:
            return "direct"
        if self.winograd_fits:
            return "winograd"
        if self.pixels_fit:
            return "pixels"
        if self.rows_pay_off():
            return "rows"
        if self.reads_x:
            return "pointwise"
        return "implicit" if self.implicit_fits else "im2col"

    @property
    def pixels_fit(self):
        """2-D, undilated, with weights known at compile time that fit
        PIXELS_MAX_WEIGHT_BYTES; wider than 1x1 (a 1x1 conv is a plain GEMM), or a 1x1
        conv of one K-block over rows of at least PIXELS_1X1_MIN_WIDTH that the rows
        kernel would take, whose product tile goes through scratch there and straight
        from registers here: ResNet-50's 256 -> 1024 convs at 14x14 with their residual
        took 0.93x the time alone and 0.1 ms less each in the model; its 1024 -> 256
        ones (four K-blocks, the sums kept between them) 0.05-0.09 ms more, and
        MobileNetV2's 160 -> 960 at 7x7 (tiles of 7 pixels) 1.10x alone. Not a strided
        conv that the rows kernel takes (its weights outweigh its output pixels): the
        rows kernel unfolds its tiles from X where the pixels kernel copies X into
        phase planes first; ResNet-50's 128 -> 128 3x3 stride-2 conv at 56x56 took
        0.92x the time at two threads (0.93-1.03x at one), 96 -> 96 at 28x28 0.82x
        (0.92x), 128 -> 128 at 30x30 0.83x (0.96x)."""
        from .matmul import KC
        wide = self.kernel[1] * self.kernel[2] > 1
        rows = self.rows_pay_off()
        one_block_1x1 = self.k <= KC and self.out_dims[2] >= PIXELS_1X1_MIN_WIDTH and rows
        strided = max(self.strides) > 1
        return (self.const_weights and self.implicit_fits and (wide or one_block_1x1)
                and not (strided and rows) and 4 * self.k * self.cout_g <= PIXELS_MAX_WEIGHT_BYTES)

    @property
    def winograd_fits(self):
        """Fast mode, 3x3, stride 1, undilated, 2-D, one group, weights known here, at
        least WINOGRAD_MIN_CHANNELS in and out and WINOGRAD_MIN_TILES 2x2 tiles an image
        (or WINOGRAD_SMALL_IMAGE_MIN_CHANNELS and WINOGRAD_SMALL_IMAGE_MIN_TILES: ResNet-50's
        7x7 convs), transformed weights of at most WINOGRAD_MAX_WEIGHT_BYTES."""
        rows, cols = self._winograd_grid(2)
        channels = min(self.cin_g, self.cout_g)
        enough = ((channels >= WINOGRAD_MIN_CHANNELS and rows * cols >= WINOGRAD_MIN_TILES)
                  or (channels >= WINOGRAD_SMALL_IMAGE_MIN_CHANNELS and rows * cols >= WINOGRAD_SMALL_IMAGE_MIN_TILES))
        return (not self.exact and self.const_weights and self.group == 1
                and self.kernel == (1, 3, 3) and self.strides == (1, 1, 1)
                and all(d == 1 for d in self.dilations) and self.in_dims[0] == self.out_dims[0] == 1
                and enough and self._winograd_weight_bytes(2) <= WINOGRAD_MAX_WEIGHT_BYTES)

    @property
    def winograd_tile(self):
        """The tiles' side m of F(m x m, 3x3): 4 where an image has WINOGRAD_MIN_TILES
        4x4 tiles and their transformed weights fit WINOGRAD_4X4_MAX_WEIGHT_BYTES, else 2.
        F(4x4) multiplies 36 times per 16 outputs where F(2x2) takes 64: ResNet-50's
        64 -> 64 conv at 56x56 alone took 0.64x the time at one thread, and in the model
        its 3x3 convs at 56x56 and 28x28 0.76-0.88x (ResNet-50 0.975x). Its tiles at
        14x14 (16 of them, half a strip of the GEMM's columns) stay 2x2."""
        rows, cols = self._winograd_grid(4)
        fits = rows * cols >= WINOGRAD_MIN_TILES and self._winograd_weight_bytes(4) <= WINOGRAD_4X4_MAX_WEIGHT_BYTES
        return 4 if fits else 2

    @property
    def winograd_terms(self):
        """The products per tile and channel pair: (m + 2)^2."""
        return (self.winograd_tile + 2) ** 2

    def _winograd_grid(self, m):
        """(rows, columns) of an image's m x m output tiles, ragged ones included."""
        return -(-self.out_dims[1] // m), -(-self.out_dims[2] // m)

    def _winograd_weight_bytes(self, m):
        return 4 * (m + 2) ** 2 * self.cin_g * self.cout_g

    @property
    def winograd_grid(self):
        """(rows, columns) of an image's output tiles."""
        return self._winograd_grid(self.winograd_tile)

    def winograd_block(self):
        """Tiles per block of aotc_conv_winograd: whole strips of NR, as many as keep its
        transformed input and products within WINOGRAD_BLOCK_BYTES (at least one, at
        most WINOGRAD_MAX_STRIPS, and no more than an image's tiles need); an image's
        tiles where the weights are large and the image small (see
        WINOGRAD_IMAGE_BLOCK_WEIGHT_BYTES)."""
        from .matmul import NR
        rows, cols = self.winograd_grid
        image_strips = -(-rows * cols // NR)
        operands_per_strip = 4 * self.winograd_terms * (self.cin_g + self.cout_g) * NR
        if (self._winograd_weight_bytes(self.winograd_tile) > WINOGRAD_IMAGE_BLOCK_WEIGHT_BYTES
                and image_strips * operands_per_strip <= WINOGRAD_IMAGE_BLOCK_BYTES):
            return NR * image_strips
        fit = WINOGRAD_BLOCK_BYTES // operands_per_strip
        return NR * max(1, min(fit, WINOGRAD_MAX_STRIPS, image_strips))

    def winograd_one_block(self):
        """One image whose tiles are one block: three dispatches shared by the threads
        (aotc_conv_winograd_one_block_)."""
        rows, cols = self.winograd_grid
        return self.batch == 1 and rows * cols <= self.winograd_block()

    def winograd_lanes(self):
        """Lanes of aotc_conv_winograd: WINOGRAD_LANES (of blocks, or of terms where the
        conv is one block), or one per block where there are fewer blocks."""
        rows, cols = self.winograd_grid
        if self.winograd_one_block():
            return WINOGRAD_LANES
        return min(WINOGRAD_LANES, self.batch * -(-rows * cols // self.winograd_block()))

    @property
    def implicit_fits(self):
        """2-D or 1-D without dilation: the unfolded matrix is read from zero-bordered
        phase planes of X (aotc_conv_implicit)."""
        return (self.in_dims[0] == 1 and self.out_dims[0] == 1 and self.kernel[0] == 1
                and all(d == 1 for d in self.dilations))

    def _phase_planes(self):
        """(bytes of the phase planes of X with 32 floats of slack, a plane's width):
        aotc_conv_planes_floats_."""
        (_, kh, kw), (_, sh, sw), (_, oh, ow) = self.kernel, self.strides, self.out_dims
        hq, wq = oh + (kh - 1) // sh, ow + (kw - 1) // sw
        return _align(4 * (self.cin_g * min(sh, kh) * min(sw, kw) * hq * wq + 32)), wq

    def implicit_scratch(self):
        """aotc_conv_implicit_scratch_bytes: the phase planes, then the GEMM's scratch
        for a 1x1 kernel, else the sums between K-blocks in rows of a plane's width and
        the tap offsets."""
        from .matmul import KC, sgemm_scratch_bytes
        planes, wq = self._phase_planes()
        if self.kernel[1] == self.kernel[2] == 1:   # a plain GEMM (aotc_conv_implicit_is_gemm_)
            return planes + sgemm_scratch_bytes(self.cout_g, self.out_pixels, self.cin_g)
        sums = self.cout_g * self.out_dims[1] * wq if self.k > KC else 0
        return planes + _align(4 * sums) + _align(8 * self.k)

    def pixels_scratch(self):
        """aotc_conv_pixels_scratch_bytes: the phase planes (none where X itself is
        read), then the tap offsets."""
        return (0 if self.reads_x else self._phase_planes()[0]) + _align(8 * self.k)

    def rows_pay_off(self):
        """Pixels as GEMM rows (weights packed at compile time, the output transposed
        at the store) beat channels as rows (weights packed on every run) when the
        weights outweigh the output pixels. Not for short K as such: MobileNetV2's 3x3
        stem (K = 27) took 0.47 ms as rows and 0.52 implicit on Zen 4, but 0.60-0.84
        as rows and 0.34-0.51 implicit on Zen 5 (with its phase planes vectorized).
        1x1 stride-1 convs stay plain GEMMs."""
        return self.k * self.cout_g >= ROWS_WEIGHT_RATIO * self.out_pixels * self.cout_g

    @property
    def stores_unfolded_tile(self):
        """The rows kernel unfolds a whole pixel tile into scratch before its GEMM: not
        when it reads X itself, nor with at least as many pixels as output channels,
        where the GEMM unfolds each panel as it goes (aotc_conv_rows_unfold_panels_)."""
        return not self.reads_x and self.out_pixels < self.cout_g

    def row_tile(self):
        """Output pixels per tile of the rows kernel: all when the product tile (and
        the unfolded tile, when it is stored) fit the budget, else equal tiles of whole
        GEMM row blocks."""
        per_pixel = 4 * (self.cout_g + (self.k if self.stores_unfolded_tile else 0))
        fit = IM2COL_BUDGET_BYTES // per_pixel
        if self.out_pixels <= fit:
            return self.out_pixels
        fit = max(ROW_TILE_MULTIPLE, fit // ROW_TILE_MULTIPLE * ROW_TILE_MULTIPLE)
        tiles = -(-self.out_pixels // fit)
        per_tile = -(-self.out_pixels // tiles)
        return min(self.out_pixels, -(-per_tile // ROW_TILE_MULTIPLE) * ROW_TILE_MULTIPLE)

    def block_columns(self):
        """Output pixels per im2col block: everything when it fits the budget, else
        equal blocks rounded up to whole GEMM column tiles."""
        fit = IM2COL_BUDGET_BYTES // (4 * self.k)
        if self.out_pixels <= fit:
            return self.out_pixels
        fit = max(BLOCK_COLUMN_MULTIPLE, fit // BLOCK_COLUMN_MULTIPLE * BLOCK_COLUMN_MULTIPLE)
        blocks = -(-self.out_pixels // fit)
        per_block = -(-self.out_pixels // blocks)
        return min(self.out_pixels, -(-per_block // BLOCK_COLUMN_MULTIPLE) * BLOCK_COLUMN_MULTIPLE)

    def c_literal(self):
        def arr(values):
            return "{" + ", ".join(str(int(v)) for v in values) + "}"
        return (f"&(const aotc_conv_geom){{.batch = {self.batch}, .group = {self.group}, "
                f".cin_g = {self.cin_g}, .cout_g = {self.cout_g}, .in = {arr(self.in_dims)}, "
                f".out = {arr(self.out_dims)}, .kernel = {arr(self.kernel)}, "
                f".stride = {arr(self.strides)}, .dilation = {arr(self.dilations)}, "
                f".pad = {arr(self.pads_begin)}}}")


def _ints_attr(ctx, name, default, length):
    values = [int(v) for v in ctx.attr(name, default)]
    if len(values) != length:
        raise ctx.fail(f"attribute {name} has {len(values)} values, expected {length}")
    return values


def _auto_pad(ctx):
    mode = ctx.attr("auto_pad", "NOTSET")
    if isinstance(mode, bytes):
        mode = mode.decode()
    if mode not in ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"):
        raise ctx.fail(f"auto_pad {mode!r} is not NOTSET, SAME_UPPER, SAME_LOWER or VALID")
    return mode


def _pads_and_output(ctx, in_dims, kernel, strides, dilations):
    """(leading pads, output dims) per spatial dim, as the ONNX spec defines them."""
    rank = len(in_dims)
    mode = _auto_pad(ctx)
    spans = [(k - 1) * d + 1 for k, d in zip(kernel, dilations)]
    if mode in ("SAME_UPPER", "SAME_LOWER"):
        out = [-(-i // s) for i, s in zip(in_dims, strides)]
        total = [max(0, (o - 1) * s + e - i) for o, s, e, i in zip(out, strides, spans, in_dims)]
        begin = [t // 2 if mode == "SAME_UPPER" else t - t // 2 for t in total]
        return begin, out
    if mode == "VALID":
        pads = [0] * (2 * rank)
    else:
        pads = _ints_attr(ctx, "pads", [0] * (2 * rank), 2 * rank)
        if any(p < 0 for p in pads):
            raise ctx.fail(f"pads {pads} must not be negative")
    out = []
    for i, (size, e, s) in enumerate(zip(in_dims, spans, strides)):
        padded = size + pads[i] + pads[i + rank]
        if padded < e:
            raise ctx.fail(f"spatial dim {i}: the kernel span {e} (with dilation) exceeds the "
                           f"padded input {padded}")
        out.append((padded - e) // s + 1)
    return pads[:rank], out


def geometry(ctx):
    """The node's ConvGeometry, its inputs and attributes checked (also read by the
    channels-last rewrite and NhwcConv)."""
    ctx.require_inputs(2, 4 if ctx.node.domain == AOTC_DOMAIN else 3)   # FusedConv: + residual
    ctx.require_dtype(0, TYPES)
    x, w = ctx.inputs[0], ctx.inputs[1]
    if w.dtype != x.dtype:
        raise ctx.fail(f"W has element type {w.dtype}, X has {x.dtype}")
    if x.rank < 3:
        raise ctx.fail(f"X must be [N, C, spatial...], has shape {list(x.shape)}")
    spatial = x.rank - 2
    if spatial > MAX_SPATIAL:
        raise ctx.unsupported(f"Conv with {spatial} spatial dims (at most {MAX_SPATIAL} supported)")
    if w.rank != x.rank:
        raise ctx.fail(f"W shape {list(w.shape)} must have the rank of X shape {list(x.shape)}")
    group = int(ctx.attr("group", 1))
    batch, cin = x.shape[:2]
    cout, cin_g = w.shape[:2]
    if group < 1:
        raise ctx.fail(f"group {group} must be at least 1")
    if cin != cin_g * group:
        raise ctx.fail(f"X has {cin} channels but W expects {cin_g} per group x {group} groups")
    if cout % group:
        raise ctx.fail(f"W has {cout} output channels, not a multiple of group {group}")
    if cin_g == 0:
        raise ctx.unsupported("Conv with zero input channels")
    kernel = [int(d) for d in w.shape[2:]]
    if ctx.attr("kernel_shape") is not None and [int(k) for k in ctx.attr("kernel_shape")] != kernel:
        raise ctx.fail(f"kernel_shape {list(ctx.attr('kernel_shape'))} does not match "
                       f"W's spatial shape {kernel}")
    if ctx.has_input(2) and tuple(ctx.inputs[2].shape) != (cout,):
        raise ctx.fail(f"B has shape {list(ctx.inputs[2].shape)}, expected [{cout}]")
    if ctx.has_input(2) and ctx.inputs[2].dtype != x.dtype:
        raise ctx.fail(f"B has element type {ctx.inputs[2].dtype}, X has {x.dtype}")
    strides = _ints_attr(ctx, "strides", [1] * spatial, spatial)
    dilations = _ints_attr(ctx, "dilations", [1] * spatial, spatial)
    if any(v < 1 for v in strides + dilations + kernel):
        raise ctx.fail(f"strides {strides}, dilations {dilations} and kernel {kernel} "
                       f"must all be at least 1")
    in_dims = [int(d) for d in x.shape[2:]]
    pads, out = _pads_and_output(ctx, in_dims, kernel, strides, dilations)

    def lead(values, fill):
        return tuple([fill] * (MAX_SPATIAL - spatial) + [int(v) for v in values])
    return ConvGeometry(int(batch), group, int(cin_g), int(cout) // group, spatial,
                        lead(in_dims, 1), lead(out, 1), lead(kernel, 1), lead(strides, 1),
                        lead(dilations, 1), lead(pads, 0), _weights_const(ctx), ctx.mode == "exact")


def infer(ctx):
    g = geometry(ctx)
    shape = (g.batch, g.cout_g * g.group) + g.out_dims[MAX_SPATIAL - g.spatial:]
    if has_residual(ctx):
        r = ctx.inputs[3]
        if tuple(r.shape) != shape or np.dtype(r.dtype) != np.float32 or not _is_f32(ctx):
            raise ctx.unsupported(f"the residual input ({r.dtype} {list(r.shape)}) must be "
                                  f"float32 of the output's shape {list(shape)}, with X float32")
    return [TensorType(ctx.inputs[0].dtype, shape)]


def _is_f32(ctx):
    return np.dtype(ctx.inputs[0].dtype) == np.float32


def _staged(ctx):
    """float16 / bfloat16: the float32 kernels between a widening and a narrowing."""
    return np.dtype(ctx.inputs[0].dtype) in dtypes.HALVES


def _stage(ctx):
    """[(input index or None for the output, float count)] of the float32 copies in
    scratch, in order: the inputs not known at compile time, then the output."""
    parts = [(i, t.numel) for i, t in enumerate(ctx.inputs) if t is not None and t.value is None]
    return parts + [(None, ctx.outputs[0].numel if ctx.outputs else 0)]


def stage_bytes(ctx):
    """Scratch of staged_call before the float32 kernel's own."""
    return sum(_align(4 * n) for _, n in _stage(ctx))


def staged_call(ctx, f32_call, act="NULL"):
    """A float16 / bfloat16 node through a float32 kernel: run-time inputs widened into
    scratch, `f32_call(inputs, y, scratch)` (inputs: per input a float C expression, a
    float32 array for a constant, or None when absent), the result rounded once into
    the output. `act` runs on the rounded value: the bits of a separate activation."""
    short = dtypes.short(ctx.inputs[0].dtype)
    lines, inputs, offset, y32 = [], [], 0, None
    for index, count in _stage(ctx):
        where = f"((float *)(void *)({ctx.scratch} + {offset}))"
        offset += _align(4 * count)
        if index is None:
            y32 = where
        else:
            lines.append(f"aotc_widen_{short}({ctx.x(index)}, {where}, {count});")
            inputs.append((index, where))
    staged = dict(inputs)
    operands = [None if not ctx.has_input(i) else staged.get(i, None) or
                np.asarray(ctx.inputs[i].value, np.float32) for i in range(len(ctx.inputs))]
    count = ctx.outputs[0].numel
    lines.append(f32_call(operands, y32, f"({ctx.scratch} + {offset})"))
    if act != "NULL":
        lines.append(f"aotc_stage_round_{short}({y32}, {count});")
        lines.append(f"aotc_activation_apply({act}, {y32}, {count});")
    lines.append(f"aotc_narrow_{short}({y32}, {ctx.y(0)}, {count});")
    return "\n".join(lines)


def _align(n):
    return (n + 63) // 64 * 64


def _weights_const(ctx):
    return ctx.inputs[1].value is not None


def has_residual(ctx):
    return len(ctx.inputs) > 3 and ctx.inputs[3] is not None


def residual_in_place(ctx):
    """The residual's storage may become Y's (FusedConv's in-place input) on the
    kernels that read each residual element before they write that element of Y: not
    the direct kernel (it adds the residual to the sums already in Y), nor a GEMM of
    more than one K-block (partial sums in Y), the rows, pixels and winograd kernels
    aside (their sums are in scratch or registers). A residual dying here then costs no
    output lines of its own: one stream of memory fewer for ResNet's expand convs
    (0.85-0.97x the time each, in the model)."""
    if not has_residual(ctx) or not _is_f32(ctx):
        return ()
    from .matmul import KC
    g = geometry(ctx)
    kind = g.kind()
    return (3,) if kind in ("rows", "pixels", "winograd") or (kind != "direct" and g.k <= KC) else ()


def stores_fast(ctx):
    """The direct (depthwise) kernel: nine multiply-adds an output (OpDef.stores_fast)."""
    return _is_f32(ctx) and geometry(ctx).kind() == "direct"


def scratch(ctx):
    g = geometry(ctx)
    if ctx.outputs and ctx.outputs[0].numel == 0:
        return 0
    if np.dtype(ctx.inputs[0].dtype) == np.float64:
        return 0
    return (stage_bytes(ctx) if _staged(ctx) else 0) + _f32_scratch(ctx, g)


def _f32_scratch(ctx, g):
    from .matmul import NR, sgemm_packed_scratch_bytes, sgemm_scratch_bytes
    kind = g.kind()
    if kind == "rows":
        tile = g.row_tile()
        gemm = sgemm_packed_scratch_bytes if _weights_const(ctx) else sgemm_scratch_bytes
        gemm_bytes = gemm(tile, g.cout_g, g.k)
        if not g.reads_x:   # the unfolded tile is the GEMM's packed A: none of its own
            gemm_bytes -= sgemm_packed_scratch_bytes(tile, g.cout_g, g.k)
        return (_align(4 * tile * g.cout_g) + (_align(4 * g.k * tile) if g.stores_unfolded_tile else 0)
                + gemm_bytes)
    if kind == "pointwise":   # (weights known here come packed: _pointwise_packed_call)
        return (sgemm_scratch_bytes(g.cout_g, g.out_pixels, g.cin_g)
                - (sgemm_packed_scratch_bytes(g.cout_g, g.out_pixels, g.cin_g) if g.const_weights else 0))
    if kind == "implicit":
        return g.implicit_scratch()
    if kind == "pixels":
        return g.pixels_scratch()
    if kind == "winograd":   # aotc_conv_winograd_scratch_bytes
        block = g.winograd_block()
        v, m = (_align(4 * g.winograd_terms * (channels * block + WINOGRAD_PLANE_PAD_FLOATS))
                for channels in (g.cin_g, g.cout_g))
        products = sgemm_packed_scratch_bytes(g.cout_g, block, g.cin_g)
        if g.winograd_one_block():
            return v + m + g.winograd_lanes() * products
        return g.winograd_lanes() * (v + m + products)
    if kind == "im2col":
        block = g.block_columns()
        packed_block = _align(4 * g.k * ((block + NR - 1) // NR * NR))
        return packed_block + sgemm_packed_scratch_bytes(g.cout_g, block, g.k)
    return 0


def pack_weights(g, w):
    """W [Cout, Cin_g, kernel...] as W^T [K, Cout_g] per group, each in the GEMM's
    packed-B layout, one group after another."""
    from .matmul import pack_b
    w = np.asarray(w, np.float32).reshape(g.group, g.cout_g, g.k)
    return np.concatenate([pack_b(w[grp].T) for grp in range(g.group)])


def winograd_weights(w, m):
    """W [Cout, Cin, 3, 3] as U [(m + 2)^2, Cout, Cin] for F(m x m, 3x3): G g G^T of
    each kernel g, element (i, j) of the result at e = (m + 2) i + j (computed in double,
    rounded once)."""
    u = np.einsum("ia,ocab,jb->ijoc", WINOGRAD_G[m], np.asarray(w, np.float64), WINOGRAD_G[m])
    return np.ascontiguousarray(u.reshape((m + 2) ** 2, *u.shape[2:]), np.float32)


def emit_conv(ctx, act="NULL"):
    """The C of one conv, with `act` (an `const aotc_activation *` expression, or NULL)
    applied in the kernel's epilogue."""
    if ctx.outputs[0].numel == 0:
        return ""
    g = geometry(ctx)
    dt = np.dtype(ctx.inputs[0].dtype)
    bias = ctx.x(2) if ctx.has_input(2) else "NULL"
    if dt == np.float64:
        if act != "NULL":
            raise ctx.unsupported("a fused activation on a double conv")
        return f"aotc_conv_f64({ctx.pool}, {g.c_literal()}, {ctx.x(0)}, {ctx.x(1)}, {bias}, {ctx.y(0)});"
    if dt == np.float32:
        w = ctx.inputs[1].value if _weights_const(ctx) else ctx.x(1)
        return _f32_call(ctx, g, ctx.x(0), w, bias, ctx.y(0), act, ctx.scratch)
    return _staged_conv(ctx, g, act)


def _staged_conv(ctx, g, act):
    def call(inputs, y, scratch):
        x, w, bias = (inputs + [None])[:3]
        if isinstance(x, np.ndarray):
            x = ctx.const(x)
        if isinstance(bias, np.ndarray):
            bias = ctx.const(bias)
        return _f32_call(ctx, g, x, w, bias or "NULL", y, "NULL", scratch)
    return staged_call(ctx, call, act)


def _f32_call(ctx, g, x, w, bias, y, act, scratch):
    """The float32 kernel call. `w`: a C expression of W, or its compile-time array."""
    residual = ctx.x(3) if has_residual(ctx) else "NULL"
    kind = g.kind()
    if kind == "rows":
        if isinstance(w, np.ndarray):
            w, packed = ctx.const(pack_weights(g, w)), 1
        else:
            packed = 0
        return (f"aotc_conv_rows({ctx.pool}, {g.c_literal()}, {g.row_tile()}, {x}, {w}, "
                f"{packed}, {bias}, {residual}, {y}, {act}, {scratch});")
    if kind == "winograd":
        return (f"aotc_conv_winograd({ctx.pool}, {g.c_literal()}, {g.winograd_tile}, {g.winograd_block()}, "
                f"{g.winograd_lanes()}, {x}, {ctx.const(winograd_weights(w, g.winograd_tile))}, "
                f"{bias}, {residual}, {y}, {act}, {scratch});")
    if kind == "pixels":
        return (f"aotc_conv_pixels({ctx.pool}, {g.c_literal()}, {x}, {ctx.const(pack_weights(g, w))}, "
                f"{bias}, {residual}, {y}, {act}, {scratch});")
    if kind == "pointwise" and isinstance(w, np.ndarray):
        return _pointwise_packed_call(ctx, g, x, w, bias, residual, y, act, scratch)
    if isinstance(w, np.ndarray):
        w = ctx.x(1) if _is_f32(ctx) else ctx.const(np.asarray(w, np.float32))
    if kind == "direct":
        return (f"aotc_conv_direct({ctx.pool}, {g.c_literal()}, {x}, {w}, {bias}, "
                f"{residual}, {y}, {act});")
    if kind == "pointwise":
        return (f"aotc_conv_pointwise({ctx.pool}, {g.c_literal()}, {x}, {w}, 0, "
                f"{bias}, {residual}, {y}, {act}, {scratch});")
    if kind == "implicit":
        return (f"aotc_conv_implicit({ctx.pool}, {g.c_literal()}, {x}, {w}, {bias}, "
                f"{residual}, {y}, {act}, {scratch});")
    return (f"aotc_conv_im2col({ctx.pool}, {g.c_literal()}, {g.block_columns()}, {x}, "
            f"{w}, {bias}, {residual}, {y}, {act}, {scratch});")


def _pointwise_packed_call(ctx, g, x, w, bias, residual, y, act, scratch):
    """A pointwise conv with its weights, each group's GEMM A, packed here for the
    target's panels: the run skips packing them (what the GEMM packs per call, from 256
    input channels and 512 pixels on) and its tiles read them in order. ResNet-50 took
    0.995x the time at one thread and 0.986x at two; MobileNetV2 unchanged. (C built for
    another path than the target, with other panel rows, makes its panels from them.)"""
    from .matmul import PANEL_ROWS, pack_a
    rows = PANEL_ROWS[ctx.target]
    groups = np.asarray(w, np.float32).reshape(g.group, g.cout_g, g.cin_g)
    packed = ctx.const(np.concatenate([pack_a(wg, rows) for wg in groups]))
    return (f"aotc_conv_pointwise({ctx.pool}, {g.c_literal()}, {x}, {packed}, {rows}, {bias}, {residual}, "
            f"{y}, {act}, {scratch});")


OPS = [OpDef("Conv", infer, emit_conv, scratch=scratch, since=1, supports_exact=True, stores_fast=stores_fast)]
