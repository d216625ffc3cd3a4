"""Separable 2-D correlation: both 1-D passes in one launch, no intermediate image.

A persistent grid of programs walks over output tiles of ``BH x BW`` pixels of one plane.
For each tile:

1. Horizontal pass: for each of the ``2*RX + 1`` taps, load the input rows the tile needs
   (``BH`` rows plus a halo block of ``HALO >= 2*RY`` rows), shifted by the tap, and
   accumulate in float32 registers. Rows are border-remapped once per tile; columns only
   on tiles that touch the left or right border, so interior tiles read
   ``base + constant`` addresses (L1 hits after the first tap).
2. The ``(BH + HALO) x BW`` float32 result goes to this program's slot of a small scratch
   buffer (one slot per resident program, L1/L2-resident, capped at the output's size),
   and after a barrier the vertical pass reads it back shifted by whole rows: aligned,
   vectorised loads, exact float32 FMAs. Triton has no shared-memory API to shift a
   register tile by rows; a product with a banded matrix on the tensor cores was measured
   slower (and tf32 is not float32).

The output grid may be larger than the input and start before it (``OY``, ``OX``): the
adjoint used by autograd evaluates the transposed filter on the zero-extended gradient.
"""
import torch
import triton
import triton.language as tl

from .core import borders, pixels, pointwise
from .core.tiling import (autotuning, interpreting, needs_int64, offset, on_device, pow2_at_least,
                          programs, size_class, sm_count, tile_configs, tile_origin)

MAX_RADIUS = 63  # 127 taps
# The horizontal and vertical tap loops are unrolled up to this many taps and run as loops
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
    # Without a prologue the filter is linear in the stored values: scale the taps
    # (a scalar per tap) rather than every pixel; a prologue needs unit-scale pixels.
    if len(PRO) == 0:
        scale = pixels.unit_scale(x_base.dtype.element_ty)
    else:
        scale = 1.0
    if interior:
        ptrs = x_base + (row_off + offset(in_col0 - RX + j, SXW, OFF64)[None, :])
        if 2 * RX + 1 <= UNROLL_TAPS:
            for v in tl.static_range(2 * RX + 1):
                acc += _interior_tap(ptrs, v, TX, scale, c, PRO, pro_args, SXW)
        else:
            for v in range(2 * RX + 1):
                acc += _interior_tap(ptrs, v, TX, scale, c, PRO, pro_args, SXW)
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
def _interior_tap(ptrs, v, TX, scale, c, PRO: tl.constexpr, pro_args, SXW: tl.constexpr):
    """Tap ``v`` of the horizontal pass on a tile whose columns need no border."""
    return (tl.load(TX + v) * scale) * _pixels(ptrs + v * SXW, c, PRO, pro_args)


@triton.jit
def _border_tap(x_base, row_off, cols, v, W, border_value, TX, scale, c, PRO: tl.constexpr, pro_args,
                SXW: tl.constexpr, BORDER: tl.constexpr, OFF64: tl.constexpr):
    """Tap ``v`` of the horizontal pass reading columns ``cols`` through the border."""
    x = _pixels(x_base + (row_off + offset(borders.remap(cols, W, BORDER), SXW, OFF64)[None, :]), c, PRO, pro_args)
    if BORDER == borders.CONSTANT:
        x = tl.where(borders.inside(cols, W)[None, :], x, border_value / scale)
    return (tl.load(TX + v) * scale) * x


