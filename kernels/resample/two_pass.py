"""Resampling in two passes through memory, for downscales by 2 or more on both axes:
``resample_rows_kernel`` into a float32 (B, C, H, WO) intermediate, then
``resample_columns_kernel`` (the package's docstring says when and why)."""
import torch
import triton
import triton.language as tl

from ..core import pixels, pointwise
from ..core.launch import launch as launch_kernel, tile_config
from ..core.tiling import interpreting, needs_int64, offset, pow2_at_least, programs, tile_origin
from . import modes, tiles


# Sizes, tap counts and the strides other than the last are not specialised, as in
# ``resample_kernel``.
@triton.jit(do_not_specialize=["C", "H", "W", "WO", "sxb", "sxc", "sxh", "stb", "stc", "sth", "TAPS_X"])
def resample_rows_kernel(X, T, C, H, W, WO, scale_x, scale_x_lo, support_x, widen_x,
                         sxb, sxc, sxh, sxw, stb, stc, sth, TAPS_X,
                         PRO: tl.constexpr, pro_args, MODE: tl.constexpr, ALIGN: tl.constexpr,
                         NORMALISE: tl.constexpr, CLAMP_ROWS: tl.constexpr, OFF64: tl.constexpr,
                         BR: tl.constexpr, BW: tl.constexpr):
    """The row pass of ``resample_kernel`` on its own: T[b, c] (H x WO, float32) from
    X[b, c] (H x W), every source row resampled along x once. A program owns BR source
    rows x BW output columns; each column's taps (first index, count, weights and their
    normalisation) are ``resample_kernel``'s and are summed in its order, so T holds the
    values its ``line`` tiles hold (with CLAMP_ROWS' clamp and the prologue)."""
    b, c, r0, w0 = tile_origin(tl.program_id(0), C, H, WO, BR, BW)
    # The tile is (columns, rows): Triton orders the threads of a gathered load (no
    # contiguity known on either axis) along the first axis, and a warp's lanes then read
    # neighbouring windows of one row (a few cache lines a load), not 32 rows; each thread
    # keeps its column's taps for all its rows.
    cols = w0 + tl.arange(0, BW)[:, None]
    rows = r0 + tl.arange(0, BR)[None, :]
    fx, nx, px = modes.axis(cols, W, WO, scale_x, scale_x_lo, support_x, MODE, ALIGN)
    # (rows past the image read the last one: the loads stay inside, the store is masked)
    row_ptr = X + b * sxb + c * sxc + offset(tl.minimum(rows, H - 1), sxh, OFF64)
    line = modes.row_taps(tl.zeros((BW, BR), dtype=tl.float32), row_ptr, fx, nx, px, W, widen_x, TAPS_X, sxw, c, PRO,
                     pro_args, MODE, OFF64)
    if NORMALISE:
        line = line * modes.normaliser(fx, nx, px, W, widen_x, TAPS_X, MODE)
    if CLAMP_ROWS:
        line = tl.minimum(tl.maximum(line, 0.0), 1.0)
    tl.store(T + b * stb + c * stc + offset(rows, sth, OFF64) + cols, line, (rows < H) & (cols < WO))


