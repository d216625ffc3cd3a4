"""Morphology's van Herk passes for windows longer than ``plan.MARCH_WIDTH`` /
``plan.MARCH_HEIGHT``: two segmented scans of a tile along its rows (``row_kernel``) or
columns (``column_kernel``)."""
import triton
import triton.language as tl

from ..core.tiling import offset, tile_origin
from .common import _NAN, _finish, _index, _load, _pick


@triton.jit
def _seg_min(av, aseg, bv, bseg):
    """Segmented minimum: the combine of a scan that restarts where the segment changes."""
    return tl.where(aseg == bseg, tl.minimum(av, bv, propagate_nan=_NAN), bv), bseg


@triton.jit
def _seg_max(av, aseg, bv, bseg):
    return tl.where(aseg == bseg, tl.maximum(av, bv, propagate_nan=_NAN), bv), bseg


@triton.jit
def _van_herk(first, last, seg_first, seg_last, AXIS: tl.constexpr, DILATE: tl.constexpr):
    """Window minima (maxima) of ``k`` positions along AXIS: ``first`` holds the values at
    each window's first position, ``last`` at its last (``k - 1`` further), ``seg_*`` their
    segment numbers (position // k along the tile): the reversed segmented scan of
    ``first`` meets the forward one of ``last``."""
    if DILATE:
        suffix, _ = tl.associative_scan((first, seg_first), AXIS, _seg_max, reverse=True)
        prefix, _ = tl.associative_scan((last, seg_last), AXIS, _seg_max)
    else:
        suffix, _ = tl.associative_scan((first, seg_first), AXIS, _seg_min, reverse=True)
        prefix, _ = tl.associative_scan((last, seg_last), AXIS, _seg_min)
    return _pick(suffix, prefix, DILATE)


@triton.jit
def _line(x_base, fixed_off, first, n, stride, border_value, c, PRO: tl.constexpr, pro_args,
          LENGTH: tl.constexpr, AXIS: tl.constexpr, BORDER: tl.constexpr, OFF64: tl.constexpr,
          DILATE: tl.constexpr, SOURCE: tl.constexpr, INTERIOR: tl.constexpr, BH: tl.constexpr, BW: tl.constexpr):
    """The min over ``LENGTH`` positions along AXIS from ``first`` (indices along that axis
    of an axis of ``n`` pixels, ``stride`` apart; ``fixed_off`` the offsets of the other
    axis) by van Herk's two scans of the tile: ``first`` counts tile positions, LENGTH of
    which make a segment."""
    last = first + (LENGTH - 1)
    if INTERIOR:  # the indices as they are, no select (a None from a helper fails to compile on Triton 3.6)
        x1 = _load(x_base + fixed_off + offset(first, stride, OFF64), None, border_value, c, PRO, pro_args, SOURCE,
                   BORDER)
        x2 = _load(x_base + fixed_off + offset(last, stride, OFF64), None, border_value, c, PRO, pro_args, SOURCE,
                   BORDER)
    else:
        i1, in1 = _index(first, n, BORDER)
        i2, in2 = _index(last, n, BORDER)
        x1 = _load(x_base + fixed_off + offset(i1, stride, OFF64), in1, border_value, c, PRO, pro_args, SOURCE,
                   BORDER)
        x2 = _load(x_base + fixed_off + offset(i2, stride, OFF64), in2, border_value, c, PRO, pro_args, SOURCE,
                   BORDER)
    if AXIS == 1:
        t = tl.arange(0, BW)[None, :]
    else:
        t = tl.arange(0, BH)[:, None]
    return _van_herk(x1, x2, tl.broadcast_to(t // LENGTH, (BH, BW)), tl.broadcast_to((t + (LENGTH - 1)) // LENGTH,
                                                                                      (BH, BW)), AXIS, DILATE)


