"""Resampling (resize / upsample): one launch, weights computed on the fly or tabled.

Every mode is separable: output pixel (i, j) is ``sum_a wy_i(a) sum_b wx_j(b) X[y_i(a),
x_j(b)]`` over a few source rows and columns per axis. Three kernels, by what the call
allows (``launch`` picks):

- ``phases_kernel``: a ratio F / D per axis (F outputs per D source pixels, F 1, 2 or 4,
  D any that MAX_SLOTS allows: x2, x4, 4/3, 1/2, 1/4, 2/3, ...; every mode, no
  align_corners). Every output phase has constant weights away from the edges, so a strip
  of columns slides down the rows, reading each source row once as contiguous blocks and
  writing coalesced, interleaved output rows (PERFORMANCE.md); the weights, and those of
  the lanes and rows next to the edges, come from the float64 reference as constant
  tables (``PhasePlan``).
- ``direct_kernel``: other factors of the modes with at most four taps and no widening
  (nearest, nearest-exact, bilinear, bicubic): each output gathers its taps itself.
- ``resample_kernel``: the rest (antialiased, Lanczos, area and MATLAB at other
  factors). Each program owns a ``BH x BW`` output tile of one plane; per axis it
  computes, for its rows (columns), the first source index, the tap count and every tap's
  weight from the mode's index mapping and kernel function (normalised where the mode
  normalises). It resamples along x each source row the tile needs, once, and combines
  those rows with a matrix of row weights on the tensor cores. Downsampling with
  antialias widens the kernel with the scale, and the source rows and taps per tile grow
  with it, in the same single launch.
- ``resample_rows_kernel`` then ``resample_columns_kernel``: the same work in two passes
  through a float32 (B, C, H, WO) intermediate, for downscales by 2 or more on both axes
  (``two_pass``), where each of ``resample_kernel``'s programs loops over many source rows,
  a few at a time, and neighbouring tiles resample the same rows again: the row pass is
  spread over every source row, once, and the column pass sums contiguous rows of the
  intermediate in float32. Never where the intermediate would outweigh the input.

The gradients of upsampling by 1 or 2 (torch's modes) are ``upsample_phases_adjoint_kernel``.

Modes (``MODE`` constexpr), as defined in ``imgfilters/reference/resample.py``:

- NEAREST: ``floor(i * scale)``; NEAREST_EXACT: ``floor((i + 0.5) * scale)`` (torch).
- LINEAR / CUBIC: torch's ``upsample_bilinear2d`` / ``upsample_bicubic2d`` (source
  ``(i + 0.5) * scale - 0.5``, or ``i * scale`` with align_corners; bilinear clamps a
  negative source to 0; bicubic A = -0.75 with its taps clamped into the image).
- AA_LINEAR / AA_CUBIC / LANCZOS: the antialiased, PIL-style scheme of torch's
  ``_upsample_*_aa`` and PIL: centre ``(i + 0.5) * scale``, support ``S * max(scale, 1)``,
  weights ``k((x - centre + 0.5) / max(scale, 1))`` normalised (triangle, cubic with
  A = -0.5, Lanczos-3).
- AREA: ``adaptive_avg_pool2d``: the mean over ``[floor(i in / out), ceil((i + 1) in / out))``.
- MATLAB: ``imresize`` bicubic (A = -0.5; with antialias the kernel widens by the scale
  when shrinking), symmetric index padding at the borders, weights normalised.

``scale`` is the source step per output pixel (``in / out``, or torch's ``1 / scale_factor``).
"""
import dataclasses
import functools

import numpy as np
import torch
import triton
import triton.language as tl

from .core import borders, pixels, pointwise, products
from .core.launch import Meta, Plan, launch as launch_kernel, tile_config
from .core.tiling import interpreted, interpreting, needs_int64, next_pow2, offset, pow2_at_least, programs, tile_origin

# Mode codes: constexpr for the kernels (compiled kernels read only constexpr globals);
# the host compares against them and keys its tables by their int values.
NEAREST, NEAREST_EXACT, LINEAR, CUBIC, AA_LINEAR, AA_CUBIC, LANCZOS, AREA, MATLAB = (tl.constexpr(i) for i in range(9))
MODES = {name: code.value for name, code in [
    ("nearest", NEAREST), ("nearest-exact", NEAREST_EXACT), ("bilinear", LINEAR), ("bicubic", CUBIC),
    ("aa-bilinear", AA_LINEAR), ("aa-bicubic", AA_CUBIC), ("lanczos", LANCZOS), ("area", AREA), ("matlab", MATLAB)]}
SUPPORT = {AA_LINEAR.value: 1.0, AA_CUBIC.value: 2.0, LANCZOS.value: 3.0, MATLAB.value: 2.0}
# The host's tables by the codes' int values (comparing an int with a constexpr costs
# microseconds a call): taps of the fixed-support modes, the modes whose kernel widens by
# the downscaling factor, and those whose weights are normalised to sum 1.
FIXED_TAPS = {NEAREST.value: 1, NEAREST_EXACT.value: 1, LINEAR.value: 2, CUBIC.value: 4}
WIDENED_MODES = frozenset(m.value for m in (AA_LINEAR, AA_CUBIC, LANCZOS))
NORMALISED_MODES = frozenset(m.value for m in (AA_LINEAR, AA_CUBIC, LANCZOS, AREA, MATLAB))
PI: tl.constexpr = tl.constexpr(3.141592653589793)
# GPU tiles of ``resample_kernel``: output rows, output columns, source rows per chunk,
# warps; SMALL_TILE where TILE leaves most of the GPU idle (a 224 x 224 output: 48 programs
# a plane's 3 channels); and output rows, columns, warps of ``direct_kernel`` (measured on
# the H200, PERFORMANCE.md).
TILE, SMALL_TILE, SMALL_OUTPUT_PROGRAMS = (64, 64, 16, 4), (16, 16, 16, 2), 512
DIRECT_TILE = (2, 256, 4)
# The two-pass path (``resample_rows_kernel`` then ``resample_columns_kernel``, through a
# float32 intermediate of H x WO a plane): None takes it where ``two_pass`` says (downscales
# by TWO_PASS_SHRINK or more on both axes: 4K -> 224 x 224 uint8 0.164 -> 0.093 ms, 4K ->
# 1000 x 1777 float32 0.42 -> 0.154 on the H200); True wherever the intermediate fits
# (tests, probes), False never. Its GPU tiles: source rows, output columns, warps of the
# row pass; output rows, columns, taps a step, warps of the column pass.
TWO_PASS = None
ROWS_TILE, COLUMNS_TILE, TWO_PASS_SHRINK = (32, 32, 4), (2, 256, 4, 2), 2.0


@triton.jit
def _cubic(x, A: tl.constexpr):
    """Keys' cubic convolution kernel with parameter A (0 beyond |x| = 2)."""
    x = tl.abs(x)
    near = ((A + 2.0) * x - (A + 3.0)) * x * x + 1.0
    far = ((A * x - 5.0 * A) * x + 8.0 * A) * x - 4.0 * A
    return tl.where(x < 1.0, near, tl.where(x < 2.0, far, 0.0))


@triton.jit
def _sinc(x):
    px = PI * tl.where(x == 0.0, 1.0, x)
    return tl.where(x == 0.0, 1.0, tl.sin(px) / px)