@triton.jit(do_not_specialize=["C", "H", "HO", "WO", "stb", "stc", "sth", "syb", "syc", "syh", "TAPS_Y"])
def resample_columns_kernel(T, Y, C, H, HO, WO, scale_y, scale_y_lo, support_y, widen_y,
                            stb, stc, sth, syb, syc, syh, syw, TAPS_Y,
                            EPI: tl.constexpr, epi_args, MODE: tl.constexpr, ALIGN: tl.constexpr,
                            NORMALISE: tl.constexpr, OFF64: tl.constexpr, BH: tl.constexpr, BW: tl.constexpr,
                            KC: tl.constexpr):
    """The column pass: Y[b, c] (HO x WO) from the row pass T[b, c] (H x WO, float32 of
    ``resample_rows_kernel``). Per output row its taps over T's rows (``resample_kernel``'s
    weights and normalisation), each a contiguous load across the tile's columns, summed in
    float32 over the taps of nonzero weight only: a NaN or inf reaches exactly the outputs
    that weigh it, combined as IEEE arithmetic does (``core.products``' semantics). KC taps
    a step, their loads in flight together."""
    b, c, h0, w0 = tile_origin(tl.program_id(0), C, HO, WO, BH, BW)
    rows = h0 + tl.arange(0, BH)[:, None]
    cols = w0 + tl.arange(0, BW)[None, :]
    fy, ny, py = modes.axis(rows, H, HO, scale_y, scale_y_lo, support_y, MODE, ALIGN)
    base = T + b * stb + c * stc + cols
    live = cols < WO
    acc = tl.zeros((BH, BW), dtype=tl.float32)
    for k0 in range(0, TAPS_Y, KC):
        for u in tl.static_range(KC):  # (taps from TAPS_Y on have weight 0 and read a row inside)
            ry, wy = modes.tap(k0 + u, fy, ny, py, H, widen_y, MODE)
            v = tl.load(base + offset(ry, sth, OFF64), live)
            acc += tl.where(wy != 0.0, wy * v, 0.0)
    if NORMALISE:
        acc = acc * modes.normaliser(fy, ny, py, H, widen_y, TAPS_Y, MODE)
    acc = pointwise.apply_epilogue(acc, acc, b, c, EPI, epi_args)
    mask = (rows < HO) & (cols < WO)
    pixels.store(Y + b * syb + c * syc + offset(rows, syh, OFF64) + offset(cols, syw, OFF64), acc, mask)




def takes_two_passes(x, HO, WO, scale_y, scale_x):
    """Whether ``launch_general`` resamples ``x`` (B, C, H, W) to HO x WO in two passes (``tiles.TWO_PASS``):
    never where the float32 intermediate (B, C, H, WO) would take more bytes than ``x``;
    by default where both axes shrink by ``tiles.TWO_PASS_SHRINK`` or more."""
    if tiles.TWO_PASS is False:
        return False
    if 4 * WO > x.shape[-1] * x.element_size():
        return False
    if tiles.TWO_PASS:
        return True
    return not interpreting() and scale_y >= tiles.TWO_PASS_SHRINK and scale_x >= tiles.TWO_PASS_SHRINK


def launch_two_pass(x, y, mode, axis_y, axis_x, align_corners, normalise, clamp_rows, pro, epi):
    """``launch_general`` in two passes: the row pass into a float32 (B, C, H, WO) intermediate,
    then the column pass into ``y``. ``axis_y``/``axis_x``: (step, its low part, support,
    widening, taps) per axis."""
    B, C, H, W = x.shape
    HO, WO = y.shape[-2:]
    (sy, sy_lo, sup_y, wid_y, ty), (sx, sx_lo, sup_x, wid_x, tx) = axis_y, axis_x
    tmp = x.new_empty((B, C, H, WO), dtype=torch.float32)
    off64 = needs_int64(x, y, tmp)
    if interpreting():  # one tile per plane where it fits
        br, bw, warps = pow2_at_least(H, 16, 64), pow2_at_least(WO, 16, 128), 1
    else:
        br, bw, warps = tiles.ROWS_TILE
    args = (x, tmp, C, H, W, WO, sx, sx_lo, float(sup_x), float(wid_x), *x.stride(), *tmp.stride()[:3], tx,
            pro[0], pro[1])
    meta = dict(MODE=mode, ALIGN=bool(align_corners), NORMALISE=normalise, CLAMP_ROWS=bool(clamp_rows),
                OFF64=off64)
    launch_kernel(resample_rows_kernel, lambda m: (programs(B * C, H, WO, br, bw),), args, meta, x,
                  tile_config(BR=br, BW=bw, num_warps=warps))
    if interpreting():
        bh, bw, kc, warps = pow2_at_least(HO, 16, 64), pow2_at_least(WO, 16, 128), 4, 1
    else:
        bh, bw, kc, warps = tiles.COLUMNS_TILE
    args = (tmp, y, C, H, HO, WO, sy, sy_lo, float(sup_y), float(wid_y), *tmp.stride()[:3], *y.stride(), ty,
            epi[0], epi[1])
    meta = dict(MODE=mode, ALIGN=bool(align_corners), NORMALISE=normalise, OFF64=off64)
    launch_kernel(resample_columns_kernel, lambda m: (programs(B * C, HO, WO, bh, bw),), args, meta, x,
                  tile_config(BH=bh, BW=bw, KC=kc, num_warps=warps))
