"""Separable 2-D correlation in one launch, three kernels by radius.

``strip_kernel`` (vertical radius <= ``RING_MAX``, every filter the musts name): a program
owns a strip of ``T*S`` output columns (``S`` pixels per lane) and ``SEG`` output rows and
marches down its input rows once. Each input row's horizontal result is computed from
registers (narrow filters: each lane loads the blocks of ``S`` pixels around its own with
vector loads and splits them) or from shifted L1 loads (wide filters), then added into the
``2*RY`` pending output rows, a tuple of registers shifted by one slot per row; the row it
completes is stored. No scratch, each pixel read from memory once per strip, and every
loop over rows and taps is a run-time loop: only the ``2*RY + 1`` pending-row updates
(and the narrow filters' horizontal taps) are unrolled, which keeps compiles short.

``product_kernel`` (the larger radius in ``PRODUCT_RADII``, 20 to 32: where the strip
would read its taps as shifted L1 loads): the same march down a strip, 64 rows at a time,
with both passes as banded matrix products on the tensor cores (tf32x3).

``separable_kernel`` (taller filters, up to 127 taps): output tiles of ``BH x BW``; the
horizontal pass of the tile's rows goes to a per-program scratch slot (L1/L2-resident,
capped at the output's size), then after a barrier the vertical pass reads it back
shifted by whole rows. The pending rows of a 127-tap filter would not fit in registers.

The output grid may be larger than the input and start before it (``OY``, ``OX``): the
adjoint used by autograd evaluates the transposed filter on the zero-extended gradient.
"""
import dataclasses
import functools

import torch
import triton
import triton.language as tl

from .core import borders, neighbourhood, pixels, pointwise, products
from .core.launch import Meta, Plan, Tuning, launch as launch_kernel, tile_config
from .core.tiling import (cdiv, interpreted, interpreting, needs_int64, next_pow2, offset, pow2_at_least, programs,
                          size_class, sm_count, tile_origin)

MAX_RADIUS = 63  # 127 taps
# separable_kernel's horizontal tap loop is unrolled up to this many taps and runs as a loop
# beyond (the taps' sum, a scalar once per tile, is always a loop). Unrolled, 5 and 15 taps
# ran 1.3x and 1.09x faster on the H200; but LLVM took 14-18 s to compile one variant of
# 31 taps and 80-100 s of 127, and the unrolled loads spill registers.
UNROLL_TAPS = tl.constexpr(15)


@triton.jit
def _row_pass(x_base, rows, in_col0, W, sxh, border_value, c, TX,
              PRO: tl.constexpr, pro_args, interior, RX: tl.constexpr, SXW: tl.constexpr,
              BORDER: tl.constexpr, OFF64: tl.constexpr, BW: tl.constexpr):
    """sum_v TX[v] * PRO(X~[rows, in_col0 + j + v - RX]) for j < BW (``rows`` already
    remapped; rows outside the image are the caller's business)."""
    j = tl.arange(0, BW)
    row_off = offset(rows, sxh, OFF64)[:, None]
    acc = tl.zeros((rows.shape[0], BW), dtype=tl.float32)
    scale = neighbourhood.linear_scale(x_base.dtype.element_ty, PRO)  # folded into the taps (a scalar each)
    if interior:
        ptrs = x_base + (row_off + offset(in_col0 - RX + j, SXW, OFF64)[None, :])
        if 2 * RX + 1 <= UNROLL_TAPS:
            for v in tl.static_range(2 * RX + 1):
                acc += _interior_tap(ptrs, v, TX, scale, c, PRO, pro_args, SXW, BORDER)
        else:
            for v in range(2 * RX + 1):
                acc += _interior_tap(ptrs, v, TX, scale, c, PRO, pro_args, SXW, BORDER)
    else:
        if 2 * RX + 1 <= UNROLL_TAPS:
            for v in tl.static_range(2 * RX + 1):
                acc += _border_tap(x_base, row_off, in_col0 + j + (v - RX), v, W, border_value, TX, scale, c,
                                   PRO, pro_args, SXW, BORDER, OFF64)
        else:
            for v in range(2 * RX + 1):
                acc += _border_tap(x_base, row_off, in_col0 + j + (v - RX), v, W, border_value, TX, scale, c,
                                   PRO, pro_args, SXW, BORDER, OFF64)
    return acc


@triton.jit
def _interior_tap(ptrs, v, TX, scale, c, PRO: tl.constexpr, pro_args, SXW: tl.constexpr, BORDER: tl.constexpr):
    """Tap ``v`` of the horizontal pass on a tile whose columns need no border."""
    return (tl.load(TX + v) * scale) * neighbourhood.load(ptrs + v * SXW, None, 0.0, c, PRO, pro_args,
                                                         neighbourhood.LINEAR, BORDER)