@triton.jit(do_not_specialize=["C", "H", "W", "WO", "S0", "sxb", "sxc", "sxh", "syb", "syc", "syh"])
def row_kernel(X, Y, C, H, W, WO, S0, sxb, sxc, sxh, syb, syc, syh, border_value,
               PRO: tl.constexpr, pro_args, WIDTH: tl.constexpr, SXW: tl.constexpr, SYW: tl.constexpr,
               BORDER: tl.constexpr, OFF64: tl.constexpr, DILATE: tl.constexpr, SOURCE: tl.constexpr,
               BH: tl.constexpr, BW: tl.constexpr, STEP: tl.constexpr):
    """Y[b, c, i, j] = min over t < WIDTH of X~[b, c, i, j + S0 + t] for j < WO (columns
    through the border, rows i < H as they are), for windows wider than ``MARCH_WIDTH``, by
    van Herk's scans: a program's tile is BH rows by BW positions, STEP = BW - WIDTH + 1 of
    which are outputs. Tiles whose columns all lie inside the image read them without the
    border's remapping."""
    b, c, h0, w0 = tile_origin(tl.program_id(0), C, H, WO, BH, STEP)
    x_base = X + b * sxb + c * sxc
    rows = h0 + tl.arange(0, BH)[:, None]
    t = tl.arange(0, BW)[None, :]
    row_off = offset(tl.minimum(rows, H - 1), sxh, OFF64)
    first = w0 + S0 + t
    if (w0 + S0 >= 0) & (w0 + S0 + BW + WIDTH - 1 <= W):
        y = _line(x_base, row_off, first, W, SXW, border_value, c, PRO, pro_args, WIDTH, 1, BORDER, OFF64, DILATE,
                  SOURCE, True, BH, BW)
    else:
        y = _line(x_base, row_off, first, W, SXW, border_value, c, PRO, pro_args, WIDTH, 1, BORDER, OFF64, DILATE,
                  SOURCE, False, BH, BW)
    ok = (rows < H) & (t < STEP) & (w0 + t < WO)
    y_ptrs = Y + b * syb + c * syc + offset(rows, syh, OFF64) + offset(w0 + t, SYW, OFF64)
    _finish(y, X.dtype.element_ty, SOURCE, y_ptrs, y_ptrs, ok, b, c, PRO, pro_args, (), (), 0, False, 0)


@triton.jit(do_not_specialize=["C", "H", "W", "S0", "sxb", "sxc", "sxh", "syb", "syc", "syh", "szb", "szc", "szh"])
def column_kernel(X, Y, Z, C, H, W, S0, sxb, sxc, sxh, syb, syc, syh, szb, szc, szh, border_value,
                  PRO: tl.constexpr, pro_args, EPI: tl.constexpr, epi_args, HEIGHT: tl.constexpr,
                  SXW: tl.constexpr, SYW: tl.constexpr, SZW: tl.constexpr, BORDER: tl.constexpr,
                  OFF64: tl.constexpr, DILATE: tl.constexpr, SOURCE: tl.constexpr,
                  SUB: tl.constexpr, Z_INPUT: tl.constexpr, LEVELS: tl.constexpr, BH: tl.constexpr, BW: tl.constexpr,
                  STEP: tl.constexpr):
    """Y[b, c, i, j] = finish(min over t < HEIGHT of X~[b, c, i + S0 + t, j]) (rows through
    the border), for windows taller than ``MARCH_HEIGHT``: ``row_kernel`` along the other
    axis, STEP output rows a tile."""
    b, c, h0, w0 = tile_origin(tl.program_id(0), C, H, W, STEP, BW)
    x_base = X + b * sxb + c * sxc
    t = tl.arange(0, BH)[:, None]
    cols = w0 + tl.arange(0, BW)[None, :]
    col_off = offset(tl.minimum(cols, W - 1), SXW, OFF64)
    first = h0 + S0 + t
    if (h0 + S0 >= 0) & (h0 + S0 + BH + HEIGHT - 1 <= H):
        y = _line(x_base, col_off, first, H, sxh, border_value, c, PRO, pro_args, HEIGHT, 0, BORDER, OFF64, DILATE,
                  SOURCE, True, BH, BW)
    else:
        y = _line(x_base, col_off, first, H, sxh, border_value, c, PRO, pro_args, HEIGHT, 0, BORDER, OFF64, DILATE,
                  SOURCE, False, BH, BW)
    out_rows = h0 + t
    ok = (t < STEP) & (out_rows < H) & (cols < W)
    _finish(y, X.dtype.element_ty, SOURCE,
            Y + b * syb + c * syc + offset(out_rows, syh, OFF64) + offset(cols, SYW, OFF64),
            Z + b * szb + c * szc + offset(out_rows, szh, OFF64) + offset(cols, SZW, OFF64), ok, b, c, PRO, pro_args,
            EPI, epi_args, SUB, Z_INPUT, LEVELS)
