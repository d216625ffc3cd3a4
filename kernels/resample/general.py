"""``resample_kernel`` (any mode at any factor: weights on the fly, the column pass on the
tensor cores) and ``direct_kernel`` (the modes of at most four taps and no widening), and
``launch_general``, which picks between them and the two-pass path (``two_pass.py``)."""
import triton
import triton.language as tl

from ..core import pixels, pointwise, products
from ..core.launch import launch as launch_kernel, tile_config
from ..core.tiling import interpreting, needs_int64, offset, pow2_at_least, programs, tile_origin
from . import modes, tiles, two_pass
from .modes import FIXED_TAPS, NORMALISED_MODES, taps


# Sizes, tap counts and the strides other than the last are not specialised: Triton would
# compile a variant for each pattern of them that is 1 or a multiple of 16, and random
# resizes (the degradation pipelines) met a new one almost every call, about a second each
# on the H200's host. The loads are gathered, so alignment buys this kernel nothing.
@triton.jit(do_not_specialize=["C", "H", "W", "HO", "WO", "sxb", "sxc", "sxh", "syb", "syc", "syh", "TAPS_Y",
                               "TAPS_X"])
def resample_kernel(X, Y, C, H, W, HO, WO, scale_y, scale_x, scale_y_lo, scale_x_lo, support_y, support_x,
                    widen_y, widen_x,
                    sxb, sxc, sxh, sxw, syb, syc, syh, syw, TAPS_Y, TAPS_X,
                    PRO: tl.constexpr, pro_args, EPI: tl.constexpr, epi_args,
                    MODE: tl.constexpr, ALIGN: tl.constexpr, NORMALISE: tl.constexpr, CLAMP_ROWS: tl.constexpr,
                    PRECISION: tl.constexpr, OFF64: tl.constexpr, BH: tl.constexpr, BW: tl.constexpr, JC: tl.constexpr):
    """Y[b, c] (HO x WO) resampled from X[b, c] (H x W); the epilogue's ``x_in`` is the
    resampled value itself (there is no input pixel at an output position). CLAMP_ROWS
    clamps the result of each row's pass to [0, 1] before the column pass.

    Separable in two stages on chip: the row pass runs once per source row the tile needs
    (``JC`` rows at a time: a JC x BW tile of row-resampled values), and the column pass
    is a (BH x JC) @ (JC x BW) product with the tile's column-weight matrix, zero outside
    each output row's taps. That costs TAPS_X loads per source row instead of TAPS_Y x
    TAPS_X per output pixel, and the product runs on the tensor cores (``PRECISION``
    "tf32x3": float32 accuracy; the interpreter multiplies in float32 as it is)."""
    b, c, h0, w0 = tile_origin(tl.program_id(0), C, HO, WO, BH, BW)
    # Per-row and per-column values are kept as (BH, 1) and (1, BW) tensors, not 1-D
    # ones: they then share the 2-D tiles' layout, and the tap loop converts no layouts
    # (each conversion is a round trip through shared memory).
    rows = h0 + tl.arange(0, BH)[:, None]
    cols = w0 + tl.arange(0, BW)[None, :]
    fy, ny, py = modes.axis(rows, H, HO, scale_y, scale_y_lo, support_y, MODE, ALIGN)
    fx, nx, px = modes.axis(cols, W, WO, scale_x, scale_x_lo, support_x, MODE, ALIGN)
    if NORMALISE:
        norm_y = modes.normaliser(fy, ny, py, H, widen_y, TAPS_Y, MODE)
        norm_x = modes.normaliser(fx, nx, px, W, widen_x, TAPS_X, MODE)
    base = X + b * sxb + c * sxc
    # The source rows (before border handling) that the tile's output rows read.
    live_rows = rows < HO
    first_row = tl.min(tl.where(live_rows, fy, 2147483647))
    end_row = tl.max(tl.where(live_rows, fy + ny, -2147483647))
    acc = tl.zeros((BH, BW), dtype=tl.float32)
    # Non-finite row-pass values, counted per output by how they reach it (``core.products``).
    nan_hits = tl.zeros((BH, BW), dtype=tl.float32)
    up_hits = tl.zeros((BH, BW), dtype=tl.float32)
    down_hits = tl.zeros((BH, BW), dtype=tl.float32)
    for j0 in range(first_row, end_row, JC):
        src = j0 + tl.arange(0, JC)[:, None]
        row_ptr = base + offset(modes.source(src, H, MODE), sxh, OFF64)
        line = modes.row_taps(tl.zeros((JC, BW), dtype=tl.float32), row_ptr, fx, nx, px, W, widen_x, TAPS_X, sxw, c,
                         PRO, pro_args, MODE, OFF64)
        if NORMALISE:
            line = line * norm_x
        if CLAMP_ROWS:  # the row pass of an integer image is an integer image in PIL and torch's CPU path
            line = tl.minimum(tl.maximum(line, 0.0), 1.0)
        _, wy = modes.tap(j0 + tl.arange(0, JC)[None, :] - fy, fy, ny, py, H, widen_y, MODE)
        if products.has_non_finite(line):  # (rare) kept off the product, counted per output
            nan_hits, up_hits, down_hits = products.non_finite_hits(wy, line, nan_hits, up_hits, down_hits, True)
            line = products.finite_part(line)
        acc = tl.dot(wy, line, acc, input_precision=PRECISION)
    if NORMALISE:
        acc = acc * norm_y
    acc = products.mark_non_finite(acc, nan_hits, up_hits, down_hits)
    acc = pointwise.apply_epilogue(acc, acc, b, c, EPI, epi_args)
    mask = (rows < HO) & (cols < WO)
    offs = offset(rows, syh, OFF64) + offset(cols, syw, OFF64)
    pixels.store(Y + b * syb + c * syc + offs, acc, mask)