@triton.jit
def _aa_filter(x, MODE: tl.constexpr):
    """The antialias path's kernel functions (PIL's filters)."""
    if MODE == AA_LINEAR:
        return tl.maximum(1.0 - tl.abs(x), 0.0)
    elif MODE == AA_CUBIC:
        return _cubic(x, -0.5)
    else:  # LANCZOS: sinc(x) sinc(x / 3) on |x| < 3
        return tl.where(tl.abs(x) < 3.0, _sinc(x) * _sinc(x / 3.0), 0.0)


@triton.jit
def _axis(i, n_in, n_out, scale, scale_lo, support, MODE: tl.constexpr, ALIGN: tl.constexpr):
    """For output indices ``i`` along one axis: (first source index, tap count, the
    position the weights are measured from, relative to the first source index).

    Positions are formed in float64 from the source step as a float32 pair (``scale +
    scale_lo``): in float32, ``(i + 0.5) * scale`` is off by up to i ulps of the step,
    6e-5 of a pixel at i = 1000, and the weights and the result with it (3.5e-5 for a
    500 x 650 image, growing with the size). The relative position is then small and
    exact in float32."""
    fi = i.to(tl.float32)
    one = tl.full(i.shape, 1, tl.int32)
    if MODE == NEAREST:  # (an index only: float32, as torch's)
        return tl.minimum((fi * scale).to(tl.int32), n_in - 1), one, fi
    elif MODE == NEAREST_EXACT:
        return tl.minimum(((fi + 0.5) * scale).to(tl.int32), n_in - 1), one, fi
    elif MODE == AREA:
        start = (i * n_in) // n_out
        end = ((i + 1) * n_in + n_out - 1) // n_out
        return start, end - start, fi
    f = i.to(tl.float64)
    if MODE == LINEAR or MODE == CUBIC:
        if ALIGN:
            src = f * scale + f * scale_lo
        else:
            src = (f + 0.5) * scale + (f + 0.5) * scale_lo - 0.5
        if MODE == LINEAR:
            if not ALIGN:
                src = tl.maximum(src, 0.0)
            first = tl.floor(src).to(tl.int32)
            return first, 2 * one, (src - first).to(tl.float32)
        first = tl.floor(src).to(tl.int32) - 1
        return first, 4 * one, (src - first).to(tl.float32)
    elif MODE == MATLAB:
        u = (f + 0.5) * scale + (f + 0.5) * scale_lo + 0.5  # (i + 1) scale + (1 - scale) / 2: 1-based, as MATLAB
        left = tl.floor(u - support).to(tl.int32) - 1  # 0-based
        return left, one * (tl.ceil(2.0 * support).to(tl.int32) + 2), (u - left).to(tl.float32)
    else:
        centre = (f + 0.5) * scale + (f + 0.5) * scale_lo
        lo = tl.maximum((centre - support + 0.5).to(tl.int32), 0)
        hi = tl.minimum((centre + support + 0.5).to(tl.int32), n_in)
        return lo, hi - lo, (centre - lo).to(tl.float32)


@triton.jit
def _source(idx, n_in, MODE: tl.constexpr):
    """A tap's source index brought into [0, n_in): MATLAB pads symmetrically, the others
    repeat the edge."""
    if MODE == MATLAB:
        return borders.remap(idx, n_in, borders.SYMMETRIC)
    return tl.minimum(tl.maximum(idx, 0), n_in - 1)


@triton.jit
def _tap(k, first, count, rel, n_in, widen, MODE: tl.constexpr):
    """Tap ``k`` of every output along one axis: (source index in [0, n_in), raw weight;
    0 unless 0 <= k < count); ``rel`` is the position relative to ``first`` (``_axis``).
    ``widen`` is max(scale, 1) where the kernel widens, else 1. ``k`` may be a tensor that
    broadcasts against the per-output vectors."""
    live = (k >= 0) & (k < count)
    if MODE == NEAREST or MODE == NEAREST_EXACT or MODE == AREA:
        w = tl.full(first.shape, 1.0, tl.float32)
    elif MODE == LINEAR:
        w = tl.where(k == 0, 1.0 - rel, rel)
    elif MODE == CUBIC:
        w = _cubic(rel - k, -0.75)
    elif MODE == MATLAB:
        w = _cubic((rel - (k + 1)) / widen, -0.5)
    else:
        w = _aa_filter((k - rel + 0.5) / widen, MODE)
    return _source(first + k, n_in, MODE), tl.where(live, w, 0.0)


@triton.jit
def _normaliser(first, count, rel, n_in, widen, TAPS, MODE: tl.constexpr):
    """1 / the sum of each output's TAPS weights along one axis (0 for outputs past the
    end, which have no taps: not 1 / 0)."""
    total = tl.zeros(first.shape, tl.float32)
    for k in range(0, TAPS):
        _, w = _tap(k, first, count, rel, n_in, widen, MODE)
        total += w
    return tl.where(total != 0.0, 1.0 / tl.where(total != 0.0, total, 1.0), 0.0)


@triton.jit
def _row_taps(line, row_ptr, first, count, rel, W, widen, TAPS, sxw, c, PRO: tl.constexpr, pro_args,
              MODE: tl.constexpr, OFF64: tl.constexpr):
    """``line`` plus the row pass's TAPS weighted, gathered pixels of the rows at
    ``row_ptr`` (through the prologue), in tap order."""
    for k in range(0, TAPS):
        cx, wx = _tap(k, first, count, rel, W, widen, MODE)
        v = pointwise.apply_chain(pixels.load(row_ptr + offset(cx, sxw, OFF64)), c, PRO, pro_args)
        line += tl.where(wx != 0.0, wx * v, 0.0)  # (0 * NaN is NaN: a tap of weight 0 reads nothing)
    return line


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
    fy, ny, py = _axis(rows, H, HO, scale_y, scale_y_lo, support_y, MODE, ALIGN)
    fx, nx, px = _axis(cols, W, WO, scale_x, scale_x_lo, support_x, MODE, ALIGN)
    if NORMALISE:
        norm_y = _normaliser(fy, ny, py, H, widen_y, TAPS_Y, MODE)
        norm_x = _normaliser(fx, nx, px, W, widen_x, TAPS_X, MODE)
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
        row_ptr = base + offset(_source(src, H, MODE), sxh, OFF64)
        line = _row_taps(tl.zeros((JC, BW), dtype=tl.float32), row_ptr, fx, nx, px, W, widen_x, TAPS_X, sxw, c,
                         PRO, pro_args, MODE, OFF64)
        if NORMALISE:
            line = line * norm_x
        if CLAMP_ROWS:  # the row pass of an integer image is an integer image in PIL and torch's CPU path
            line = tl.minimum(tl.maximum(line, 0.0), 1.0)
        _, wy = _tap(j0 + tl.arange(0, JC)[None, :] - fy, fy, ny, py, H, widen_y, MODE)
        if products.has_non_finite(line):  # (rare) kept off the product, counted per output
            nan_hits, up_hits, down_hits = products.non_finite_hits(wy, line, nan_hits, up_hits, down_hits, True)
            line = products.finite_part(line)
        acc = tl.dot(wy, line, acc, input_precision=PRECISION)
    if NORMALISE:
        acc = acc * norm_y
    acc = products.mark_non_finite(acc, nan_hits, up_hits, down_hits)
    acc = pointwise.apply_epilogue(acc, acc, c, EPI, epi_args)
    mask = (rows < HO) & (cols < WO)
    offs = offset(rows, syh, OFF64) + offset(cols, syw, OFF64)
    pixels.store(Y + b * syb + c * syc + offs, acc, mask)


