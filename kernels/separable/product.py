"""``product_kernel``: the banded products (the larger radius in ``tiles.PRODUCT_RADII``,
wide filters whose horizontal taps the strip would read as shifted L1 loads) on the
tensor cores (tf32x3), and its launch."""
import functools

import triton
import triton.language as tl

from .common import _store_tile, image_taps
from ..core import borders, neighbourhood, products
from ..core.launch import launch as launch_kernel, tile_config
from ..core.tiling import interpreting, needs_int64, offset, pow2_at_least, programs, tile_origin


@triton.jit
def _band(T, R: tl.constexpr, scale, first, B: tl.constexpr, INPUT_FIRST: tl.constexpr):
    """The B x B weight matrix of a 1-D filter of taps ``T`` (radius R) from the B inputs
    that start ``first`` positions after output 0 to B outputs, indexed (input, output)
    when ``INPUT_FIRST``, else (output, input); zero outside each output's taps."""
    if INPUT_FIRST:
        k = tl.arange(0, B)[:, None]
        j = tl.arange(0, B)[None, :]
    else:
        j = tl.arange(0, B)[:, None]
        k = tl.arange(0, B)[None, :]
    v = k + first - j + R
    return tl.load(T + v, mask=(v >= 0) & (v <= 2 * R), other=0.0) * scale


@triton.jit
def _window(x_base, row0, col0, H, W, sxh, border_value, c, PRO: tl.constexpr, pro_args,
            SXW: tl.constexpr, BORDER: tl.constexpr, OFF64: tl.constexpr, B: tl.constexpr):
    """The B x B block at (row0, col0) of the border-extended input, as
    ``neighbourhood.LINEAR`` pixels (``border_value`` in the same scale); contiguous columns
    inside the image load as vectors."""
    rows = row0 + tl.arange(0, B)
    cols = col0 + tl.arange(0, B)
    row_off = offset(borders.remap(rows, H, BORDER), sxh, OFF64)[:, None]
    inside = borders.inside(rows, H)[:, None] & borders.inside(cols, W)[None, :]
    if (col0 >= 0) & (col0 + B <= W):
        x = neighbourhood.load(x_base + (row_off + offset(cols, SXW, OFF64)[None, :]), inside, border_value, c, PRO,
                               pro_args, neighbourhood.LINEAR, BORDER)
    else:
        x = neighbourhood.load(x_base + (row_off + offset(borders.remap(cols, W, BORDER), SXW, OFF64)[None, :]),
                               inside, border_value, c, PRO, pro_args, neighbourhood.LINEAR, BORDER)
    return x