# Sizes and the strides other than the last are not specialised, as in ``resample_kernel``.
@triton.jit(do_not_specialize=["C", "H", "W", "HO", "WO", "sxb", "sxc", "sxh", "syb", "syc", "syh"])
def direct_kernel(X, Y, C, H, W, HO, WO, scale_y, scale_x, scale_y_lo, scale_x_lo,
                  sxb, sxc, sxh, sxw, syb, syc, syh, syw,
                  PRO: tl.constexpr, pro_args, EPI: tl.constexpr, epi_args,
                  MODE: tl.constexpr, ALIGN: tl.constexpr, CLAMP_ROWS: tl.constexpr, TAPS: tl.constexpr,
                  OFF64: tl.constexpr, BH: tl.constexpr, BW: tl.constexpr):
    """``resample_kernel`` for the modes of at most four taps per axis and no widening
    (nearest, nearest-exact, bilinear, bicubic; ``TAPS`` per axis), at any factor: each
    output gathers its TAPS x TAPS source pixels itself. Neighbouring outputs of a row read
    neighbouring source pixels, so a warp's loads are a few contiguous sectors and the
    rereads hit L1: no on-chip row pass, no product, and nothing kept across rows."""
    b, c, h0, w0 = tile_origin(tl.program_id(0), C, HO, WO, BH, BW)
    rows = h0 + tl.arange(0, BH)[:, None]
    cols = w0 + tl.arange(0, BW)[None, :]
    fy, ny, py = modes.axis(rows, H, HO, scale_y, scale_y_lo, 0.0, MODE, ALIGN)
    fx, nx, px = modes.axis(cols, W, WO, scale_x, scale_x_lo, 0.0, MODE, ALIGN)
    base = X + b * sxb + c * sxc
    acc = tl.zeros((BH, BW), dtype=tl.float32)
    for i in tl.static_range(TAPS):
        ry, wy = modes.tap(i, fy, ny, py, H, 1.0, MODE)
        row_ptr = base + offset(ry, sxh, OFF64)
        line = tl.zeros((BH, BW), dtype=tl.float32)
        for k in tl.static_range(TAPS):
            cx, wx = modes.tap(k, fx, nx, px, W, 1.0, MODE)
            v = pointwise.apply_chain(pixels.load(row_ptr + offset(cx, sxw, OFF64)), c, PRO, pro_args)
            line += tl.where(wx != 0.0, wx * v, 0.0)  # (0 * NaN is NaN: a tap of weight 0 reads nothing)
        if CLAMP_ROWS:  # as resample_kernel's row pass
            line = tl.minimum(tl.maximum(line, 0.0), 1.0)
        acc += tl.where(wy != 0.0, wy * line, 0.0)
    acc = pointwise.apply_epilogue(acc, acc, b, c, EPI, epi_args)
    mask = (rows < HO) & (cols < WO)
    pixels.store(Y + b * syb + c * syc + offset(rows, syh, OFF64) + offset(cols, syw, OFF64), acc, mask)