@triton.jit
def _border_tap(x_base, row_off, cols, v, W, border_value, TX, scale, c, PRO: tl.constexpr, pro_args,
                SXW: tl.constexpr, BORDER: tl.constexpr, OFF64: tl.constexpr):
    """Tap ``v`` of the horizontal pass reading columns ``cols`` through the border."""
    ptrs = x_base + (row_off + offset(borders.remap(cols, W, BORDER), SXW, OFF64)[None, :])
    x = neighbourhood.load(ptrs, borders.inside(cols, W)[None, :], border_value / scale, c, PRO, pro_args,
                           neighbourhood.LINEAR, BORDER)
    return (tl.load(TX + v) * scale) * x


@triton.jit
def _rows(first, count: tl.constexpr, H, BORDER: tl.constexpr):
    """Remapped row indices first .. first + count and whether each lies in the image."""
    r = first + tl.arange(0, count)
    return borders.remap(r, H, BORDER), borders.inside(r, H)


@triton.jit
def separable_kernel(X, Y, S, TX, TY, B, C, H, W, HO, WO, OY, OX,
                     sxb, sxc, sxh, syb, syc, syh, border_value,
                     PRO: tl.constexpr, pro_args, EPI: tl.constexpr, epi_args,
                     RX: tl.constexpr, RY: tl.constexpr, HALO: tl.constexpr,
                     SXW: tl.constexpr, SYW: tl.constexpr, BORDER: tl.constexpr,
                     OFF64: tl.constexpr, SLOT: tl.constexpr, SIZE_CLASS,
                     BH: tl.constexpr, BW: tl.constexpr):
    """Y[b, c, i, j] = EPI(sum_{u,v} TY[u] TX[v] PRO(X~[b, c, i+OY+u-RY, j+OX+v-RX])),
    X~ being X extended by the border, for outputs (i, j) in [0, HO) x [0, WO).
    ``S`` holds ``SLOT`` float32 per program; ``SIZE_CLASS`` only feeds the autotune key."""
    slot = S + tl.program_id(0).to(tl.int64) * SLOT
    i = tl.arange(0, BH)
    j = tl.arange(0, BW)
    tiles = B * C * tl.cdiv(HO, BH) * tl.cdiv(WO, BW)
    for t in range(tl.program_id(0), tiles, tl.num_programs(0)):
        b, c, h0, w0 = tile_origin(t, C, HO, WO, BH, BW)
        x_base = X + b * sxb + c * sxc
        in_col0 = w0 + OX
        interior = (in_col0 - RX >= 0) & (in_col0 + BW + RX <= W)

        # 1. horizontal pass of rows h0+OY-RY .. +BH (+HALO) into the scratch slot
        r, ok = _rows(h0 + OY - RY, BH, H, BORDER)
        acc = _row_pass(x_base, r, in_col0, W, sxh, border_value, c, TX, PRO, pro_args,
                        interior, RX, SXW, BORDER, OFF64, BW)
        if BORDER == borders.CONSTANT:
            acc = tl.where(ok[:, None], acc, border_value * _tap_sum(TX, RX))
        tl.store(slot + i[:, None] * BW + j[None, :], acc)
        if RY > 0:
            r, ok = _rows(h0 + OY - RY + BH, HALO, H, BORDER)
            acc = _row_pass(x_base, r, in_col0, W, sxh, border_value, c, TX, PRO, pro_args,
                            interior, RX, SXW, BORDER, OFF64, BW)
            if BORDER == borders.CONSTANT:
                acc = tl.where(ok[:, None], acc, border_value * _tap_sum(TX, RX))
            h = tl.arange(0, HALO)
            tl.store(slot + (BH + h)[:, None] * BW + j[None, :], acc)
        tl.debug_barrier()

        # 2. vertical pass: whole-row shifts of the slot
        y = tl.zeros((BH, BW), dtype=tl.float32)
        for u in range(2 * RY + 1):  # RY > RING_MAX here: never unrolled
            y += tl.load(TY + u) * tl.load(slot + (i + u)[:, None] * BW + j[None, :])
        tl.debug_barrier()  # the slot is rewritten by the next tile

        _store_tile(x_base, Y + b * syb + c * syc, h0 + i, w0 + j, y, H, W, HO, WO, OY, OX, sxh, syh, c, PRO, pro_args,
                    EPI, epi_args, SXW, SYW, BORDER, OFF64)


