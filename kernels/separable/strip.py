"""``strip_kernel``: the register strip (vertical radius <= ``tiles.RING_MAX``), its
plan (``strip_config``, ``strip_plan``) and its launch, forward (``_launch_strip``) and,
with FOLD, the adjoint's (``launch_adjoint``).

A program owns a strip of ``T*S`` output columns and ``SEG`` output rows and marches
down its input rows once (``_march``), each input row's horizontal result from registers
(``_row_from_registers``) or shifted L1 loads (``_row_from_l1``) added into the ``2*RY``
pending output rows."""
import dataclasses
import functools

import triton
import triton.language as tl

from .common import _tap_sum, image_taps
from ..core import borders, neighbourhood, pixels, pointwise
from ..core.launch import Meta, Plan, launch as launch_kernel, tile_config
from ..core.tiling import cdiv, interpreted, needs_int64, offset, pow2_at_least, programs, tile_origin


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
def _march(x_base, y_base, TX, tx, ty, tap_sum, scale, b, c, h0, r0, n_rows, H, W, sxh, syh, border_value,
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
            y = pointwise.apply_epilogue(y, x_in, b, c, EPI, epi_args)
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
                 x_strides, y_strides, border_value,
                 PRO: tl.constexpr, pro_args, EPI: tl.constexpr, epi_args,
                 RX: tl.constexpr, RY: tl.constexpr, OXR: tl.constexpr,
                 SXW: tl.constexpr, SYW: tl.constexpr, BORDER: tl.constexpr, FOLD: tl.constexpr,
                 OFF64: tl.constexpr, PER_IMAGE: tl.constexpr, HREG: tl.constexpr, S: tl.constexpr,
                 KB0: tl.constexpr, NB: tl.constexpr, T: tl.constexpr, SEG: tl.constexpr, CH: tl.constexpr):
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
    that touch the left or right border (or the output's right edge) remap and mask.
    PER_IMAGE: TX and TY are (B, 2*R + 1) tables, a row per image."""
    b, c, h0, w0 = tile_origin(tl.program_id(0), C, HO, WO, SEG, T * S)
    TX = image_taps(TX, b, RX, PER_IMAGE)
    TY = image_taps(TY, b, RY, PER_IMAGE)
    sxb, sxc, sxh = x_strides
    syb, syc, syh = y_strides
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
        _march(x_base, y_base, TX, tx, ty, tap_sum, scale, b, c, h0, r0, n_rows, H, W, sxh, syh, border_value,
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
        _march(x_base, y_base, TX, tx, ty, tap_sum, scale, b, c, h0, r0, n_rows, H, W, sxh, syh, border_value,
               offs_edge, keep_edge, in_cols, x_edge_off, out_off, out_ok, col_band, False,
               PRO, pro_args, EPI, epi_args, RX, RY, SXW, BORDER, FOLD, OFF64, S, KB0, NB, OXR, OY, T, HREG, CH)


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


@dataclasses.dataclass(frozen=True)
class StripPlan(Plan):
    """A launch of ``strip_kernel`` as ``strip_plan`` chose it, with its first column."""
    oxa: int  # the output's first column rounded down to a multiple of S (the rest is OXR)


@functools.lru_cache(maxsize=4096)
def strip_plan(planes, HO, WO, rx, ry, ox, sxw, syw, border, fold, off64, interpreter, cfg=None, per_image=False):
    """The launch of ``strip_kernel`` over ``planes`` planes of HO x WO outputs (the
    border-extended grid with ``fold`` >= 0, ``launch_adjoint``) for a filter of radii
    (rx, ry) whose first output reads column ``ox``, from the columns' strides ``sxw`` and
    ``syw``: in ``strip_config``'s tile, or ``cfg``'s items; in the interpreter one strip
    and one segment per plane. ``per_image``: the taps are a row per image."""
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
    meta = Meta(RX=rx, RY=ry, OXR=oxr, SXW=sxw, SYW=syw, BORDER=border, FOLD=fold, OFF64=off64, PER_IMAGE=per_image,
                KB0=kb0, NB=nb)
    return StripPlan(meta, tile_config(**cfg), (programs(planes, HO, WO, cfg["SEG"], cfg["T"] * S),), oxa)


def _launch_strip(x, y, tx, ty, oy, ox, border, border_value, pro, epi, cfg=None, fold=-1):
    B, C, H, W = x.shape
    rx, ry = (tx.shape[-1] - 1) // 2, (ty.shape[-1] - 1) // 2
    HO, WO = y.shape[-2:] if fold < 0 else (H + 2 * ry, W + 2 * rx)
    sx, sy = x.stride(), y.stride()
    plan = strip_plan(B * C, HO, WO, rx, ry, ox, sx[3], sy[3], border, fold, needs_int64(x, y), interpreted(x),
                      None if cfg is None else tuple(cfg.items()), tx.ndim == 2)
    args = (x, y, tx, ty, C, H, W, HO, WO, oy, plan.oxa, sx[:3], sy[:3],
            float(border_value), pro[0], pro[1], epi[0], epi[1])
    launch_kernel(strip_kernel, plan.grid, args, plan.meta, x, plan.tile)