@triton.jit
def _row_block(x_base, row0, c0, H, W, sxh, pad, c, TX, scale, PRO: tl.constexpr, pro_args, RX: tl.constexpr,
               SXW: tl.constexpr, BORDER: tl.constexpr, OFF64: tl.constexpr, PRECISION: tl.constexpr,
               B: tl.constexpr):
    """The horizontal pass of input rows row0 .. row0 + B for the B output columns from
    c0 + B // 2: the two B x B blocks of input columns from c0 times their horizontal bands."""
    h = tl.zeros((B, B), dtype=tl.float32)
    for j in range(2):  # a run-time loop: one copy of the product in the code (compile time)
        x = _window(x_base, row0, c0 + j * B, H, W, sxh, pad, c, PRO, pro_args, SXW, BORDER, OFF64, B)
        h = products.weighted_product(_band(TX, RX, scale, j * B - B // 2, B, True), x, h, False, PRECISION)
    return h


@triton.jit
def product_kernel(X, Y, TX, TY, C, H, W, HO, WO, OY, OX,
                   x_strides, y_strides, border_value,
                   PRO: tl.constexpr, pro_args, EPI: tl.constexpr, epi_args,
                   RX: tl.constexpr, RY: tl.constexpr, SXW: tl.constexpr, SYW: tl.constexpr,
                   BORDER: tl.constexpr, OFF64: tl.constexpr, PER_IMAGE: tl.constexpr, PRECISION: tl.constexpr,
                   B: tl.constexpr, SEG: tl.constexpr):
    """``strip_kernel``'s filter (without FOLD) for radii up to B // 2, as products of B x B
    blocks on the tensor cores (tf32x3: float32 accuracy): every tap a multiply-add there
    instead of a load and an FMA on the CUDA cores.

    A program owns B output columns and SEG output rows and marches down them a block of
    B rows at a time. The horizontal pass of B input rows (``_row_block``, the rows
    B // 2 above the block's to B // 2 above the next's) is kept for the next block: each
    output block is the vertical bands times the previous and the new one. Each input
    pixel is loaded once per strip (plus the halo blocks), with vector loads where the
    columns lie inside the image. PER_IMAGE: as ``strip_kernel``'s."""
    sxb, sxc, sxh = x_strides
    syb, syc, syh = y_strides
    b, c, h0, w0 = tile_origin(tl.program_id(0), C, HO, WO, SEG, B)
    TX = image_taps(TX, b, RX, PER_IMAGE)
    TY = image_taps(TY, b, RY, PER_IMAGE)
    x_base = X + b * sxb + c * sxc
    y_base = Y + b * syb + c * syc
    scale = neighbourhood.linear_scale(X.dtype.element_ty, PRO)  # folded into the horizontal taps
    pad = border_value / scale
    r0 = h0 + OY - B // 2
    c0 = w0 + OX - B // 2
    out_cols = w0 + tl.arange(0, B)
    top = tl.zeros((B, B), dtype=tl.float32)
    for i in range(-B, tl.minimum(SEG, HO - h0), B):  # (the first pass only fills ``top``)
        bottom = _row_block(x_base, r0 + i + B, c0, H, W, sxh, pad, c, TX, scale, PRO, pro_args, RX, SXW, BORDER,
                            OFF64, PRECISION, B)
        if i >= 0:
            y = tl.zeros((B, B), dtype=tl.float32)
            for k in range(2):  # (a loop for the same reason as ``_row_block``'s)
                y = products.weighted_product(_band(TY, RY, 1.0, k * B - B // 2, B, False),
                                              tl.where(k == 0, top, bottom), y, True, PRECISION)
            _store_tile(x_base, y_base, h0 + i + tl.arange(0, B), out_cols, y, H, W, HO, WO, OY, OX, sxh, syh, b, c,
                        PRO, pro_args, EPI, epi_args, SXW, SYW, BORDER, OFF64)
        top = bottom


def _launch_product(x, y, tx, ty, oy, ox, border, border_value, pro, epi, tile):
    B, C, H, W = x.shape
    HO, WO = y.shape[-2:]
    sx, sy = x.stride(), y.stride()
    args = (x, y, tx, ty, C, H, W, HO, WO, oy, ox, sx[:3], sy[:3], float(border_value),
            pro[0], pro[1], epi[0], epi[1])
    meta = dict(RX=(tx.shape[-1] - 1) // 2, RY=(ty.shape[-1] - 1) // 2, SXW=sx[3], SYW=sy[3], BORDER=border,
                OFF64=needs_int64(x, y), PER_IMAGE=tx.ndim == 2, PRECISION="ieee" if interpreting() else "tf32x3")
    if interpreting():  # one segment per plane
        tile = dict(tile, SEG=pow2_at_least(HO, tile["B"], 1 << 20))
    grid = programs(B * C, HO, WO, tile["SEG"], tile["B"])
    launch_kernel(product_kernel, lambda m: (grid,), args, meta, x, _tile(tuple(tile.items())))


@functools.lru_cache(maxsize=64)
def _tile(items):
    """The launch tile of a product configuration (its items): made once, not per call."""
    return tile_config(**dict(items))