@triton.jit
def _store_tile(x_base, y_base, out_rows, out_cols, y, H, W, HO, WO, OY, OX, sxh, syh, c, PRO: tl.constexpr,
                pro_args, EPI: tl.constexpr, epi_args, SXW: tl.constexpr, SYW: tl.constexpr, BORDER: tl.constexpr,
                OFF64: tl.constexpr):
    """Store the 2-D tile ``y`` of outputs (``out_rows``, ``out_cols``) through the epilogue,
    whose ``x_in`` is the prologue of the input pixel at (row + OY, column + OX)."""
    if len(EPI) > 0:
        xr = borders.remap(out_rows + OY, H, BORDER)
        xc = borders.remap(out_cols + OX, W, BORDER)
        x_in = neighbourhood.load(x_base + (offset(xr, sxh, OFF64)[:, None] + offset(xc, SXW, OFF64)[None, :]), None,
                                  0.0, c, PRO, pro_args, neighbourhood.UNIT, BORDER)
        y = pointwise.apply_epilogue(y, x_in, c, EPI, epi_args)
    mask = (out_rows < HO)[:, None] & (out_cols < WO)[None, :]
    pixels.store(y_base + (offset(out_rows, syh, OFF64)[:, None] + offset(out_cols, SYW, OFF64)[None, :]), y, mask)


@triton.jit
def _tap_sum(TX, RX: tl.constexpr):
    """Sum of the horizontal taps: the horizontal pass of a constant row."""
    s = 0.0
    for v in range(2 * RX + 1):
        s += tl.load(TX + v)
    return s


@triton.jit
def unsharp(y, x_in, channel, amount, threshold):
    """Epilogue of unsharp masking: y is the blur, x_in the pixel."""
    detail = x_in - y
    return tl.where(tl.abs(detail) >= threshold, x_in + amount * detail, x_in)


def halo_rows(ry: int) -> int:
    """Rows computed below a tile for the vertical halo: a power of two >= 2*RY."""
    return next_pow2(2 * ry) if ry > 0 else 1