def launch_general(x, y, mode, scale_y, scale_x, align_corners, antialias, clamp_rows, pro, epi):
    """``launch`` where no ``PhasePlan`` applies: ``direct_kernel`` for the modes of fixed
    taps, else the two passes where ``two_pass.takes_two_passes`` says, else
    ``resample_kernel``."""
    B, C, H, W = x.shape
    HO, WO = y.shape[-2:]
    (sy, sy_lo), (sx, sx_lo) = modes.float32_pair(scale_y), modes.float32_pair(scale_x)
    if mode in FIXED_TAPS:
        bh, bw, warps = ((pow2_at_least(HO, 1, 64), pow2_at_least(WO, 16, 128), 1) if interpreting()
                          else tiles.DIRECT_TILE)
        args = (x, y, C, H, W, HO, WO, sy, sx, sy_lo, sx_lo, *x.stride(), *y.stride(), pro[0], pro[1], epi[0], epi[1])
        meta = dict(MODE=mode, ALIGN=bool(align_corners), CLAMP_ROWS=bool(clamp_rows), TAPS=FIXED_TAPS[mode],
                    OFF64=needs_int64(x, y))
        return launch_kernel(direct_kernel, lambda m: (programs(B * C, HO, WO, bh, bw),), args, meta, x,
                             tile_config(BH=bh, BW=bw, num_warps=warps))
    ty, sup_y, wid_y = taps(mode, H, HO, scale_y, antialias)
    tx, sup_x, wid_x = taps(mode, W, WO, scale_x, antialias)
    normalise = mode in NORMALISED_MODES
    if two_pass.takes_two_passes(x, HO, WO, scale_y, scale_x):
        return two_pass.launch_two_pass(x, y, mode, (sy, sy_lo, sup_y, wid_y, ty), (sx, sx_lo, sup_x, wid_x, tx),
                                align_corners, normalise, clamp_rows, pro, epi)
    if interpreting():  # one tile and one chunk of source rows per plane where it fits
        bh, bw = pow2_at_least(HO, 16, 64), pow2_at_least(WO, 16, 128)
        jc = pow2_at_least(int(bh * scale_y) + ty + 1, 16, 128)
    else:
        big = programs(B * C, HO, WO, tiles.TILE[0], tiles.TILE[1]) >= tiles.SMALL_OUTPUT_PROGRAMS
        bh, bw, jc, warps = tiles.TILE if big else tiles.SMALL_TILE
    args = (x, y, C, H, W, HO, WO, sy, sx, sy_lo, sx_lo, float(sup_y), float(sup_x), float(wid_y),
            float(wid_x), *x.stride(), *y.stride(), ty, tx, pro[0], pro[1], epi[0], epi[1])
    meta = dict(MODE=mode, ALIGN=bool(align_corners), NORMALISE=normalise, CLAMP_ROWS=bool(clamp_rows),
                PRECISION="ieee" if interpreting() else "tf32x3", OFF64=needs_int64(x, y))
    launch_kernel(resample_kernel, lambda m: (programs(B * C, HO, WO, bh, bw),), args, meta, x,
                  tile_config(BH=bh, BW=bw, JC=jc, num_warps=1 if interpreting() else warps))