@triton.jit
def _pixels(ptrs, c, PRO: tl.constexpr, pro_args):
    """Pixels for the horizontal pass: stored values as float32 when there is no
    prologue (the caller folds the unit scale into the taps), else PRO(unit scale)."""
    if len(PRO) == 0:
        return pixels.load_raw(ptrs)
    else:
        return pointwise.apply_chain(pixels.load(ptrs), c, PRO, pro_args)


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
        if 2 * RY + 1 <= UNROLL_TAPS:
            for u in tl.static_range(2 * RY + 1):
                y += tl.load(TY + u) * tl.load(slot + (i + u)[:, None] * BW + j[None, :])
        else:
            for u in range(2 * RY + 1):
                y += tl.load(TY + u) * tl.load(slot + (i + u)[:, None] * BW + j[None, :])
        tl.debug_barrier()  # the slot is rewritten by the next tile

        out_rows = h0 + i
        out_cols = w0 + j
        if len(EPI) > 0:
            xr = borders.remap(out_rows + OY, H, BORDER)
            xc = borders.remap(out_cols + OX, W, BORDER)
            x_in = pixels.load(x_base + (offset(xr, sxh, OFF64)[:, None] + offset(xc, SXW, OFF64)[None, :]))
            x_in = pointwise.apply_chain(x_in, c, PRO, pro_args)
            y = pointwise.apply_epilogue(y, x_in, c, EPI, epi_args)
        mask = (out_rows < HO)[:, None] & (out_cols < WO)[None, :]
        y_ptrs = Y + b * syb + c * syc + (offset(out_rows, syh, OFF64)[:, None] + offset(out_cols, SYW, OFF64)[None, :])
        pixels.store(y_ptrs, y, mask)


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
    return triton.next_power_of_2(2 * ry) if ry > 0 else 1


def _prune(configs_, named_args, **kwargs):
    """Drop tiles shorter than half the halo (the halo rows would dominate the work)."""
    halo = halo_rows(kwargs["RY"])
    kept = [c for c in configs_ if c.kwargs["BH"] >= halo // 2]
    return kept or [max(configs_, key=lambda c: c.kwargs["BH"])]


# Candidate tiles, and how many programs of each fit on one SM: the register count bounds
# residency, and a persistent grid larger than what is resident runs as extra waves.
# Registers as ptxas reports them for sm_90 with the JIT's specialisation (aligned
# pointers), the worse of float32 and uint8, 15 taps: 255, 80 and 105 (31 taps, when they
# were still unrolled: 255, 128, 163). The unrolled tap loop hoists its loads, so 8 pixels
# a thread is what keeps a tile near 100 registers; 16 (the 970f89a set, measured in
# PERFORMANCE.md) reached 166-255.
TILES = [dict(BH=64, BW=32, num_warps=8), dict(BH=32, BW=64, num_warps=8), dict(BH=16, BW=128, num_warps=4)]
RESIDENT_PER_SM = {(64, 32): 3, (32, 64): 2, (16, 128): 2}
DEFAULT_TILE = TILES[0]  # lowest registers at every tap count measured; 1.25x halo rows at 15 taps
separable_tuned = triton.autotune(
    configs=tile_configs(TILES),
    key=["RX", "RY", "BORDER", "SXW", "SYW", "PRO", "EPI", "SIZE_CLASS"],
    prune_configs_by={"early_config_prune": _prune},
)(separable_kernel)


def launch(x, y, tx, ty, oy=0, ox=0, border=0, border_value=0.0, pro=((), ()), epi=((), ()),
           tile=None):
    """Run the filter from 4-D ``x`` (B, C, H, W) into 4-D ``y`` (B, C, HO, WO).

    ``tx``/``ty`` are float32 taps on the device (odd lengths), ``pro``/``epi`` are
    (steps, args) chains, ``border`` a code from ``core.borders``; ``tile`` (one of
    ``TILES``) bypasses autotuning. Allocates a scratch buffer of at most the output's
    size (one slot per resident program).
    """
    B, C, H, W = x.shape
    HO, WO = y.shape[-2:]
    rx, ry = (tx.numel() - 1) // 2, (ty.numel() - 1) // 2
    halo = halo_rows(ry)
    if interpreting():
        tiles = [dict(BH=pow2_at_least(HO, 16, 256), BW=pow2_at_least(WO, 16, 256))]
        sms, per_sm = 1, lambda m: 1 << 30
    else:
        if tile is None and not autotuning():
            tile = DEFAULT_TILE
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
    with on_device(x):
        if len(tiles) == 1:
            separable_kernel[grid(tiles[0])](*args, **meta, **tiles[0])
        else:
            separable_tuned[grid](*args, **meta)
