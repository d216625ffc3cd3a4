"""Morphology's direct pass: ``taps_kernel``, each output the min (max) over a table
of taps, on the image or on the stacked planes of a mask's row runs."""
import triton
import triton.language as tl

from ..core.tiling import offset, tile_origin
from .common import _finish, _index, _load, _pick


@triton.jit
def _table_tap(x_base, ptrs, rows, cols, TAPS, k, H, W, XW, sxd, sxh, border_value, c, PRO: tl.constexpr, pro_args,
               SXW: tl.constexpr, BORDER: tl.constexpr, OFF64: tl.constexpr, SOURCE: tl.constexpr,
               STACKED: tl.constexpr, INTERIOR: tl.constexpr):
    """Tap ``k`` of the table (du, dv, d): the image at (rows + du, cols + dv) through the
    border, or plane d of the stacked buffer there (its columns always inside); ``ptrs``
    the tile's pointers when ``INTERIOR``."""
    du = tl.load(TAPS + 3 * k).to(tl.int32)
    dv = tl.load(TAPS + 3 * k + 1).to(tl.int32)
    plane = 0
    if STACKED:  # (the planes together may pass 2**31 where one does not)
        plane = tl.load(TAPS + 3 * k + 2).to(tl.int64) * sxd
    if INTERIOR:
        return _load(ptrs + (offset(du, sxh, OFF64) + offset(dv, SXW, OFF64) + plane), None, border_value, c, PRO,
                     pro_args, SOURCE, BORDER)
    else:
        r, r_in = _index(rows + du, H, BORDER)
        if STACKED:
            q = tl.minimum(cols + dv, XW - 1)
            inside = r_in
        else:
            q, q_in = _index(cols + dv, W, BORDER)
            inside = r_in & q_in
        return _load(x_base + plane + offset(r, sxh, OFF64) + offset(q, SXW, OFF64), inside, border_value, c, PRO,
                     pro_args, SOURCE, BORDER)


@triton.jit
def _taps_min(x_base, rows, cols, TAPS, NT, H, W, XW, sxd, sxh, border_value, c, PRO: tl.constexpr, pro_args,
              SXW: tl.constexpr, BORDER: tl.constexpr, OFF64: tl.constexpr, DILATE: tl.constexpr,
              SOURCE: tl.constexpr, STACKED: tl.constexpr, INTERIOR: tl.constexpr, DTAPS: tl.constexpr):
    """``taps_kernel``'s min over its taps, for a tile whose reads all lie inside the image
    (``INTERIOR``: plain offsets) or not (remapped, the constant border). Interior tiles of
    a direct pass take the taps as constants (``DTAPS``), unrolled: a row's pointers once,
    its columns as the loads' immediate offsets; the rest loop over the table at run time
    (a small program: the border tiles are few; unrolled, the runs of a 15 x 15 ellipse
    took 0.379 ms against the table's 0.345 on the H100, PERFORMANCE.md)."""
    ptrs = x_base
    if INTERIOR:
        ptrs = x_base + offset(rows, sxh, OFF64) + offset(cols, SXW, OFF64)
    if INTERIOR and len(DTAPS) > 0:
        y = _load(ptrs + offset(tl.full((), DTAPS[0][0], tl.int32), sxh, OFF64) + DTAPS[0][1] * SXW, None,
                  border_value, c, PRO, pro_args, SOURCE, BORDER)
        for k in tl.static_range(1, len(DTAPS)):
            row_ptrs = ptrs + offset(tl.full((), DTAPS[k][0], tl.int32), sxh, OFF64)
            y = _pick(y, _load(row_ptrs + DTAPS[k][1] * SXW, None, border_value, c, PRO, pro_args, SOURCE, BORDER),
                      DILATE)
    else:
        y = _table_tap(x_base, ptrs, rows, cols, TAPS, 0, H, W, XW, sxd, sxh, border_value, c, PRO, pro_args, SXW,
                       BORDER, OFF64, SOURCE, STACKED, INTERIOR)
        for k in range(1, NT):
            y = _pick(y, _table_tap(x_base, ptrs, rows, cols, TAPS, k, H, W, XW, sxd, sxh, border_value, c, PRO,
                                    pro_args, SXW, BORDER, OFF64, SOURCE, STACKED, INTERIOR), DILATE)
    return y


@triton.jit(do_not_specialize=["NT", "DU0", "DU1", "DV0", "DV1", "C", "H", "W", "XW", "sxd", "sxb", "sxc", "sxh",
                               "syb", "syc", "syh", "szb", "szc", "szh"])
def taps_kernel(X, Y, Z, TAPS, NT, DU0, DU1, DV0, DV1, C, H, W, XW, sxd, sxb, sxc, sxh, syb, syc, syh, szb, szc,
                szh, border_value, PRO: tl.constexpr, pro_args, EPI: tl.constexpr, epi_args, SXW: tl.constexpr,
                SYW: tl.constexpr, SZW: tl.constexpr, BORDER: tl.constexpr, OFF64: tl.constexpr,
                DILATE: tl.constexpr, SOURCE: tl.constexpr, STACKED: tl.constexpr, SUB: tl.constexpr,
                Z_INPUT: tl.constexpr, LEVELS: tl.constexpr, DTAPS: tl.constexpr, BH: tl.constexpr,
                BW: tl.constexpr):
    """Y[b, c, i, j] = finish(min over the NT taps (du, dv, d) of X~[d, b, c, i + du, j + dv]):
    ``TAPS`` holds (du, dv, d) triples as floats, du in [DU0, DU1], dv in [DV0, DV1]; or
    ``DTAPS`` the (du, dv) pairs as constants (direct passes: one compile per mask).
    ``SOURCE``: how X is read (``_load``). ``STACKED``: X is the row pass's
    stacked buffer of ``XW`` columns, plane d a run length, read at columns j + dv (always
    inside); otherwise one plane of the image's size, columns through the border."""
    b, c, h0, w0 = tile_origin(tl.program_id(0), C, H, W, BH, BW)
    x_base = X + b * sxb + c * sxc
    rows = h0 + tl.arange(0, BH)[:, None]
    cols = w0 + tl.arange(0, BW)[None, :]
    if STACKED:
        cols_inside = True
    else:
        cols_inside = (w0 + DV0 >= 0) & (w0 + BW + DV1 <= W)
    if (h0 + DU0 >= 0) & (h0 + BH + DU1 <= H) & cols_inside:
        y = _taps_min(x_base, rows, cols, TAPS, NT, H, W, XW, sxd, sxh, border_value, c, PRO, pro_args, SXW, BORDER,
                      OFF64, DILATE, SOURCE, STACKED, True, DTAPS)
    else:
        y = _taps_min(x_base, rows, cols, TAPS, NT, H, W, XW, sxd, sxh, border_value, c, PRO, pro_args, SXW, BORDER,
                      OFF64, DILATE, SOURCE, STACKED, False, DTAPS)
    ok = (rows < H) & (cols < W)
    _finish(y, X.dtype.element_ty, SOURCE, Y + b * syb + c * syc + offset(rows, syh, OFF64) + offset(cols, SYW, OFF64),
            Z + b * szb + c * szc + offset(rows, szh, OFF64) + offset(cols, SZW, OFF64), ok, b, c, PRO, pro_args,
            EPI, epi_args, SUB, Z_INPUT, LEVELS)