def scratch_tiles(meta):
    """``TILES`` without those shorter than half the halo (the halo rows would dominate
    the work); the first is the default."""
    halo = halo_rows(meta["RY"])
    kept = [t for t in TILES if t["BH"] >= halo // 2]
    return [tile_config(**t) for t in kept or [max(TILES, key=lambda t: t["BH"])]]


# Candidate tiles, and how many programs of each fit on one SM: the register count bounds
# residency, and a persistent grid larger than what is resident runs as extra waves.
# Registers as ptxas reports them for sm_90 with the JIT's specialisation (aligned
# pointers), the worse of float32 and uint8, 15 taps: 255, 80 and 105 (31 taps, when they
# were still unrolled: 255, 128, 163). The unrolled tap loop hoists its loads, so 8 pixels
# a thread is what keeps a tile near 100 registers; 16 (the 970f89a set, measured in
# PERFORMANCE.md) reached 166-255.
TILES = [dict(BH=64, BW=32, num_warps=8), dict(BH=32, BW=64, num_warps=8), dict(BH=16, BW=128, num_warps=4)]
RESIDENT_PER_SM = {(64, 32): 3, (32, 64): 2, (16, 128): 2}
# TILES[0] (the default) has the lowest registers at every tap count measured; 1.25x halo rows at 15 taps
scratch_tuning = Tuning(scratch_tiles, key=["RX", "RY", "BORDER", "SXW", "SYW", "PRO", "EPI", "SIZE_CLASS"])


# ---- the register strip (vertical radius <= RING_MAX) ----------------------------------------

RING_MAX = 31  # vertical radius up to which the pending output rows fit in registers
INTERPRETER_RING_MAX = 15


@triton.jit
def _split(x, S: tl.constexpr):
    """The S columns of a (T, S) block as a tuple of S (T,) vectors, in order (registers:
    each lane holds its S pixels, so this moves nothing)."""
    if S == 1:
        return (tl.reshape(x, (x.shape[0],)),)
    elif S == 2:
        a, b = tl.split(x)
        return (a, b)
    else:  # S == 4
        even, odd = tl.split(tl.reshape(x, (x.shape[0], 2, 2)))
        p0, p2 = tl.split(even)
        p1, p3 = tl.split(odd)
        return (p0, p1, p2, p3)


@triton.jit
def _join(p, S: tl.constexpr):
    """Inverse of ``_split``: S (T,) vectors -> one (T, S) block."""
    if S == 1:
        return tl.reshape(p[0], (p[0].shape[0], 1))
    elif S == 2:
        return tl.join(p[0], p[1])
    else:
        return tl.reshape(tl.join(tl.join(p[0], p[2]), tl.join(p[1], p[3])), (p[0].shape[0], 4))


@triton.jit
def _row_from_registers(row_ptr, col_off, keep, c, tx, border_value, PRO: tl.constexpr, pro_args,
                        RX: tl.constexpr, BORDER: tl.constexpr, S: tl.constexpr, KB0: tl.constexpr,
                        NB: tl.constexpr, OXR: tl.constexpr):
    """Horizontal pass of one input row for a (T, S) block of outputs: each lane loads the
    NB blocks of S pixels around its own (one vector load each when the columns are
    contiguous and aligned), splits them in registers and applies every tap from
    registers. ``col_off[k]`` / ``keep[k]`` are block k's offsets and inside-mask (columns
    outside read the constant border's value)."""
    p = ()
    for k in tl.static_range(NB):
        x = neighbourhood.load(row_ptr + col_off[k], keep[k], border_value, c, PRO, pro_args, neighbourhood.LINEAR,
                               BORDER)
        p = p + _split(x, S)
    h = ()
    for s in tl.static_range(S):
        acc = tx[0] * p[OXR + s - RX - KB0 * S]
        for v in tl.static_range(1, 2 * RX + 1):
            acc += tx[v] * p[OXR + s + v - RX - KB0 * S]
        h = h + (acc,)
    return _join(h, S)


@triton.jit
def _row_from_l1(row_ptr, cols, W, c, TX, scale, border_value, PRO: tl.constexpr, pro_args,
                 interior, RX: tl.constexpr, SXW: tl.constexpr, BORDER: tl.constexpr, OFF64: tl.constexpr,
                 CH: tl.constexpr):
    """Horizontal pass of one input row for wide filters: each tap a shifted load (an L1
    hit after the first) of the block's columns ``cols``, in a run-time loop over chunks
    of CH taps unrolled so that a chunk's loads are in flight together."""
    acc = tl.zeros(cols.shape, dtype=tl.float32)
    for v0 in range(0, (2 * RX + 1) // CH * CH, CH):
        for dv in tl.static_range(CH):
            acc += _l1_tap(row_ptr, cols, v0 + dv, W, c, TX, scale, border_value, PRO, pro_args, interior,
                           RX, SXW, BORDER, OFF64)
    for dv in tl.static_range((2 * RX + 1) % CH):
        acc += _l1_tap(row_ptr, cols, (2 * RX + 1) // CH * CH + dv, W, c, TX, scale, border_value, PRO, pro_args,
                       interior, RX, SXW, BORDER, OFF64)
    return acc


@triton.jit
def _l1_tap(row_ptr, cols, v, W, c, TX, scale, border_value, PRO: tl.constexpr, pro_args, interior: tl.constexpr,
            RX: tl.constexpr, SXW: tl.constexpr, BORDER: tl.constexpr, OFF64: tl.constexpr):
    """Tap v of ``_row_from_l1``: interior strips read plain offsets, border strips remap."""
    cv = cols + (v - RX)
    if interior:
        x = neighbourhood.load(row_ptr + offset(cv, SXW, OFF64), None, border_value, c, PRO, pro_args,
                               neighbourhood.LINEAR, BORDER)
    else:
        x = neighbourhood.load(row_ptr + offset(borders.remap(cv, W, BORDER), SXW, OFF64), borders.inside(cv, W),
                               border_value, c, PRO, pro_args, neighbourhood.LINEAR, BORDER)
    return (tl.load(TX + v) * scale) * x


@triton.jit
def _march(x_base, y_base, TX, tx, ty, tap_sum, scale, c, h0, r0, n_rows, H, W, sxh, syh, border_value,
           col_off, keep, cols, in_off, out_off, out_ok, col_band, interior,
           PRO: tl.constexpr, pro_args, EPI: tl.constexpr, epi_args,
           RX: tl.constexpr, RY: tl.constexpr, SXW: tl.constexpr, BORDER: tl.constexpr, FOLD: tl.constexpr,
           OFF64: tl.constexpr, S: tl.constexpr, KB0: tl.constexpr, NB: tl.constexpr, OXR: tl.constexpr, OY,
           T: tl.constexpr, HREG: tl.constexpr, CH: tl.constexpr):
    """March down input rows r0 .. r0 + n_rows - 1: each row's horizontal result is added
    into the 2*RY pending output rows it touches plus the one it completes, which is
    stored (``_fold_store`` under FOLD). The pending rows are a tuple of registers
    shifted by one slot per row."""
    pending = ()
    for _ in tl.static_range(2 * RY):
        pending = pending + (tl.zeros((T, S), dtype=tl.float32),)
    for i in range(n_rows):
        r = r0 + i
        row_ptr = x_base + offset(borders.remap(r, H, BORDER), sxh, OFF64)
        if HREG:
            h = _row_from_registers(row_ptr, col_off, keep, c, tx, border_value / scale, PRO, pro_args,
                                    RX, BORDER, S, KB0, NB, OXR)
        else:
            h = _row_from_l1(row_ptr, cols, W, c, TX, scale, border_value / scale, PRO, pro_args,
                             interior, RX, SXW, BORDER, OFF64, CH)
        if BORDER == borders.CONSTANT:
            h = tl.where((r >= 0) & (r < H), h, border_value / scale * tap_sum)
        if RY > 0:
            y = pending[0] + ty[2 * RY] * h
            nxt = ()
            for k in tl.static_range(1, 2 * RY):
                nxt = nxt + (pending[k] + ty[2 * RY - k] * h,)
            pending = nxt + (ty[0] * h,)
        else:
            y = ty[0] * h
        o = h0 + i - 2 * RY  # the output row completed by input row r
        if len(EPI) > 0:
            xr = borders.remap(o + OY, H, BORDER)
            x_in = neighbourhood.load(x_base + offset(xr, sxh, OFF64) + in_off, None, 0.0, c, PRO, pro_args,
                                      neighbourhood.UNIT, BORDER)
            y = pointwise.apply_epilogue(y, x_in, c, EPI, epi_args)
        if FOLD < 0:
            pixels.store(y_base + offset(o, syh, OFF64) + out_off, y, out_ok & (i >= 2 * RY))
        else:
            _fold_store(y_base, o + OY, H, syh, out_off, y, out_ok & (i >= 2 * RY), col_band, RY, FOLD, OFF64)


@triton.jit
def _fold_store(y_base, p, H, syh, out_off, y, ok, col_band, RY: tl.constexpr, FOLD: tl.constexpr,
                OFF64: tl.constexpr):
    """Add the extended grid's row ``p`` into the pixels the border ``FOLD`` reads it from
    (``out_off``: the columns' folded offsets; ``borders.fold_add``): pixels within RY + 1
    rows or ``col_band`` columns of an edge also receive margin rows and columns."""
    t = borders.remap(p, H, FOLD)
    borders.fold_add(y_base + offset(t, syh, OFF64) + out_off, y, ok, borders.inside(p, H),
                     col_band | (t <= RY) | (t >= H - 1 - RY), FOLD)


@triton.jit
def strip_kernel(X, Y, TX, TY, C, H, W, HO, WO, OY, OXA,
                 sxb, sxc, sxh, syb, syc, syh, border_value,
                 PRO: tl.constexpr, pro_args, EPI: tl.constexpr, epi_args,
                 RX: tl.constexpr, RY: tl.constexpr, OXR: tl.constexpr,
                 SXW: tl.constexpr, SYW: tl.constexpr, BORDER: tl.constexpr, FOLD: tl.constexpr,
                 OFF64: tl.constexpr, HREG: tl.constexpr, S: tl.constexpr, KB0: tl.constexpr, NB: tl.constexpr,
                 T: tl.constexpr, SEG: tl.constexpr, CH: tl.constexpr):
    """Y[b, c, i, j] = EPI(sum_{u,v} TY[u] TX[v] PRO(X~[b, c, i+OY+u-RY, j+OXA+OXR+v-RX])) for
    (i, j) in [0, HO) x [0, WO), X~ being X extended by the border.

    With FOLD (a border code; -1 for none) the (i, j) grid is instead the border-extended
    grid of an H x W Y, position (i + OY, j + OXA + OXR), and each result is added into
    the pixel the border FOLD reads that position from (``_fold_store``; Y zeroed): the
    adjoint of the border extension, which is the filter's gradient in one launch.

    One program owns a strip of T*S output columns (S per lane) and SEG output rows, and
    marches down its SEG + 2*RY input rows once (``_march``): one launch, no scratch, each
    input pixel read from memory once per strip. Lane l's columns start at a multiple of S
    (OXA is one, OXR in [0, S) the rest of the column offset), so contiguous rows load S
    pixels per lane with one vector load. Interior strips use plain offsets; only strips
    that touch the left or right border (or the output's right edge) remap and mask."""
    b, c, h0, w0 = tile_origin(tl.program_id(0), C, HO, WO, SEG, T * S)
    x_base = X + b * sxb + c * sxc
    y_base = Y + b * syb + c * syc
    scale = neighbourhood.linear_scale(X.dtype.element_ty, PRO)  # folded into the taps, not the pixels
    tx = ()
    tap_sum = 0.0
    if HREG:
        for v in tl.static_range(2 * RX + 1):
            tx = tx + (tl.load(TX + v) * scale,)
    if BORDER == borders.CONSTANT:
        tap_sum = _tap_sum(TX, RX) * scale
    ty = ()
    for u in tl.static_range(2 * RY + 1):
        ty = ty + (tl.load(TY + u),)

    lane = tl.arange(0, T)[:, None] * S + tl.arange(0, S)[None, :]  # column of each output in the strip
    col0 = tl.multiple_of(w0 + OXA, S)  # input column of lane 0's block 0, a multiple of S
    r0 = h0 + OY - RY
    n_rows = tl.minimum(SEG, HO - h0) + 2 * RY
    out_cols = w0 + lane
    # the blocks (HREG) or the taps (L1) of every lane stay inside the image and the strip inside the output
    if HREG:
        interior = (col0 + KB0 * S >= 0) & (col0 + (T + KB0 + NB - 1) * S <= W) & (w0 + T * S <= WO)
    else:
        interior = (col0 + OXR - RX >= 0) & (col0 + OXR + T * S + RX <= W) & (w0 + T * S <= WO)
    in_cols = col0 + OXR + lane
    col_band = False
    if FOLD < 0:
        out_off = offset(out_cols, SYW, OFF64)
        out_ok = out_cols < WO
    else:  # the folded columns, and those that also receive margin columns (atomic adds)
        q = out_cols + OXA + OXR
        tq = borders.remap(q, W, FOLD)
        out_off = offset(tq, SYW, OFF64)
        out_ok = out_cols < WO
        if FOLD == borders.CONSTANT:
            out_ok = out_ok & borders.inside(q, W)
        else:
            col_band = (tq <= RX) | (tq >= W - 1 - RX)
    if interior:
        offs_in = ()
        keep_in = ()
        for k in tl.static_range(NB):
            offs_in = offs_in + (offset(col0 + (lane + k * S + KB0 * S), SXW, OFF64),)
            keep_in = keep_in + (True,)
        x_in_off = offset(in_cols, SXW, OFF64)
        _march(x_base, y_base, TX, tx, ty, tap_sum, scale, c, h0, r0, n_rows, H, W, sxh, syh, border_value,
               offs_in, keep_in, in_cols, x_in_off, out_off, True if FOLD < 0 else out_ok, col_band, True,
               PRO, pro_args, EPI, epi_args, RX, RY, SXW, BORDER, FOLD, OFF64, S, KB0, NB, OXR, OY, T, HREG, CH)
    else:
        offs_edge = ()
        keep_edge = ()
        for k in tl.static_range(NB):
            cols_k = col0 + (lane + k * S + KB0 * S)
            offs_edge = offs_edge + (offset(borders.remap(cols_k, W, BORDER), SXW, OFF64),)
            keep_edge = keep_edge + (borders.inside(cols_k, W),)
        x_edge_off = offset(borders.remap(in_cols, W, BORDER), SXW, OFF64)
        _march(x_base, y_base, TX, tx, ty, tap_sum, scale, c, h0, r0, n_rows, H, W, sxh, syh, border_value,
               offs_edge, keep_edge, in_cols, x_edge_off, out_off, out_ok, col_band, False,
               PRO, pro_args, EPI, epi_args, RX, RY, SXW, BORDER, FOLD, OFF64, S, KB0, NB, OXR, OY, T, HREG, CH)


# ---- the banded products (radii PRODUCT_RADII) ---------------------------------------------

# Radii (the larger of the two) that run as banded products on the tensor cores: wide
# filters, whose horizontal taps the strip would read as shifted L1 loads (PERFORMANCE.md).
PRODUCT_RADII = range(20, 33)
PRODUCT_TILE = dict(B=64, SEG=256, num_warps=4)  # radii up to B // 2 (H200 sweep: PERFORMANCE.md)


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
                   sxb, sxc, sxh, syb, syc, syh, border_value,
                   PRO: tl.constexpr, pro_args, EPI: tl.constexpr, epi_args,
                   RX: tl.constexpr, RY: tl.constexpr, SXW: tl.constexpr, SYW: tl.constexpr,
                   BORDER: tl.constexpr, OFF64: tl.constexpr, PRECISION: tl.constexpr,
                   B: tl.constexpr, SEG: tl.constexpr):
    """``strip_kernel``'s filter (without FOLD) for radii up to B // 2, as products of B x B
    blocks on the tensor cores (tf32x3: float32 accuracy): every tap a multiply-add there
    instead of a load and an FMA on the CUDA cores.

    A program owns B output columns and SEG output rows and marches down them a block of
    B rows at a time. The horizontal pass of B input rows (``_row_block``, the rows
    B // 2 above the block's to B // 2 above the next's) is kept for the next block: each
    output block is the vertical bands times the previous and the new one. Each input
    pixel is loaded once per strip (plus the halo blocks), with vector loads where the
    columns lie inside the image."""
    b, c, h0, w0 = tile_origin(tl.program_id(0), C, HO, WO, SEG, B)
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
            _store_tile(x_base, y_base, h0 + i + tl.arange(0, B), out_cols, y, H, W, HO, WO, OY, OX, sxh, syh, c,
                        PRO, pro_args, EPI, epi_args, SXW, SYW, BORDER, OFF64)
        top = bottom


def _launch_product(x, y, tx, ty, oy, ox, border, border_value, pro, epi, tile):
    B, C, H, W = x.shape
    HO, WO = y.shape[-2:]
    sx, sy = x.stride(), y.stride()
    args = (x, y, tx, ty, C, H, W, HO, WO, oy, ox, sx[0], sx[1], sx[2], sy[0], sy[1], sy[2], float(border_value),
            pro[0], pro[1], epi[0], epi[1])
    meta = dict(RX=(tx.numel() - 1) // 2, RY=(ty.numel() - 1) // 2, SXW=sx[3], SYW=sy[3], BORDER=border,
                OFF64=needs_int64(x, y), PRECISION="ieee" if interpreting() else "tf32x3")
    if interpreting():  # one segment per plane
        tile = dict(tile, SEG=pow2_at_least(HO, tile["B"], 1 << 20))
    grid = programs(B * C, HO, WO, tile["SEG"], tile["B"])
    launch_kernel(product_kernel, lambda m: (grid,), args, meta, x, _tile(tuple(tile.items())))


@functools.lru_cache(maxsize=None)
def strip_config(rx, ry):
    """Tile of ``strip_kernel`` for a filter of radii (rx, ry):
    dict(HREG, S, T, SEG, CH, num_warps), from the H200 sweep in PERFORMANCE.md. The
    pending rows take 2*ry*S registers a lane, the horizontal taps from registers 2*rx + S
    more (and the taps themselves 2*rx + 1): S shrinks as the radii grow. Cached: do not
    modify the dict."""
    if ry <= 7:
        s = 4
    elif ry <= 15:
        s = 2
    else:
        s = 1
    hreg = 2 * rx + s <= 40
    # Fewer rows a segment for short filters (more programs), more for long ones (less halo).
    seg = 48 if ry <= 2 else 96 if ry <= 7 else 128 if ry <= 15 else 256
    return dict(HREG=hreg, S=s, T=64 if s > 1 else 128, SEG=seg, CH=16, num_warps=2 if s > 1 else 4)


@functools.lru_cache(maxsize=64)
def _tile(items):
    """The launch tile of a product configuration (its items): made once, not per call."""
    return tile_config(**dict(items))


@dataclasses.dataclass(frozen=True)
class StripPlan(Plan):
    """A launch of ``strip_kernel`` as ``strip_plan`` chose it, with its first column."""
    oxa: int  # the output's first column rounded down to a multiple of S (the rest is OXR)


@functools.lru_cache(maxsize=4096)
def strip_plan(planes, HO, WO, rx, ry, ox, sxw, syw, border, fold, off64, interpreter, cfg=None):
    """The launch of ``strip_kernel`` over ``planes`` planes of HO x WO outputs (the
    border-extended grid with ``fold`` >= 0, ``launch_adjoint``) for a filter of radii
    (rx, ry) whose first output reads column ``ox``, from the columns' strides ``sxw`` and
    ``syw``: in ``strip_config``'s tile, or ``cfg``'s items; in the interpreter one strip
    and one segment per plane."""
    cfg = dict(cfg) if cfg is not None else strip_config(rx, ry)
    S = cfg["S"]
    if interpreter:
        cfg = dict(cfg, T=pow2_at_least(cdiv(WO, S), 1, 1024), SEG=pow2_at_least(HO, 1, 1 << 20))
    oxa, oxr = ox // S * S, ox % S
    if cfg["HREG"]:
        kb0 = (oxr - rx) // S
        nb = (oxr + S - 1 + rx) // S - kb0 + 1
    else:
        kb0, nb = 0, 0
    meta = Meta(RX=rx, RY=ry, OXR=oxr, SXW=sxw, SYW=syw, BORDER=border, FOLD=fold, OFF64=off64, KB0=kb0, NB=nb)
    return StripPlan(meta, tile_config(**cfg), (programs(planes, HO, WO, cfg["SEG"], cfg["T"] * S),), oxa)


def _launch_strip(x, y, tx, ty, oy, ox, border, border_value, pro, epi, cfg=None, fold=-1):
    B, C, H, W = x.shape
    rx, ry = (tx.numel() - 1) // 2, (ty.numel() - 1) // 2
    HO, WO = y.shape[-2:] if fold < 0 else (H + 2 * ry, W + 2 * rx)
    sx, sy = x.stride(), y.stride()
    plan = strip_plan(B * C, HO, WO, rx, ry, ox, sx[3], sy[3], border, fold, needs_int64(x, y), interpreted(x),
                      None if cfg is None else tuple(cfg.items()))
    args = (x, y, tx, ty, C, H, W, HO, WO, oy, plan.oxa, sx[0], sx[1], sx[2], sy[0], sy[1], sy[2],
            float(border_value), pro[0], pro[1], epi[0], epi[1])
    launch_kernel(strip_kernel, plan.grid, args, plan.meta, x, plan.tile)


def launch(x, y, tx, ty, oy=0, ox=0, border=0, border_value=0.0, pro=((), ()), epi=((), ()),
           tile=None):
    """Run the filter from 4-D ``x`` (B, C, H, W) into 4-D ``y`` (B, C, HO, WO).

    ``tx``/``ty`` are float32 taps on the device (odd lengths), ``pro``/``epi`` are
    (steps, args) chains, ``border`` a code from ``core.borders``. The radii pick the
    kernel: the banded products for ``PRODUCT_RADII``, else the strip up to ``RING_MAX``,
    else the scratch kernel. ``tile`` picks a kernel and its tile instead: a
    ``PRODUCT_TILE``-like dict, a ``strip_config`` dict or one of ``TILES``.
    """
    rx, ry = (tx.numel() - 1) // 2, (ty.numel() - 1) // 2
    if tile is None and max(rx, ry) in PRODUCT_RADII:
        tile = PRODUCT_TILE
    if tile is not None and "B" in tile:
        _launch_product(x, y, tx, ty, oy, ox, border, border_value, pro, epi, tile)
    elif (tile is None and strip_fits(ry, x)) or (tile is not None and "SEG" in tile):
        _launch_strip(x, y, tx, ty, oy, ox, border, border_value, pro, epi, tile)
    else:
        _launch_scratch(x, y, tx, ty, oy, ox, border, border_value, pro, epi, tile)


def strip_fits(ry, x):
    """True when ``launch`` runs the strip kernel on tensor ``x`` for a vertical radius
    ``ry`` (which ``launch_adjoint`` needs); in Triton's interpreter (``interpreted``),
    whose cost is per operation, for fewer rows: the strip's per-row steps cost it seconds
    a row for tall filters, which the scratch kernel does in whole-tile steps."""
    return ry <= (INTERPRETER_RING_MAX if interpreted(x) else RING_MAX)


def launch_adjoint(g, y, fx, fy, fold):
    """The gradient ``y`` (B, C, H, W, float32, zeroed) of the filter under the border
    ``fold``, from the output gradient ``g`` (B, C, H, W); ``fx``/``fy`` are the filter's
    taps flipped. The flipped filter runs over the zero-extended ``g`` on the
    border-extended grid and adds each value into the pixel the border read it from. One
    launch; needs ``strip_fits`` of the vertical radius."""
    rx, ry = (fx.numel() - 1) // 2, (fy.numel() - 1) // 2
    _launch_strip(g, y, fx, fy, -ry, -rx, borders.CONSTANT.value, 0.0, ((), ()), ((), ()), fold=fold)


def _launch_scratch(x, y, tx, ty, oy, ox, border, border_value, pro, epi, tile):
    """``separable_kernel``; ``tile`` (one of ``TILES``) bypasses autotuning. Allocates a
    scratch buffer of at most the output's size (one slot per resident program)."""
    B, C, H, W = x.shape
    HO, WO = y.shape[-2:]
    rx, ry = (tx.numel() - 1) // 2, (ty.numel() - 1) // 2
    halo = halo_rows(ry)
    if interpreting():
        tile = dict(BH=pow2_at_least(HO, 16, 256), BW=pow2_at_least(WO, 16, 256))
        tiles = [tile]
        sms, per_sm = 1, lambda m: 1 << 30
    else:
        tiles = TILES if tile is None else [tile]
        sms = sm_count(x.device)
        per_sm = lambda m: RESIDENT_PER_SM.get((m["BH"], m["BW"]), 2)
    slot = max((t["BH"] + halo) * t["BW"] for t in tiles)
    # scratch: at most one slot per resident program, and never more than the output
    slots = min(sms * max(per_sm(t) for t in tiles), max(1, y.numel() * y.element_size() // (4 * slot)))
    scratch = torch.empty(slots * slot, dtype=torch.float32, device=x.device)
    args = (x, y, scratch, tx, ty, B, C, H, W, HO, WO, oy, ox, x.stride(0), x.stride(1), x.stride(2),
            y.stride(0), y.stride(1), y.stride(2), float(border_value), pro[0], pro[1], epi[0], epi[1])
    meta = dict(RX=rx, RY=ry, HALO=halo, SXW=x.stride(3), SYW=y.stride(3), BORDER=border,
                OFF64=needs_int64(x, y), SLOT=slot, SIZE_CLASS=size_class(HO, WO))
    grid = lambda m: (min(slots, sms * per_sm(m), programs(B * C, HO, WO, m["BH"], m["BW"])),)
    launch_kernel(separable_kernel, grid, args, meta, x, None if tile is None else tile_config(**tile),
                  scratch_tuning)