# ---- two passes through memory: downscales by 2 or more ------------------------------------

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
    fx, nx, px = _axis(cols, W, WO, scale_x, scale_x_lo, support_x, MODE, ALIGN)
    # (rows past the image read the last one: the loads stay inside, the store is masked)
    row_ptr = X + b * sxb + c * sxc + offset(tl.minimum(rows, H - 1), sxh, OFF64)
    line = _row_taps(tl.zeros((BW, BR), dtype=tl.float32), row_ptr, fx, nx, px, W, widen_x, TAPS_X, sxw, c, PRO,
                     pro_args, MODE, OFF64)
    if NORMALISE:
        line = line * _normaliser(fx, nx, px, W, widen_x, TAPS_X, MODE)
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
    fy, ny, py = _axis(rows, H, HO, scale_y, scale_y_lo, support_y, MODE, ALIGN)
    base = T + b * stb + c * stc + cols
    live = cols < WO
    acc = tl.zeros((BH, BW), dtype=tl.float32)
    for k0 in range(0, TAPS_Y, KC):
        for u in tl.static_range(KC):  # (taps from TAPS_Y on have weight 0 and read a row inside)
            ry, wy = _tap(k0 + u, fy, ny, py, H, widen_y, MODE)
            v = tl.load(base + offset(ry, sth, OFF64), live)
            acc += tl.where(wy != 0.0, wy * v, 0.0)
    if NORMALISE:
        acc = acc * _normaliser(fy, ny, py, H, widen_y, TAPS_Y, MODE)
    acc = pointwise.apply_epilogue(acc, acc, c, EPI, epi_args)
    mask = (rows < HO) & (cols < WO)
    pixels.store(Y + b * syb + c * syc + offset(rows, syh, OFF64) + offset(cols, syw, OFF64), acc, mask)


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
    fy, ny, py = _axis(rows, H, HO, scale_y, scale_y_lo, 0.0, MODE, ALIGN)
    fx, nx, px = _axis(cols, W, WO, scale_x, scale_x_lo, 0.0, MODE, ALIGN)
    base = X + b * sxb + c * sxc
    acc = tl.zeros((BH, BW), dtype=tl.float32)
    for i in tl.static_range(TAPS):
        ry, wy = _tap(i, fy, ny, py, H, 1.0, MODE)
        row_ptr = base + offset(ry, sxh, OFF64)
        line = tl.zeros((BH, BW), dtype=tl.float32)
        for k in tl.static_range(TAPS):
            cx, wx = _tap(k, fx, nx, px, W, 1.0, MODE)
            v = pointwise.apply_chain(pixels.load(row_ptr + offset(cx, sxw, OFF64)), c, PRO, pro_args)
            line += tl.where(wx != 0.0, wx * v, 0.0)  # (0 * NaN is NaN: a tap of weight 0 reads nothing)
        if CLAMP_ROWS:  # as resample_kernel's row pass
            line = tl.minimum(tl.maximum(line, 0.0), 1.0)
        acc += tl.where(wy != 0.0, wy * line, 0.0)
    acc = pointwise.apply_epilogue(acc, acc, c, EPI, epi_args)
    mask = (rows < HO) & (cols < WO)
    pixels.store(Y + b * syb + c * syc + offset(rows, syh, OFF64) + offset(cols, syw, OFF64), acc, mask)


# ---- ratios F / D: constant phase weights, rows slid down a column strip ---------------------

# ``phases_kernel`` resamples an axis by F outputs per D source pixels; F is one of these
# (the output phases interleave with tl.join: powers of two), D any that MAX_SLOTS allows.
GROW_FACTORS = (1, 2, 4)
# Blocks of source pixels a lane reads on each side (2 M + 1 in all; doubling with
# Lanczos-3 needs 3), and source pixels a lane reads a row (the blocks times D, padded to
# a power of two): wider kernels (Lanczos shrinking by 4: 28, a 35 s compile offline and
# 224 registers) take the general kernel.
MAX_REACH, MAX_SLOTS = 3, 20
# GPU strips by the source rows a step reads (DY): threads per strip, steps per program,
# warps, source bytes a thread loads a row (its lanes: ``_lanes_per_thread``), and whether
# each step loads the next one's rows before its sums (PRE). Swept on the H200 (eager ms,
# PERFORMANCE.md): x2 uint8 0.031 at 64 x 16 x 2 with four lanes a thread (one: 0.036-0.040);
# x2 float32 0.045-0.046 at 64 x 16 x 2 or 128 x 32 x 4; PRE took 4K -> 1080p antialiased
# from 0.061 to 0.055 (128 x 16 x 4) and imresize x1/4 from 0.083-0.095 to 0.060 (64 x 16 x 2).
STRIPS = {1: (64, 16, 2, 4, False), 2: (128, 16, 4, 4, True), 3: (64, 16, 2, 4, False), 4: (64, 16, 2, 4, True)}


