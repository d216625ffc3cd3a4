"""``separable_kernel``: the filter for taller filters (vertical radius beyond the strip's,
up to 127 taps) through a per-program scratch slot, its tiles' tuning and its launch.

Output tiles of ``BH x BW``: the horizontal pass of the tile's rows goes to the program's
scratch slot (L1/L2-resident, capped at the output's size), then after a barrier the
vertical pass reads it back shifted by whole rows."""
import torch
import triton
import triton.language as tl

from . import tiles
from .common import _store_tile, _tap_sum, image_taps
from .tiles import UNROLL_TAPS
from ..core import borders, neighbourhood
from ..core.launch import Tuning, launch as launch_kernel, tile_config
from ..core.tiling import (interpreting, needs_int64, next_pow2, offset, pow2_at_least, programs, size_class,
                           sm_count, tile_origin)


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
                     x_strides, y_strides, border_value,
                     PRO: tl.constexpr, pro_args, EPI: tl.constexpr, epi_args,
                     RX: tl.constexpr, RY: tl.constexpr, HALO: tl.constexpr,
                     SXW: tl.constexpr, SYW: tl.constexpr, BORDER: tl.constexpr,
                     OFF64: tl.constexpr, PER_IMAGE: tl.constexpr, SLOT: tl.constexpr, SIZE_CLASS,
                     BH: tl.constexpr, BW: tl.constexpr):
    """Y[b, c, i, j] = EPI(sum_{u,v} TY[u] TX[v] PRO(X~[b, c, i+OY+u-RY, j+OX+v-RX])),
    X~ being X extended by the border, for outputs (i, j) in [0, HO) x [0, WO).
    ``S`` holds ``SLOT`` float32 per program; ``SIZE_CLASS`` only feeds the autotune key.
    PER_IMAGE: as ``strip_kernel``'s."""
    sxb, sxc, sxh = x_strides
    syb, syc, syh = y_strides
    slot = S + tl.program_id(0).to(tl.int64) * SLOT
    i = tl.arange(0, BH)
    j = tl.arange(0, BW)
    tiles = B * C * tl.cdiv(HO, BH) * tl.cdiv(WO, BW)
    for t in range(tl.program_id(0), tiles, tl.num_programs(0)):
        b, c, h0, w0 = tile_origin(t, C, HO, WO, BH, BW)
        tx = image_taps(TX, b, RX, PER_IMAGE)
        ty = image_taps(TY, b, RY, PER_IMAGE)
        x_base = X + b * sxb + c * sxc
        in_col0 = w0 + OX
        interior = (in_col0 - RX >= 0) & (in_col0 + BW + RX <= W)

        # 1. horizontal pass of rows h0+OY-RY .. +BH (+HALO) into the scratch slot
        r, ok = _rows(h0 + OY - RY, BH, H, BORDER)
        acc = _row_pass(x_base, r, in_col0, W, sxh, border_value, c, tx, PRO, pro_args,
                        interior, RX, SXW, BORDER, OFF64, BW)
        if BORDER == borders.CONSTANT:
            acc = tl.where(ok[:, None], acc, border_value * _tap_sum(tx, RX))
        tl.store(slot + i[:, None] * BW + j[None, :], acc)
        if RY > 0:
            r, ok = _rows(h0 + OY - RY + BH, HALO, H, BORDER)
            acc = _row_pass(x_base, r, in_col0, W, sxh, border_value, c, tx, PRO, pro_args,
                            interior, RX, SXW, BORDER, OFF64, BW)
            if BORDER == borders.CONSTANT:
                acc = tl.where(ok[:, None], acc, border_value * _tap_sum(tx, RX))
            h = tl.arange(0, HALO)
            tl.store(slot + (BH + h)[:, None] * BW + j[None, :], acc)
        tl.debug_barrier()

        # 2. vertical pass: whole-row shifts of the slot
        y = tl.zeros((BH, BW), dtype=tl.float32)
        for u in range(2 * RY + 1):  # RY > RING_MAX here: never unrolled
            y += tl.load(ty + u) * tl.load(slot + (i + u)[:, None] * BW + j[None, :])
        tl.debug_barrier()  # the slot is rewritten by the next tile

        _store_tile(x_base, Y + b * syb + c * syc, h0 + i, w0 + j, y, H, W, HO, WO, OY, OX, sxh, syh, b, c, PRO,
                    pro_args, EPI, epi_args, SXW, SYW, BORDER, OFF64)



def halo_rows(ry: int) -> int:
    """Rows computed below a tile for the vertical halo: a power of two >= 2*RY."""
    return next_pow2(2 * ry) if ry > 0 else 1


def scratch_tiles(meta):
    """``TILES`` without those shorter than half the halo (the halo rows would dominate
    the work); the first is the default."""
    halo = halo_rows(meta["RY"])
    kept = [t for t in tiles.TILES if t["BH"] >= halo // 2]
    return [tile_config(**t) for t in kept or [max(tiles.TILES, key=lambda t: t["BH"])]]



scratch_tuning = Tuning(scratch_tiles, key=["RX", "RY", "BORDER", "SXW", "SYW", "PRO", "EPI", "SIZE_CLASS"])


def _launch_scratch(x, y, tx, ty, oy, ox, border, border_value, pro, epi, tile):
    """``separable_kernel``; ``tile`` (one of ``TILES``) bypasses autotuning. Allocates a
    scratch buffer of at most the output's size (one slot per resident program)."""
    B, C, H, W = x.shape
    HO, WO = y.shape[-2:]
    rx, ry = (tx.shape[-1] - 1) // 2, (ty.shape[-1] - 1) // 2
    halo = halo_rows(ry)
    if interpreting():
        tile = dict(BH=pow2_at_least(HO, 16, 256), BW=pow2_at_least(WO, 16, 256))
        candidates = [tile]
        sms, per_sm = 1, lambda m: 1 << 30
    else:
        candidates = tiles.TILES if tile is None else [tile]
        sms = sm_count(x.device)
        per_sm = lambda m: tiles.RESIDENT_PER_SM.get((m["BH"], m["BW"]), 2)
    slot = max((t["BH"] + halo) * t["BW"] for t in candidates)
    # scratch: at most one slot per resident program, and never more than the output
    slots = min(sms * max(per_sm(t) for t in candidates), max(1, y.numel() * y.element_size() // (4 * slot)))
    scratch = torch.empty(slots * slot, dtype=torch.float32, device=x.device)
    args = (x, y, scratch, tx, ty, B, C, H, W, HO, WO, oy, ox, x.stride()[:3], y.stride()[:3], float(border_value),
            pro[0], pro[1], epi[0], epi[1])
    meta = dict(RX=rx, RY=ry, HALO=halo, SXW=x.stride(3), SYW=y.stride(3), BORDER=border,
                OFF64=needs_int64(x, y), PER_IMAGE=tx.ndim == 2, SLOT=slot, SIZE_CLASS=size_class(HO, WO))
    grid = lambda m: (min(slots, sms * per_sm(m), programs(B * C, HO, WO, m["BH"], m["BW"])),)
    launch_kernel(separable_kernel, grid, args, meta, x, None if tile is None else tile_config(**tile),
                  scratch_tuning)