@triton.jit
def _interleaved(ph):
    """N vectors of BW values (N a power of two) -> a (BW, N) block, vector o in column o:
    an output row in memory order, each thread holding N neighbouring values, so that its
    store is one contiguous (vector) store. Joining vectors o and o + N / 2 and repeating
    on the halves interleaves them into that order without a permutation (a 1-D reshape
    went through shared memory and scalar stores)."""
    level = (ph[0][:, None],) if len(ph) == 1 else ph
    for _ in tl.static_range(4):  # (log2 N <= 4 levels)
        if len(level) > 1:
            joined = ()
            for o in tl.static_range(len(level) // 2):
                j = tl.join(level[o], level[o + len(level) // 2])
                joined = joined + (tl.reshape(j, (j.shape[0], j.numel // j.shape[0])),)
            level = joined
    return level[0]


@triton.jit
def _columns_of(block, S: tl.constexpr):
    """A (BW, S) block -> its S columns as (BW, 1) blocks, in order (the inverse of
    ``_interleaved``: splitting off even and odd columns and keeping the evens first)."""
    level = (block,)
    for _ in tl.static_range(4):  # (log2 S <= 4 levels)
        if len(level) < S:
            evens = ()
            odds = ()
            for t in tl.static_range(len(level)):
                a, b = tl.split(tl.reshape(level[t], (block.shape[0], level[t].shape[1] // 2, 2)))
                evens = evens + (a,)
                odds = odds + (b,)
            level = evens + odds
    return level


@triton.jit
def _entries(T: tl.constexpr, r: tl.constexpr, s0: tl.constexpr, D: tl.constexpr, DP: tl.constexpr):
    """The entries T[r][s0 .. s0 + D - 1] of a constant table as (1, DP), zero-padded
    to the power of two DP."""
    q = tl.arange(0, DP)[None, :]
    v = tl.zeros((1, DP), tl.float32)
    for i in tl.static_range(D):
        v = tl.where(q == i, T[r][s0 + i], v)
    return v


@triton.jit
def _lane_weights(lanes, n_lanes, T: tl.constexpr, p: tl.constexpr, b: tl.constexpr, E: tl.constexpr,
                  F: tl.constexpr, D: tl.constexpr, DP: tl.constexpr):
    """The (BW, DP) weights of phase p on block b for each lane: ``phase_tables``' interior
    row, or its row for the lanes within E of either edge."""
    w = tl.zeros((lanes.shape[0], DP), tl.float32) + _entries(T, p, b * D, D, DP)
    for e in tl.static_range(E):
        w = tl.where((lanes == e)[:, None], _entries(T, (1 + e) * F + p, b * D, D, DP), w)
        w = tl.where((lanes == n_lanes - 1 - e)[:, None], _entries(T, (1 + E + e) * F + p, b * D, D, DP), w)
    return w


@triton.jit
def _load_rows(base, r0, n: tl.constexpr, H, sxh, offs, OFF64: tl.constexpr):
    """Source rows r0 .. r0 + n - 1 (clamped into the image: their weights are 0 or fold) as
    loaded, one tuple of blocks each (``offs``: ``phases_kernel``'s)."""
    rows = ()
    for q in tl.static_range(n):
        row_ptr = base + offset(tl.minimum(tl.maximum(r0 + q, 0), H - 1), sxh, OFF64)
        blocks = ()
        for i in tl.static_range(len(offs)):
            blocks = blocks + (tl.load(row_ptr + offs[i]),)
        rows = rows + (blocks,)
    return rows


@triton.jit
def _row_phases(raw, wx, c, PRO: tl.constexpr, pro_args, NZ: tl.constexpr, MIXED: tl.constexpr,
                F: tl.constexpr, D: tl.constexpr, DP: tl.constexpr, M: tl.constexpr, S: tl.constexpr,
                CLAMP: tl.constexpr):
    """One source row's horizontal phases, a tuple of S F (BW,) vectors (slot s, phase p at
    s F + p), from its blocks as loaded (``_load_rows``: M blocks of D source columns before
    each thread's S lanes, their S blocks in one load, M after). Slot s's phase p is the
    per-lane weighted sum over blocks s .. s + 2 M (a block no phase weighs is dead code the
    compiler drops). A weight that is 0 in some lanes (``MIXED``) reads nothing there: 0 *
    NaN is NaN; nor do the slots that pad a block of D to DP (they reread its last pixel)."""
    BX: tl.constexpr = 2 * M + 1
    blocks = ()
    for i in tl.static_range(BX):
        vb = pointwise.apply_chain(pixels.to_float(raw[i]), c, PRO, pro_args)
        if DP != D:
            vb = tl.where(tl.arange(0, DP)[None, :] < D, vb, 0.0)
        if i == M:
            blocks = blocks + _columns_of(vb, S)
        else:
            blocks = blocks + (vb,)
    out = ()
    for s in tl.static_range(S):
        for p in tl.static_range(F):
            acc = tl.zeros(blocks[0].shape, tl.float32)
            for i in tl.static_range(BX):
                w = wx[(s * F + p) * BX + i]
                if NZ[p][i]:
                    if MIXED[p][i]:
                        acc += tl.where(w != 0.0, w * blocks[s + i], 0.0)
                    else:
                        acc += w * blocks[s + i]
            h = tl.sum(acc, axis=1)
            if CLAMP:
                h = tl.minimum(tl.maximum(h, 0.0), 1.0)
            out = out + (h,)
    return out


@triton.jit
def _column(full, T: tl.constexpr, r: tl.constexpr, o: tl.constexpr, ROWS: tl.constexpr):
    """Column o of the combination of the window's rows with the constants T[r] (zero
    weights skipped when compiling)."""
    acc = tl.zeros(full[0][0].shape, tl.float32)
    for i in tl.static_range(ROWS):
        if T[r][i] != 0.0:
            acc += T[r][i] * full[i][o]
    return acc


@triton.jit
def _edge_column(full, k, n_steps, T: tl.constexpr, q: tl.constexpr, o: tl.constexpr, E: tl.constexpr,
                 F: tl.constexpr, ROWS: tl.constexpr):
    """``_column`` for step k within E of either edge: its row of T, chosen at run time;
    a weight of 0 reads nothing."""
    acc = tl.zeros(full[0][0].shape, tl.float32)
    for i in tl.static_range(ROWS):
        w = T[q][i]
        for e in tl.static_range(E):
            w = tl.where(k == e, T[(1 + e) * F + q][i], w)
            w = tl.where(k == n_steps - 1 - e, T[(1 + E + e) * F + q][i], w)
        acc += tl.where(w != 0.0, w * full[i][o], 0.0)
    return acc


@triton.jit
def phases_kernel(X, Y, C, H, W, HO, WO, sxb, sxc, sxh, sxw, syb, syc, syh, syw,
                  PRO: tl.constexpr, pro_args, EPI: tl.constexpr, epi_args,
                  TY: tl.constexpr, TX: tl.constexpr, NZX: tl.constexpr, MIXX: tl.constexpr,
                  FY: tl.constexpr, FX: tl.constexpr, DY: tl.constexpr, DX: tl.constexpr, DXP: tl.constexpr,
                  MY: tl.constexpr, MX: tl.constexpr, EY: tl.constexpr, EX: tl.constexpr,
                  CLAMP_ROWS: tl.constexpr, OFF64: tl.constexpr, BW: tl.constexpr, SEG: tl.constexpr,
                  S: tl.constexpr, PRE: tl.constexpr):
    """Y (HO x WO) resampled from X (H x W) by a ratio per axis: F outputs per D source
    pixels (n_out / n_in = F / D in lowest terms). Then the weights are constants per
    output phase (``TY``, ``TX``: ``phase_tables``, the float64 reference's, with their own
    rows for the EY / EX lanes and steps nearest each edge, where taps fold or truncate).

    A lane is a block of D source columns and its F output columns; a step a block of D
    source rows and its F output rows. A program owns S BW lanes (S neighbouring lanes a
    thread) of SEG steps of one plane and marches down its steps ("row slide"): each step
    reads the DY new source rows it needs, each once, as contiguous blocks of DX columns
    per lane (DXP loaded: the power of two; their offsets clamped once per program, so no
    index math in the loop), turns each into its FX horizontal phases, and keeps the last
    2 MY + 1 blocks of rows in a loop-carried window; it then writes its FY output rows,
    FX S BW contiguous values each.

    A thread's S lanes (DX = 1, the lane count a multiple of S) read their S source pixels
    a row as one load and the MX blocks on each side as their own (clamped) loads, and
    write S FX contiguous outputs a row as one store: a uint8 thread of one lane loaded
    five bytes and stored two a row for its four outputs, and the instructions per output
    (address, conversion, store) bounded the kernel. With PRE a step loads the next step's
    rows before its sums, so that their latency overlaps the sums and the stores instead of
    stalling each step (the rows cost registers until they are used)."""
    tl.static_assert(S == 1 or DX == 1, "several lanes a thread read single source pixels")
    BX: tl.constexpr = 2 * MX + 1
    ROWS: tl.constexpr = (2 * MY + 1) * DY
    n_steps = HO // FY
    n_lanes = WO // FX
    b, c, k0, j0 = tile_origin(tl.program_id(0), C, n_steps, n_lanes, SEG, S * BW)
    base = X + b * sxb + c * sxc
    first = j0 + S * tl.arange(0, BW)  # each thread's first lane
    # Block offsets: blocks past the edge read the edge block (their weights are 0, or the
    # edge pixel's own where D = 1): clamping the start keeps a block contiguous, so it is one
    # load; the thread's own S blocks (the middle) are clamped as one (lanes past the last
    # read the last thread's).
    if DXP == DX:
        slots = tl.arange(0, DXP)[None, :]
    else:  # (the padded slots reread the last pixel; a clamped arange would make the loads scalar)
        slots = tl.minimum(tl.arange(0, DXP), DX - 1)[None, :]
    offs = ()
    for i in tl.static_range(BX):
        if i == MX:
            start = tl.minimum(DX * first, W - S * DX)
            offs = offs + (offset(start[:, None] + tl.arange(0, S)[None, :] + slots, sxw, OFF64),)
        else:  # block i's lane, relative to the first: -MX .. -1, then S .. S + MX - 1
            if i < MX:
                lane = first + (i - MX)
            else:
                lane = first + (i - MX + S - 1)
            start = tl.minimum(tl.maximum(DX * lane, 0), W - DX)
            offs = offs + (offset(start[:, None] + slots, sxw, OFF64),)
    wx = ()
    for s in tl.static_range(S):
        for p in tl.static_range(FX):
            for i in tl.static_range(BX):
                wx = wx + (_lane_weights(first + s, n_lanes, TX, p, i, EX, FX, DX, DXP),)
    out_cols = FX * first[:, None] + tl.arange(0, S * FX)[None, :]
    out_offs = offset(out_cols, syw, OFF64)
    out_mask = out_cols < WO
    out_base = Y + b * syb + c * syc
    # the window: source rows DY (k + m) + q for m = -MY .. MY - 1 (the newest block is read
    # by each step)
    above = _load_rows(base, DY * (k0 - MY), ROWS - DY, H, sxh, offs, OFF64)
    win = ()
    for i in tl.static_range(ROWS - DY):
        win = win + (_row_phases(above[i], wx, c, PRO, pro_args, NZX, MIXX, FX, DX, DXP, MX, S, CLAMP_ROWS),)
    if PRE:
        new = _load_rows(base, DY * (k0 + MY), DY, H, sxh, offs, OFF64)
    for k in range(k0, tl.minimum(k0 + SEG, n_steps)):
        if not PRE:
            new = _load_rows(base, DY * (k + MY), DY, H, sxh, offs, OFF64)
        full = win
        for q in tl.static_range(DY):
            full = full + (_row_phases(new[q], wx, c, PRO, pro_args, NZX, MIXX, FX, DX, DXP, MX, S, CLAMP_ROWS),)
        if PRE:  # (past the last step: rows clamped into the image, read and unused)
            new = _load_rows(base, DY * (k + 1 + MY), DY, H, sxh, offs, OFF64)
        edge = (k < EY) | (k >= n_steps - EY)
        for q in tl.static_range(FY):
            y = _interleaved(_inner_row(full, TY, q, S * FX, ROWS))
            if EY > 0:
                if edge:  # (a uniform branch: the steps nearest the top and bottom weigh their own way)
                    y = _interleaved(_edge_row(full, k, n_steps, TY, q, EY, FY, S * FX, ROWS))
            y = pointwise.apply_epilogue(y, y, c, EPI, epi_args)
            # streamed: the upscaled output (4 times the input at x2) would otherwise evict
            # from the L2 the source rows that the next steps read (H200, x2 bicubic float32
            # 0.0431 -> 0.0406 ms, bilinear 0.0395 -> 0.0378; uint8 and the 4K -> 1080p
            # downscale within 1 %)
            pixels.store_streaming(out_base + offset(FY * k + q, syh, OFF64) + out_offs, y, out_mask)
        win = full[DY:]


@triton.jit
def _inner_row(full, T: tl.constexpr, q: tl.constexpr, N: tl.constexpr, ROWS: tl.constexpr):
    """Output row phase q's N columns (a thread's lanes times their phases), inside
    (constant weights T[q])."""
    out = ()
    for o in tl.static_range(N):
        out = out + (_column(full, T, q, o, ROWS),)
    return out


@triton.jit
def _edge_row(full, k, n_steps, T: tl.constexpr, q: tl.constexpr, E: tl.constexpr, FY: tl.constexpr,
              N: tl.constexpr, ROWS: tl.constexpr):
    """``_inner_row`` for a step within E of either edge."""
    out = ()
    for o in tl.static_range(N):
        out = out + (_edge_column(full, k, n_steps, T, q, o, E, FY, ROWS),)
    return out


# ---- the gradient of integer-factor upsampling --------------------------------------------

# Modes whose weights, for n_out = f * n_in without align_corners, depend only on the output
# phase (o mod f) and whose borders clamp the taps into the image (replicate): torch's
# bilinear (its clamp of a negative source coordinate to 0 gives the same value as
# replicating pixel 0), bicubic, nearest, nearest-exact and area (both copy pixel o // f).
# (int codes: comparing with the constexpr codes costs microseconds a call on the host)
ADJOINT_MODES = frozenset(m.value for m in (NEAREST, NEAREST_EXACT, LINEAR, CUBIC, AREA))
# The adjoint's factors: 1 and 2 (at 4 its (BW, 4) gradient blocks spill: 255 registers and
# 10 s compiles with Triton 3.6; those gradients take the matrix products).
ADJOINT_FACTORS = (1, 2)
# The adjoint's GPU strip: threads, source rows per program, warps, source columns a thread
# (S: a float32 x2 thread loads its own 2 S gradient columns a row as S / 2 16-byte vectors,
# and 2 more on each side). S = 4 takes 71 registers (S = 8: 141) and 50 instructions a
# source pixel (S = 2: 64). H200, x2 bicubic of 1080p RGB: 52 us (2380 GB/s; S = 2 61-64,
# S = 8 65, S = 1 111; 32 source rows a program 67); one column a thread before: 76-84.
ADJOINT_STRIP = (64, 16, 2, 4)
# Source offsets a phase reads: -2 .. 2 around the source pixel o // f.
REACH: tl.constexpr = tl.constexpr(2)


def adjoint_factor(mode, n_in, n_out, scale, align_corners):
    """The integer factor f of an axis that ``upsample_phases_adjoint_kernel`` handles,
    else None."""
    if align_corners or mode not in ADJOINT_MODES:
        return None
    f = n_out // n_in
    return f if f in ADJOINT_FACTORS and n_out == f * n_in and scale * f == 1.0 else None


@functools.lru_cache(maxsize=None)
def adjoint_weights(plan):
    """For ``upsample_phases_adjoint_kernel``, from the forward's ``PhasePlan`` of the axis
    (D = 1; its interior rows, the reference's weights of output phase q over the source
    offsets -M .. M around o // F): rows k F + q, k = 0 inside, 1 for the first and 2 for
    the last source index, 3 and 4 what those two gather beyond the inside weights (rows 1
    and 2 less row 0, 0 for the positions outside the image, which read 0: the columns add
    them to the inside sum where needed); entry s the weight with which output phase q of
    source position i + s - 2 feeds source index i in the adjoint (one level of rows:
    Triton 3.6 indexes constexpr tables two deep at most). Inside, that is the one tap d =
    2 - s; clamping maps taps past a border onto the first or the last index only, so index
    0 gathers every tap d <= 2 - s and index n - 1 every tap d >= 2 - s (so n >= 2 on both
    axes)."""
    f, m = plan.F, plan.M
    assert m <= REACH.value, "the adjoint reads source offsets -2 .. 2"
    tap = lambda q, d: plan.table[q][d + m] if -m <= d <= m else 0.0
    inner = tuple(tuple(tap(q, 2 - s) for s in range(5)) for q in range(f))
    first = tuple(tuple(sum(tap(q, d) for d in range(-2, 3) if d <= 2 - s) for s in range(5)) for q in range(f))
    last = tuple(tuple(sum(tap(q, d) for d in range(-2, 3) if d >= 2 - s) for s in range(5)) for q in range(f))
    # what the first (last) index gathers beyond ``inner`` from positions in the image, s >= 2 (s <= 2)
    beyond = lambda edge, kept: tuple(tuple(edge[q][s] - inner[q][s] if kept(s) else 0.0 for s in range(5))
                                      for q in range(f))
    return inner + first + last + beyond(first, lambda s: s >= 2) + beyond(last, lambda s: s <= 2)


@triton.jit
def _adjoint_blocks(start, n: tl.constexpr, VEC: tl.constexpr):
    """Each thread's gradient columns start .. start + n - 1 (``start``: (BW,)) as (BW,
    VEC) blocks (one (BW, n) block where n <= VEC): a thread holds a block's VEC
    contiguous columns, one vector load where the columns' stride is 1."""
    if n <= VEC:
        blocks = (start[:, None] + tl.arange(0, n)[None, :],)
    else:
        blocks = ()
        for v in tl.static_range(n // VEC):
            blocks = blocks + (start[:, None] + (v * VEC + tl.arange(0, VEC))[None, :],)
    return blocks


@triton.jit
def _adjoint_gather(cols, WA: tl.constexpr, k: tl.constexpr, t: tl.constexpr, FX: tl.constexpr,
                    MX: tl.constexpr, S: tl.constexpr):
    """A thread's source column t (of its S) resampled along x with ``adjoint_weights``
    table k (constant weights, zero ones skipped): the sum over its taps s, q of the
    gradient column FX (t + s - 2) + q (relative to the thread's first source column),
    which is ``cols[FX (t + s - 2 + MX) + q]`` (``_adjoint_row``'s). A tap outside the
    thread's span has weight 0 inside; an edge row's tap there is outside the image."""
    acc = tl.zeros(cols[0].shape, tl.float32)
    for s in tl.static_range(5):
        if t + s - 2 + MX >= 0:
            if t + s - 2 < S + MX:
                for q in tl.static_range(FX):
                    if WA[k * FX + q][s] != 0.0:
                        acc += WA[k * FX + q][s] * cols[FX * (t + s - 2 + MX) + q]
    return acc


@triton.jit
def _adjoint_row(row_ptr, live, g_offs, g_mask, first, W, at_first, at_last, WX: tl.constexpr,
                 FX: tl.constexpr, MX: tl.constexpr, S: tl.constexpr):
    """One gradient row resampled by the adjoint along x, for each thread's S source columns
    first .. first + S - 1: a tuple of S (BW,) vectors. The thread loads its gradient
    columns FX (first - MX) .. FX (first + S + MX) - 1 (``g_offs``: its own FX S and the
    FX MX on each side, zero outside the image) once, as vectors, and splits them into
    one (BW,) vector per column, which the S sums share. Only the first and the last source
    columns gather more (the clamped taps): their programs (``at_first``, ``at_last``: a
    uniform branch) add those taps' sums where the column is theirs."""
    cols = ()
    for i in tl.static_range(len(g_offs)):
        block = tl.load(row_ptr + g_offs[i], g_mask[i] & live, other=0.0).to(tl.float32)
        split = _columns_of(block, block.shape[1])
        for o in tl.static_range(len(split)):
            cols = cols + (tl.reshape(split[o], (block.shape[0],)),)
    out = ()
    for t in tl.static_range(S):
        out = out + (_adjoint_gather(cols, WX, 0, t, FX, MX, S),)
    if at_first:
        out = (out[0] + tl.where(first == 0, _adjoint_gather(cols, WX, 3, 0, FX, MX, S), 0.0),) + out[1:]
    if at_last:
        edged = ()
        for t in tl.static_range(S):
            edged = edged + (out[t] + tl.where(first + t == W - 1, _adjoint_gather(cols, WX, 4, t, FX, MX, S), 0.0),)
        out = edged
    return out


@triton.jit
def _adjoint_rows(G, k, HO, sgh, g_offs, g_mask, first, W, at_first, at_last, WX: tl.constexpr,
                  FX: tl.constexpr, MX: tl.constexpr, S: tl.constexpr, FY: tl.constexpr, OFF64: tl.constexpr):
    """The FY gradient rows FY k + q (zero outside the output), each resampled along x."""
    rows = ()
    for q in tl.static_range(FY):
        r = FY * k + q
        rows = rows + (_adjoint_row(G + offset(r, sgh, OFF64), (r >= 0) & (r < HO), g_offs, g_mask, first, W,
                                    at_first, at_last, WX, FX, MX, S),)
    return rows


@triton.jit
def _adjoint_column(win, new, WA: tl.constexpr, k: tl.constexpr, FY: tl.constexpr, S: tl.constexpr):
    """Source row i of the adjoint, as a (BW, S) block (each thread's S columns, in
    order): the rows FY (i + s - 2) + q of the x-resampled gradient (``win`` holds s = 0 ..
    3, ``new`` s = 4) weighted by ``adjoint_weights`` table k (0 inside, 1 for the first
    row, 2 for the last)."""
    out = ()
    for t in tl.static_range(S):
        acc = tl.zeros(new[0][0].shape, tl.float32)
        for q in tl.static_range(FY):
            for s in tl.static_range(4):
                if WA[k * FY + q][s] != 0.0:
                    acc += WA[k * FY + q][s] * win[s][q][t]
            if WA[k * FY + q][4] != 0.0:
                acc += WA[k * FY + q][4] * new[q][t]
        out = out + (acc,)
    return _interleaved(out)


@triton.jit
def upsample_phases_adjoint_kernel(G, Y, C, H, W, HO, WO, sgb, sgc, sgh, sgw, syb, syc, syh, syw,
                                   WY: tl.constexpr, WX: tl.constexpr, FY: tl.constexpr, FX: tl.constexpr,
                                   MX: tl.constexpr, VEC: tl.constexpr, OFF64: tl.constexpr, BW: tl.constexpr,
                                   SEG: tl.constexpr, S: tl.constexpr):
    """The adjoint (transpose) of ``phases_kernel`` upsampling in torch's modes: Y (H x W)
    from the gradient G (HO = FY H x WO = FX W). Source pixel (i, j) gathers the output pixels that read it:
    along each axis the FX outputs of the five source positions around it (a strided
    correlation), with the replicated borders' clamped taps folded into the edge pixels.
    ``WY``/``WX``: ``adjoint_weights``; MX: the source positions a tap reaches along x
    (the forward plan's M); VEC: the gradient elements of a 16-byte load.

    The same row slide as the forward: a program owns S BW source columns (S neighbouring
    ones a thread) of SEG source rows; each step reads the FY gradient rows of one new
    source position, each thread its FX (S + 2 MX) columns of each as a few vector loads
    (a gradient element is loaded by its own thread and by a neighbour's halo, not once for
    each of the five source columns it feeds), resamples them along x with constant
    weights, keeps them for the next four steps, and writes each thread's S columns of
    source row i as one vector."""
    b, c, r0, j0 = tile_origin(tl.program_id(0), C, H, W, SEG, S * BW)
    first = j0 + S * tl.arange(0, BW)  # each thread's first source column
    g_cols = (_adjoint_blocks(FX * (first - MX), FX * MX, VEC) + _adjoint_blocks(FX * first, FX * S, VEC)
              + _adjoint_blocks(FX * (first + S), FX * MX, VEC))
    g_offs = ()
    g_mask = ()
    for o in tl.static_range(len(g_cols)):
        g_offs = g_offs + (offset(g_cols[o], sgw, OFF64),)
        g_mask = g_mask + ((g_cols[o] >= 0) & (g_cols[o] < WO),)
    at_first = j0 == 0
    at_last = j0 + S * BW >= W
    base = G + b * sgb + c * sgc
    y_cols = first[:, None] + tl.arange(0, S)[None, :]
    out = Y + b * syb + c * syc + offset(y_cols, syw, OFF64)
    # the window's rows (source positions r0 - 2 .. r0 + 1) come from the loop's first four
    # steps, which store nothing: one copy of the row code, not five
    zeros = ()
    for _ in tl.static_range(S):
        zeros = zeros + (tl.zeros((BW,), tl.float32),)
    rows = ()
    for _ in tl.static_range(FY):
        rows = rows + (zeros,)
    win = (rows, rows, rows, rows)
    for step in range(-4, tl.minimum(SEG, H - r0)):
        i = r0 + step  # (a tensor, also in the interpreter, whose loop indices are ints: ``offset`` casts it)
        new = _adjoint_rows(base, i + 2, HO, sgh, g_offs, g_mask, first, W, at_first, at_last, WX, FX, MX, S, FY,
                            OFF64)
        if i == 0:
            y = _adjoint_column(win, new, WY, 1, FY, S)
        elif i == H - 1:
            y = _adjoint_column(win, new, WY, 2, FY, S)
        else:
            y = _adjoint_column(win, new, WY, 0, FY, S)
        pixels.store(out + offset(i, syh, OFF64), y, (y_cols < W) & (step >= 0))
        win = (win[1], win[2], win[3], new)


def taps(mode, n_in, n_out, scale, antialias):
    """Taps per output along an axis (the loop bound), and the kernel's support and
    widening there."""
    widen = max(scale, 1.0) if (antialias or mode in WIDENED_MODES) else 1.0
    if mode in FIXED_TAPS:
        return FIXED_TAPS[mode], 0.0, 1.0
    if mode == AREA.value:
        return -(-n_in // n_out) + 1, 0.0, 1.0
    support = SUPPORT[mode] * widen
    if mode == MATLAB.value:
        return int(-(-2 * support // 1)) + 2, support, widen
    return 2 * int(-(-support // 1)) + 1, support, widen


def launch(x, y, mode, scale_y, scale_x, align_corners=False, antialias=False, clamp_rows=False, pro=((), ()),
           epi=((), ()), phases=None):
    """Resample 4-D ``x`` (B, C, H, W) into ``y`` (B, C, HO, WO) with mode code ``mode``
    and source steps ``scale_y``/``scale_x`` per output pixel; with ``phases``, a pair
    of ``PhasePlan`` (rows, columns) for integer factors, by ``phases_kernel``."""
    if phases is not None:
        return _launch_phases(x, y, phases, clamp_rows, pro, epi)
    B, C, H, W = x.shape
    HO, WO = y.shape[-2:]
    (sy, sy_lo), (sx, sx_lo) = _float32_pair(scale_y), _float32_pair(scale_x)
    if mode in FIXED_TAPS:
        bh, bw, warps = (pow2_at_least(HO, 1, 64), pow2_at_least(WO, 16, 128), 1) if interpreting() else DIRECT_TILE
        args = (x, y, C, H, W, HO, WO, sy, sx, sy_lo, sx_lo, *x.stride(), *y.stride(), pro[0], pro[1], epi[0], epi[1])
        meta = dict(MODE=mode, ALIGN=bool(align_corners), CLAMP_ROWS=bool(clamp_rows), TAPS=FIXED_TAPS[mode],
                    OFF64=needs_int64(x, y))
        return launch_kernel(direct_kernel, lambda m: (programs(B * C, HO, WO, bh, bw),), args, meta, x,
                             tile_config(BH=bh, BW=bw, num_warps=warps))
    ty, sup_y, wid_y = taps(mode, H, HO, scale_y, antialias)
    tx, sup_x, wid_x = taps(mode, W, WO, scale_x, antialias)
    normalise = mode in NORMALISED_MODES
    if two_pass(x, HO, WO, scale_y, scale_x):
        return _launch_two_pass(x, y, mode, (sy, sy_lo, sup_y, wid_y, ty), (sx, sx_lo, sup_x, wid_x, tx),
                                align_corners, normalise, clamp_rows, pro, epi)
    if interpreting():  # one tile and one chunk of source rows per plane where it fits
        bh, bw = pow2_at_least(HO, 16, 64), pow2_at_least(WO, 16, 128)
        jc = pow2_at_least(int(bh * scale_y) + ty + 1, 16, 128)
    else:
        big = programs(B * C, HO, WO, TILE[0], TILE[1]) >= SMALL_OUTPUT_PROGRAMS
        bh, bw, jc, warps = TILE if big else SMALL_TILE
    args = (x, y, C, H, W, HO, WO, sy, sx, sy_lo, sx_lo, float(sup_y), float(sup_x), float(wid_y),
            float(wid_x), *x.stride(), *y.stride(), ty, tx, pro[0], pro[1], epi[0], epi[1])
    meta = dict(MODE=mode, ALIGN=bool(align_corners), NORMALISE=normalise, CLAMP_ROWS=bool(clamp_rows),
                PRECISION="ieee" if interpreting() else "tf32x3", OFF64=needs_int64(x, y))
    launch_kernel(resample_kernel, lambda m: (programs(B * C, HO, WO, bh, bw),), args, meta, x,
                  tile_config(BH=bh, BW=bw, JC=jc, num_warps=1 if interpreting() else warps))


def two_pass(x, HO, WO, scale_y, scale_x):
    """Whether ``launch`` resamples ``x`` (B, C, H, W) to HO x WO in two passes (``TWO_PASS``):
    never where the float32 intermediate (B, C, H, WO) would take more bytes than ``x``;
    by default where both axes shrink by TWO_PASS_SHRINK or more."""
    if TWO_PASS is False:
        return False
    if 4 * WO > x.shape[-1] * x.element_size():
        return False
    if TWO_PASS:
        return True
    return not interpreting() and scale_y >= TWO_PASS_SHRINK and scale_x >= TWO_PASS_SHRINK


def _launch_two_pass(x, y, mode, axis_y, axis_x, align_corners, normalise, clamp_rows, pro, epi):
    """``launch`` in two passes: the row pass into a float32 (B, C, H, WO) intermediate,
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
        br, bw, warps = ROWS_TILE
    args = (x, tmp, C, H, W, WO, sx, sx_lo, float(sup_x), float(wid_x), *x.stride(), *tmp.stride()[:3], tx,
            pro[0], pro[1])
    meta = dict(MODE=mode, ALIGN=bool(align_corners), NORMALISE=normalise, CLAMP_ROWS=bool(clamp_rows),
                OFF64=off64)
    launch_kernel(resample_rows_kernel, lambda m: (programs(B * C, H, WO, br, bw),), args, meta, x,
                  tile_config(BR=br, BW=bw, num_warps=warps))
    if interpreting():
        bh, bw, kc, warps = pow2_at_least(HO, 16, 64), pow2_at_least(WO, 16, 128), 4, 1
    else:
        bh, bw, kc, warps = COLUMNS_TILE
    args = (tmp, y, C, H, HO, WO, sy, sy_lo, float(sup_y), float(wid_y), *tmp.stride()[:3], *y.stride(), ty,
            epi[0], epi[1])
    meta = dict(MODE=mode, ALIGN=bool(align_corners), NORMALISE=normalise, OFF64=off64)
    launch_kernel(resample_columns_kernel, lambda m: (programs(B * C, HO, WO, bh, bw),), args, meta, x,
                  tile_config(BH=bh, BW=bw, KC=kc, num_warps=warps))


def _float32_pair(value):
    """``value`` as float32 ``hi`` plus float32 ``lo``, the rest: a kernel's float argument
    is float32, and the sum carries 48 bits."""
    hi = float(np.float32(value))
    return hi, float(np.float32(value - hi))


def _strip(x, steps, lanes, strip):
    """The GPU tile ``strip`` of a row-slide program on ``x`` ((threads, steps, warps, ...)),
    in the interpreter with one strip of every step per plane where it fits (the rest of
    the tile as on the GPU)."""
    if interpreted(x):
        return (pow2_at_least(lanes, 16, 128), steps, 1, *strip[3:])
    return strip


def _lanes_per_thread(itemsize, px, n_lanes, load_bytes):
    """S, the lanes a thread of ``phases_kernel`` takes: as many single source pixels (DX
    = 1) of ``itemsize`` bytes as fill ``load_bytes``, halved until S divides the lane
    count (a thread's lanes are then all inside or all past the end); else 1."""
    s = max(1, load_bytes // itemsize) if px.D == 1 else 1
    while n_lanes % s:
        s //= 2
    return s


@dataclasses.dataclass(frozen=True)
class PhasePlan:
    """One axis of ``phases_kernel``: F outputs per source pixel or one per D; blocks of D
    source pixels a lane reads on each side (M); lanes or steps at each edge with their own
    weights (E); the weight table (rows: the F interior phases, then F per edge lane from
    the first, then F per edge lane from the last; entries over the 2 M + 1 blocks of D);
    for the columns, per phase and block, whether any weight is nonzero and whether some
    are zero (``phase_tables`` in ``imgfilters/ops/resample.py`` builds them). Hashed
    once: the launch plans are memoised by it (``phases_plan``, ``adjoint_plan``), and its
    tables take microseconds to hash."""
    F: int
    D: int
    M: int
    E: int
    table: tuple
    nonzero: tuple
    mixed: tuple

    def __post_init__(self):
        object.__setattr__(self, "_hash", hash((self.F, self.D, self.M, self.E, self.table, self.nonzero,
                                                self.mixed)))

    def __hash__(self):
        return self._hash


@functools.lru_cache(maxsize=4096)
def phases_plan(py, px, planes, HO, WO, itemsize, strip, clamp, off64):
    """The launch of ``phases_kernel`` for ``planes`` planes resampled to HO x WO by the
    ``PhasePlan``s ``py`` (rows) and ``px`` (columns), source pixels of ``itemsize``
    bytes, in the strip ``strip`` (``_strip``)."""
    n_steps, n_lanes = HO // py.F, WO // px.F
    bw, seg, warps, load_bytes, pre = strip
    s = _lanes_per_thread(itemsize, px, n_lanes, load_bytes)
    meta = Meta(TY=py.table, TX=px.table, NZX=px.nonzero, MIXX=px.mixed, FY=py.F, FX=px.F, DY=py.D, DX=px.D,
                DXP=next_pow2(px.D), MY=py.M, MX=px.M, EY=py.E, EX=px.E, CLAMP_ROWS=clamp, OFF64=off64)
    return Plan(meta, tile_config(BW=bw, SEG=seg, S=s, PRE=pre, num_warps=warps),
                (programs(planes, n_steps, n_lanes, seg, s * bw),))


def _launch_phases(x, y, phases, clamp_rows, pro, epi):
    """``launch`` for integer factors (``PhasePlan`` rows, columns)."""
    B, C, H, W = x.shape
    HO, WO = y.shape[-2:]
    py, px = phases
    plan = phases_plan(py, px, B * C, HO, WO, x.element_size(), _strip(x, HO // py.F, WO // px.F, STRIPS[py.D]),
                       bool(clamp_rows), needs_int64(x, y))
    args = (x, y, C, H, W, HO, WO, *x.stride(), *y.stride(), pro[0], pro[1], epi[0], epi[1])
    launch_kernel(phases_kernel, plan.grid, args, plan.meta, x, plan.tile)


@functools.lru_cache(maxsize=4096)
def adjoint_plan(py, px, planes, H, W, itemsize, strip, off64):
    """The launch of ``upsample_phases_adjoint_kernel`` for the forward's ``PhasePlan``s
    ``py`` (rows) and ``px`` (columns): the gradient of ``planes`` H x W source planes, read
    in vectors of 16 bytes of ``itemsize``, in the strip ``strip`` (``_strip``)."""
    threads, seg, warps, s = strip
    meta = Meta(WY=adjoint_weights(py), WX=adjoint_weights(px), FY=py.F, FX=px.F, MX=px.M,
                VEC=max(1, 16 // itemsize), OFF64=off64)
    return Plan(meta, tile_config(BW=threads, SEG=seg, S=s, num_warps=warps),
                (programs(planes, H, W, seg, s * threads),))


def launch_adjoint(g, y, phases):
    """The gradient ``y`` (B, C, H, W) of ``phases_kernel`` upsampling from ``g`` (B, C, fy H,
    fx W) by the ``PhasePlan`` pair ``phases`` (rows, columns): D = 1, factors in
    ADJOINT_FACTORS, torch's clamping modes (ADJOINT_MODES), H and W at least 2."""
    B, C, H, W = y.shape
    py, px = phases
    plan = adjoint_plan(py, px, B * C, H, W, g.element_size(),
                        _strip(g, H, -(-W // ADJOINT_STRIP[3]), ADJOINT_STRIP), needs_int64(g, y))
    launch_kernel(upsample_phases_adjoint_kernel, plan.grid, (g, y, C, H, W, *g.shape[-2:], *g.stride(), *y.stride()),
                  plan.meta, g, plan.tile)
